/**
 * The JSON Schemas shipped in `schemas/` (api-definition.json, automation.json) are the
 * validators' own rules: a definition is checked against its schema with ajv, so an editor using
 * the schema and the library can never disagree. A failure becomes one message naming the field,
 * from the schema's `x-message` annotations (the library's wording) or from ajv's own.
 */
import * as fs from 'node:fs';
import * as path from 'node:path';
import type { default as AjvClass, ErrorObject, ValidateFunction } from 'ajv';
import { nearestName, shown } from './names';
import { AJV_OPTIONS, type SCHEMA_NAMES } from './ajv-options';

export type SchemaName = (typeof SCHEMA_NAMES)[number];

/** Where the package keeps its schemas (dist/cjs/definitions → the package root). */
export const SCHEMA_DIR = path.resolve(__dirname, '..', '..', '..', 'schemas');

let ajv: AjvClass | undefined;
const compiled = new Map<SchemaName, ValidateFunction>();

/**
 * The validator of a schema: the standalone code scripts/build.js generated from the schema file
 * (`validate-<name>.js` beside this module: a few ms to load), or, when it is missing, the schema
 * compiled now with ajv (~50 ms to load and compile).
 */
function validator(name: SchemaName): ValidateFunction {
  let v = compiled.get(name);
  if (v === undefined) {
    const built = path.join(__dirname, `validate-${name}.js`);
    if (fs.existsSync(built)) {
      // eslint-disable-next-line @typescript-eslint/no-require-imports
      v = require(built) as ValidateFunction;
    } else {
      // eslint-disable-next-line @typescript-eslint/no-require-imports
      const Ajv = (require('ajv') as { default: typeof AjvClass }).default;
      ajv ??= new Ajv({ ...AJV_OPTIONS, keywords: [...AJV_OPTIONS.keywords] });
      v = ajv.compile(JSON.parse(fs.readFileSync(path.join(SCHEMA_DIR, `${name}.json`), 'utf8')) as Record<string, unknown>);
    }
    compiled.set(name, v);
  }
  return v;
}

/** A schema failure: where (object keys and array indexes from the root) and why. */
export interface SchemaProblem {
  path: Array<string | number>;
  message: string;
}

function pathOf(instancePath: string, root: unknown): Array<string | number> {
  const out: Array<string | number> = [];
  let at: unknown = root;
  for (const raw of instancePath.split('/').slice(1)) {
    const key = raw.replace(/~1/g, '/').replace(/~0/g, '~');
    const index = Array.isArray(at) ? Number(key) : NaN;
    out.push(Number.isInteger(index) ? index : key);
    at = at !== null && typeof at === 'object' ? (at as Record<string, unknown>)[key] : undefined;
  }
  return out;
}

function template(text: string, value: unknown): string {
  return text.replace(/\{(value|raw)\}/g, (_, which: string) => (which === 'raw' && typeof value === 'string' ? value : shown(value)));
}

/** The schema's own message for a keyword of this (sub)schema, if it has one. */
function annotated(schema: unknown, keyword: string): string | undefined {
  const m = (schema as Record<string, unknown> | undefined)?.['x-message'];
  if (typeof m === 'string') return m;
  if (m && typeof m === 'object') {
    const byKeyword = (m as Record<string, unknown>)[keyword];
    if (typeof byKeyword === 'string') return byKeyword;
  }
  return undefined;
}

function describe(e: ErrorObject, root: unknown): SchemaProblem {
  const where = pathOf(e.instancePath, root);
  if (typeof e.propertyName === 'string') where.push(e.propertyName); // (a rule on the names of an object's keys)
  const parent = e.parentSchema as Record<string, unknown> | undefined;
  switch (e.keyword) {
    case 'required': {
      const missing = String((e.params as { missingProperty: string }).missingProperty);
      const own = (parent?.properties as Record<string, unknown> | undefined)?.[missing];
      const text = annotated(own, 'required') ?? annotated(own, 'type');
      return { path: [...where, missing], message: text !== undefined ? template(text, undefined) : 'is required' };
    }
    case 'additionalProperties': {
      const text = annotated(parent, 'additionalProperties');
      if (text !== undefined) return { path: where, message: template(text, e.data) };
      const extra = String((e.params as { additionalProperty: string }).additionalProperty);
      const near = nearestName(extra, Object.keys((parent?.properties as object | undefined) ?? {}));
      return { path: [...where, extra], message: `is not a field${near ? ` (did you mean '${near}'?)` : ''}` };
    }
    default: {
      const text = annotated(parent, e.keyword);
      return { path: where, message: text !== undefined ? template(text, e.data) : `${e.message ?? 'is invalid'}, got ${shown(e.data)}` };
    }
  }
}

/** Checks `value` against a shipped schema: null when it conforms, else the first problem. */
export function checkSchema(name: SchemaName, value: unknown): SchemaProblem | null {
  const v = validator(name);
  if (v(value)) return null;
  // an `if`/`then` failure is reported after the failure inside `then`, which names the field
  const errors = (v.errors ?? []).filter((e) => e.keyword !== 'if' && e.keyword !== 'propertyNames');
  let first = errors[0] ?? v.errors![0];
  // a field missing beside an unknown one is most likely that one misspelt: name the unknown one
  if (first.keyword === 'required') {
    const typo = errors.find((e) => e.keyword === 'additionalProperties' && e.instancePath === first.instancePath);
    if (typo) first = typo;
  }
  return describe(first, value);
}

/** `a.b[2].c` from a path. */
export function dotted(p: ReadonlyArray<string | number>): string {
  return p.map((k) => (typeof k === 'number' ? `[${k}]` : `.${k}`)).join('');
}
