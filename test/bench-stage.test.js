'use strict';
// bench/stage.js: it runs every stage of its workloads to a value (it exits 1 otherwise) and
// prints one figure per workload.
const { execFileSync } = require('node:child_process');
const path = require('node:path');

test("bench/stage.js runs the trivial and the hooks workloads on QuickJS, on wrk's request and on a browser's", () => {
  const out = execFileSync(process.execPath, [path.join(__dirname, '..', 'bench', 'stage.js'), '--stages', '200', '--rounds', '1'], { encoding: 'utf8', timeout: 60_000 });
  expect(out).toMatch(/^ {2}trivial +\d+\.\d µs/m);
  expect(out).toMatch(/^ {2}hooks +\d+\.\d µs/m);
  expect(out).toMatch(/^ {2}hooks-apart +\d+\.\d µs/m);
  expect(out).toMatch(/^ {2}trivial-browser +\d+\.\d µs/m);
  expect(out).toMatch(/^ {2}hooks-browser +\d+\.\d µs/m);
});
