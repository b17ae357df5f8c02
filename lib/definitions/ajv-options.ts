/**
 * The ajv options the definition validators are compiled with, at build time (scripts/build.js
 * turns schemas/*.json into standalone validators in dist/cjs/definitions/) and, without those,
 * at run time. `verbose` keeps each failing subschema in its error: the `x-message` annotations
 * are read from it.
 */
export const AJV_OPTIONS = {
  allErrors: true,
  verbose: true,
  strict: true,
  strictTypes: false,
  strictTuples: false,
  strictRequired: false,
  strictNumbers: true,
  keywords: ['x-message'],
} as const;

/** The schemas of schemas/ the validators check, by name (file `schemas/<name>.json`). */
export const SCHEMA_NAMES = ['api-definition', 'automation'] as const;
