'use strict';
// vm2's pre-pass over export forms sucrase lowers wrong (lib/runtime/worker/cjs-exports.ts): the
// time it takes grows with the script, not with its square.
const { fixExportsForCommonJs } = require('../dist/cjs/runtime/worker/cjs-exports.js');
const { parseModule } = require('../dist/cjs/runtime/rewrite/ast.js');

/** `n` times each rewritten form: an exported function, two declarators in one export, an export list. */
const source = (n) =>
  Array.from({ length: n }, (_, i) => `export function f${i}() { return ${i} }\nexport const a${i} = ${i}, b${i} = ${i};\nconst c${i} = ${i}; export { c${i} };`).join('\n');

const timed = (fn) => {
  const t0 = process.hrtime.bigint();
  const value = fn();
  return { value, ms: Number(process.hrtime.bigint() - t0) / 1e6 };
};

test('9,000 rewritten exports take about as long as parsing the script once (they took seconds, growing with their square)', () => {
  const src = source(3000); // (350 KB)
  const parse = timed(() => parseModule(src));
  const fixed = timed(() => fixExportsForCommonJs(src));
  // (the pass parses the script once itself; splicing each edit into the whole text took 26 s here)
  expect(fixed.ms).toBeLessThan(4 * parse.ms + 2000);
  // every line keeps its number; the function names and the moved export lists follow the module
  const lines = fixed.value.split('\n');
  expect(lines).toHaveLength(9000 + 6000);
  expect(lines.slice(0, 3)).toEqual(['       function f0() { return 0 }', 'export const a0 = 0; export const  b0 = 0;', `const c0 = 0; ${' '.repeat(14)}`]);
  expect(lines.slice(8997, 9000)).toEqual(['       function f2999() { return 2999 }', 'export const a2999 = 2999; export const  b2999 = 2999;', `const c2999 = 2999; ${' '.repeat(17)}`]);
  expect([lines[9000], lines[9001], lines[14999]]).toEqual([';export { f0 };', 'export { c0 };', 'export { c2999 };']);
}, 120_000);
