'use strict';
// A step of the wall clock (NTP, a VM resumed, an operator fixing the date) under running calls:
// limits are durations, measured on a monotonic clock. Each case runs in a child process whose
// threads all see Date.now step at one instant (test/helpers/clock-jump.js).
const { execFile } = require('node:child_process');
const path = require('node:path');

const run = (scenario) =>
  new Promise((resolve, reject) => {
    const args = ['-r', path.join(__dirname, 'helpers/clock-jump.js'), path.join(__dirname, 'helpers/clock-jump-run.js'), scenario];
    execFile(process.execPath, args, { timeout: 60_000 }, (err, stdout, stderr) => {
      if (err) return reject(new Error(`${err.message}\n${stdout}\n${stderr}`));
      resolve(JSON.parse(stdout));
    });
  });

test('a script under a 5 s limit is not ended by the wall clock stepping 1 h ahead while it runs', async () => {
  const r = await run('ahead');
  expect(r).toMatchObject({ status: 200, body: 'done', terminated: false });
});

test('a runaway under a 2 s limit is stopped at its limit when the wall clock steps 1 h back while it runs (not left to the backstop)', async () => {
  const r = await run('behind');
  expect(r.hung).toBeUndefined();
  expect(r).toMatchObject({ status: 500, body: { code: 270200 }, terminated: false });
  expect(r.ms).toBeGreaterThanOrEqual(1900);
  expect(r.ms).toBeLessThan(8000);
});
