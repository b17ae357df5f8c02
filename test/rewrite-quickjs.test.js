'use strict';
// The rewritten corpus in the engine that runs it: QuickJS (sync build), in a child process
// (helpers/rewrite-quickjs.js). Every program that is rewritten must compile there and give, with
// host helpers that return promises, the result, error and host calls it gives as written with
// host helpers that return values.
const path = require('node:path');
const { execFile } = require('node:child_process');

function runChild() {
  return new Promise((resolve, reject) => {
    execFile(process.execPath, [path.join(__dirname, 'helpers', 'rewrite-quickjs.js')], { maxBuffer: 64 * 1024 * 1024 }, (err, stdout, stderr) => {
      if (err) reject(new Error(`${err.message}\n${stderr}`));
      else resolve(stdout.trim().split('\n').map((line) => JSON.parse(line)));
    });
  });
}

test('every corpus program behaves the same in QuickJS once rewritten', async () => {
  const runs = await runChild();
  expect(runs.length).toBeGreaterThan(700);
  const rewritten = runs.filter((r) => r.async);
  expect(rewritten.length).toBeGreaterThan(550);
  for (const r of runs) {
    expect({ i: r.i, j: r.j, async: r.async }).toEqual({ i: r.i, j: r.j, async: !r.expectFallback });
    expect(r.before.loadError).toBeUndefined();
    if (r.async) expect({ i: r.i, j: r.j, outcome: r.after }).toEqual({ i: r.i, j: r.j, outcome: r.before });
  }
  // the comparison can fail: unrewritten code gets promises where it expected values
  const controls = runs.filter((r) => r.control !== undefined);
  expect(controls.length).toBe(2);
  for (const r of controls) expect(r.control).not.toEqual(r.before);
}, 120_000);
