'use strict';
// bench/collections.js: it runs every call to a value (it exits 1 otherwise) and prints the
// pauses, the app's time and the heap.
const { execFileSync } = require('node:child_process');
const path = require('node:path');

test("bench/collections.js opens the apps, runs the cyclic app's calls and prints what they cost", () => {
  const out = execFileSync(process.execPath, [path.join(__dirname, '..', 'bench', 'collections.js'), '--apps', '40', '--calls', '500'], { encoding: 'utf8', timeout: 60_000 });
  expect(out).toMatch(/^QuickJS, 40 apps in service \(opened and called in \d+\.\d s\), one app's 500 calls each leaving 100 cycles$/m);
  expect(out).toMatch(/^ {2}calls over 5 ms +\d+ \(longest \d+ ms, \d+ ms in all\)$/m);
  expect(out).toMatch(/^ {2}the app's calls +\d+\.\d\d s \(\d+ µs a call\)$/m);
  expect(out).toMatch(/^ {2}heap +\d+ MiB$/m);
});
