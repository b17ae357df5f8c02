/**
 * The sandbox adapter's source text: the fragments of lib/runtime/sandbox/ (one job each; see
 * prelude.js for the contract) joined, in a fixed order, into ONE strict-mode function expression
 * `(function (hostFn) { ... return entry; })`. An engine evaluates it in a fresh context, calls
 * the function with its host bridge and keeps the entry it returns: nothing of the adapter is
 * ever on the global object. The build copies the fragments to dist/cjs/runtime/sandbox/.
 */
import * as fs from 'node:fs';
import * as path from 'node:path';

/** The fragments, in load order: the prelude first (captured builtins), entry last (returns the entry). */
export const ADAPTER_FILES: readonly string[] = Object.freeze([
  'prelude.js',
  'encoding.js',
  'host.js',
  'enumeration.js',
  'response-state.js',
  'response-helpers.js',
  'response.js',
  'request.js',
  'ctx.js',
  'serialize.js',
  'platform.js',
  'console.js',
  'entry.js',
]);

const cache = new Map<string, string>();

/** The adapter built from the fragments in `dir`; read once per directory, then cached. */
export function adapterSource(dir: string = path.join(__dirname, 'sandbox')): string {
  const key = path.resolve(dir);
  let src = cache.get(key);
  if (src === undefined) {
    const fragments = ADAPTER_FILES.map((f) => fs.readFileSync(path.join(key, f), 'utf8'));
    src = "(function (hostFn) {\n'use strict';\n" + fragments.join('\n') + '\n})';
    cache.set(key, src);
  }
  return src;
}
