'use strict';
// bench/jobs.js: every job of its workloads ends with an output (it exits 1 otherwise) and it
// prints one figure per workload, on both engines.
const { execFileSync } = require('node:child_process');
const path = require('node:path');

test.each(['quickjs', 'vm2'])('bench/jobs.js runs the trivial and the hooks jobs through the pool on %s', (engine) => {
  const out = execFileSync(process.execPath, [path.join(__dirname, '..', 'bench', 'jobs.js'), '--jobs', '300', '--engine', engine], { encoding: 'utf8', timeout: 60_000 });
  expect(out).toMatch(new RegExp(`^${engine}, one worker`, 'm'));
  expect(out).toMatch(/^ {2}trivial +CPU \d+ µs, wall \d+ µs$/m);
  expect(out).toMatch(/^ {2}hooks +CPU \d+ µs, wall \d+ µs$/m);
});
