/**
 * A script source as an engine runs it, and its mode: `.ts`/`.mts` scripts are type-stripped;
 * the host calls of the ES module are rewritten into awaits (async mode) when that is safe, else
 * the script runs unchanged in blocking mode; engines without ES modules (vm2) then get CommonJS.
 * Made once per source hash (the worker caches the result).
 */
import { transform, type Transform } from 'sucrase';
import { rewriteHostCalls } from '../rewrite';
import { fixExportsForCommonJs } from './cjs-exports';
import { commonJsNameClash } from './commonjs-names';

export function isTypeScript(name: string): boolean {
  return /\.(ts|mts|cts)$/i.test(name);
}

function sucrase(name: string, source: string, transforms: Transform[]): string {
  if (transforms.length === 0) return source;
  return transform(source, { transforms, filePath: name, disableESTransforms: true, production: true }).code;
}

/**
 * sucrase's `imports` transform starts line 1 with `"use strict";` and the `__esModule` flag:
 * the module runs in a strict wrapper and nothing reads the flag, and on line 1 they moved every
 * column an error names about 70 to the right.
 */
const PREAMBLE = ['"use strict";', 'Object.defineProperty(exports, "__esModule", {value: true});'];

function withoutPreamble(code: string): string {
  let out = code;
  for (const p of PREAMBLE) if (out.startsWith(p)) out = out.slice(p.length);
  return out;
}

export interface PreparedScript {
  code: string;
  /** Async mode: I/O host calls return promises (the code awaits them). False: blocking mode. */
  async: boolean;
  /** Why the script runs in blocking mode. */
  reason?: string;
  /** Async mode: what the rewrite inserted (see `sourceColumn`), to locate errors in the source as written. */
  insertions?: Array<[number, number, number]>;
}

/**
 * Throws the transform's SyntaxError for a source that does not parse; for CommonJS, also one for
 * a source that is no ES module (`await` as a name, a top-level `return`), which a CommonJS
 * wrapper would accept, and for one declaring `module` or `exports` at its top level.
 */
export function prepareScript(name: string, source: string, toCommonJs: boolean): PreparedScript {
  const esm = sucrase(name, source, isTypeScript(name) ? ['typescript'] : []);
  // the one place the mode is chosen
  const insertions: Array<[number, number, number]> = [];
  const mode = rewriteHostCalls(esm, { filename: name, insertions });
  // (worded as QuickJS reports the syntax errors it finds: `name.js: SyntaxError: …`)
  if (toCommonJs && mode.syntaxError !== undefined) throw new SyntaxError(`SyntaxError: ${mode.syntaxError}`);
  const clash = toCommonJs ? commonJsNameClash(esm) : null;
  if (clash !== null) throw new SyntaxError(clash);
  const code = toCommonJs ? withoutPreamble(sucrase(name, fixExportsForCommonJs(mode.code), ['imports'])) : mode.code;
  return { code, async: mode.async, reason: mode.reason, ...(insertions.length > 0 ? { insertions } : {}) };
}
