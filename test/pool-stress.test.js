'use strict';
// The pool under a mixed load, on both engines: fast calls, calls computing past the pool's
// "slow" mark, calls waiting on a host call, failing calls and calls with hooks, many at once on
// one kept worker. Every call must get its own, correct answer — none lost, none run twice, none
// left waiting for its deadline — while workers run many jobs, send back the ones waiting behind
// a long slice and are stood in for.
const { WorkerPool } = require('scriptable-api');
const { makeApp } = require('./helpers/app');

const SCRIPTS = {
  'fast.js': 'export function fn(ctx) { return { kind: "fast", n: Number(ctx.query.n) } }',
  'spin.js': 'export function fn(ctx) { const t = Date.now(); while (Date.now() - t < 15) {} return { kind: "spin", n: Number(ctx.query.n) } }',
  'wait.js': 'export function fn(ctx) { const a = platform.system.getAccountByToken(ctx.query.n); return { kind: "wait", n: Number(a.id) } }',
  'fail.js': 'export function fn(ctx) { throw Object.assign(new Error("no " + ctx.query.n), { code: 4242 }) }',
  'hooked.js': `export function before(ctx) { ctx.request.setAttribute('n', ctx.query.n) }
    export function fn(ctx) { return { kind: 'hooked', n: Number(ctx.request.getAttribute('n')) } }
    export function after(ctx, r) { ctx.response.setHeader('X-N', String(r.n)); return r }`,
};
const KINDS = ['fast', 'spin', 'wait', 'fail', 'hooked'];

describe.each(['quickjs', 'vm2'])('the pool under a mixed load (%s)', (engine) => {
  test('every call gets its own answer', async () => {
    const pool = new WorkerPool({ engine, size: 1, maxWorkers: 6, memoryLimitMb: 32, maxConcurrentPerApp: 64 });
    const apis = KINDS.map((k) => ({ path: k, call: { script: `${k === 'hooked' ? 'hooked' : k}.js`, function: 'fn' }, returnType: 'JSON' }));
    apis[4].before = { script: 'hooked.js', function: 'before' };
    apis[4].after = { script: 'hooked.js', function: 'after' };
    const accounts = { getAccountByToken: (t) => new Promise((r) => setTimeout(() => r({ id: t }), 20 + (Number(t) % 5) * 10)) };
    const { app, router } = makeApp({ apps: { app1: { scripts: SCRIPTS, apis } }, router: { engine: pool, accounts, scriptTimeoutMs: 20_000 } });
    const server = app.listen(0);
    const base = `http://127.0.0.1:${server.address().port}/web0/api/app1`;
    try {
      await pool.ready();
      const total = 250;
      let next = 0;
      const failures = [];
      const started = Date.now();
      const one = async (n) => {
        const kind = KINDS[n % KINDS.length];
        const res = await fetch(`${base}/${kind}?n=${n}`);
        const body = await res.json();
        if (kind === 'fail') {
          if (res.status !== 500 || body.code !== 4242 || body.message !== `no ${n}`) failures.push({ n, kind, status: res.status, body });
        } else if (res.status !== 200 || body.kind !== kind || body.n !== n || (kind === 'hooked' && res.headers.get('x-n') !== String(n))) {
          failures.push({ n, kind, status: res.status, body });
        }
      };
      // 25 clients, each sending its next call as soon as the last one answered
      await Promise.all(
        Array.from({ length: 25 }, async () => {
          while (next < total) await one(next++);
        }),
      );
      expect(failures).toEqual([]);
      // nothing waited for its 20 s deadline (that would be a lost job: a failure above too)
      expect(Date.now() - started).toBeLessThan(15_000);
      expect(pool.workerCount).toBeLessThanOrEqual(6);
    } finally {
      server.closeAllConnections?.();
      await new Promise((r) => server.close(r));
      await router.close();
      await pool.close();
    }
  }, 30_000);
});
