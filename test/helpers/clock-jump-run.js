'use strict';
// Run by test/clock-jump.test.js as `node -r ./clock-jump.js clock-jump-run.js SCENARIO`: one call
// across a wall-clock step, printed as JSON ({ status, body, ms, terminated }).
const request = require('supertest');
const { WorkerPool } = require('../..');
const { oneApi } = require('./app');

// (a QuickJS script's own Date reads the thread's clock: it sees the step too, and waits for it)
const SEES_STEP = 'const t0 = Date.now(); while (Math.abs(Date.now() - t0) < 1800e3) {}';
const SCENARIOS = {
  // a script that computes past a step of the wall clock 1 h ahead, well within its 5 s limit
  ahead: { jump: 3600e3, timeoutMs: 5000, source: `export function fn() { ${SEES_STEP}; let n = 0; for (let i = 0; i < 2e5; i++) n += i; return 'done' }` },
  // a runaway under a 2 s limit while the wall clock steps 1 h back (the pool's backstop far away)
  behind: { jump: -3600e3, timeoutMs: 2000, source: `export function fn() { ${SEES_STEP}; while (true) {} }` },
};

async function main() {
  const s = SCENARIOS[process.argv[2]];
  const warnings = [];
  const logger = { info() {}, warn: (m) => warnings.push(m), error: (m) => warnings.push(m) };
  const pool = new WorkerPool({ engine: 'quickjs', size: 1, maxWorkers: 1, graceMs: 60_000, logger });
  const { app, router } = oneApi(s.source, {}, { engine: pool, scriptTimeoutMs: s.timeoutMs, logger });
  await pool.ready();
  await global.jumpClock(s.jump, 1000, pool.workerCount);
  const t0 = performance.now();
  // (past 10 s the call is taken as hung: the answer says so)
  const hung = setTimeout(() => {
    process.stdout.write(JSON.stringify({ hung: true }));
    process.exit(0);
  }, 10_000);
  const res = await request(app).get('/web0/api/app1/p');
  clearTimeout(hung);
  const ms = performance.now() - t0;
  await router.close();
  await pool.close();
  process.stdout.write(JSON.stringify({ status: res.status, body: res.body, ms, terminated: warnings.some((w) => /terminating a worker/.test(w)) }));
}

main().catch((e) => {
  process.stdout.write(JSON.stringify({ error: String(e && e.stack) }));
  process.exit(1);
});
