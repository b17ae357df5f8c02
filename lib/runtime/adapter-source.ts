/**
 * The sandbox adapter's source text: the TypeScript modules of lib/runtime/sandbox/ (one job
 * each; see prelude.ts for the contract), bundled at build time by scripts/build.js into ONE
 * strict-mode function expression `(function (hostFn) { ... return entry; })`. An engine
 * evaluates it in a fresh context, calls the function with its host bridge and keeps the entry it
 * returns, then evaluates CONTINUATION_SCRIPT (lib/runtime/protocol.ts): nothing of the adapter is
 * left on the global object.
 */
import * as fs from 'node:fs';
import * as path from 'node:path';

let cached: string | undefined;

/** The bundled adapter (dist/cjs/runtime/sandbox/adapter.js), read once. */
export function adapterSource(): string {
  cached ??= fs.readFileSync(path.join(__dirname, 'sandbox', 'adapter.js'), 'utf8');
  return cached;
}
