/**
 * The sandbox adapter's source text. The adapter (see lib/runtime/sandbox/prelude.js for its
 * contract) is kept as FRAGMENTS in lib/runtime/sandbox/, one job each; they are concatenated
 * here, in a fixed order, inside one strict-mode IIFE, so they share one closure scope and the
 * engines evaluate a single classic script, as before. The build copies the fragments to
 * dist/cjs/runtime/sandbox/.
 */
import * as fs from 'node:fs';
import * as path from 'node:path';

/** The fragments, in load order: the prelude first (captured builtins, __host), entry last (__sa). */
export const ADAPTER_FILES: readonly string[] = Object.freeze([
  'prelude.js',
  'encoding.js',
  'host.js',
  'enumeration.js',
  'response-state.js',
  'response-helpers.js',
  'response.js',
  'request-snapshot.js',
  'request.js',
  'ctx.js',
  'serialize.js',
  'platform.js',
  'console.js',
  'entry.js',
]);

const cache = new Map<string, string>();

/** The adapter script built from the fragments in `dir`; read once per directory, then cached. */
export function adapterSource(dir: string = path.join(__dirname, 'sandbox')): string {
  const key = path.resolve(dir);
  let src = cache.get(key);
  if (src === undefined) {
    const fragments = ADAPTER_FILES.map((f) => fs.readFileSync(path.join(key, f), 'utf8'));
    src = "(function () {\n'use strict';\n" + fragments.join('\n') + '\n})();\n';
    cache.set(key, src);
  }
  return src;
}
