'use strict';
// The worker pool as an engine of its own: passed to the router, sized, refilled after failures.
const request = require('supertest');
const { WorkerPool } = require('scriptable-api');
const { oneApi } = require('./helpers/app');

const waitFor = async (cond, ms = 5000) => {
  const end = Date.now() + ms;
  while (!cond()) {
    if (Date.now() > end) throw new Error('condition not met in time');
    await new Promise((r) => setTimeout(r, 20));
  }
};

test('a worker terminated for a runaway script is replaced at once, keeping the pool warm', async () => {
  const pool = new WorkerPool({ engine: 'quickjs', size: 2, maxWorkers: 4, memoryLimitMb: 32, maxConcurrentPerApp: 4, graceMs: 50 });
  const { app, registry, router } = oneApi('export async function fn() { await null; while (true) {} }', {}, { engine: pool, scriptTimeoutMs: 1000 }); // (room for a cold context on a loaded machine)
  try {
    registry.putScript('app1', 'ok.js', 'export function f() { return 1 }');
    registry.putApi('app1', { path: 'ok', call: { script: 'ok.js', function: 'f' }, returnType: 'JSON' });
    expect((await request(app).get('/web0/api/app1/ok')).status).toBe(200);
    await waitFor(() => pool.workerCount === 2);
    const res = await request(app).get('/web0/api/app1/p');
    expect(res.body.code).toBe(270200);
    await waitFor(() => pool.workerCount === 2);
    expect((await request(app).get('/web0/api/app1/ok')).status).toBe(200);
  } finally {
    await router.close(); // a router does not close an engine it was given
    expect(pool.workerCount).toBe(2);
    await pool.close();
    expect(pool.workerCount).toBe(0);
  }
});

test('invalid response headers are refused inside the script, not at send time', async () => {
  const { app, router } = oneApi(`export function fn(ctx) {
    const out = [];
    for (const [n, v] of [['bad name', 'x'], ['X-Ok', 'a\\r\\nInjected: 1'], ['X-Fine', 'ok']]) {
      try { ctx.response.setHeader(n, v); out.push('set ' + n) } catch (e) { out.push(e.name) }
    }
    return out;
  }`);
  try {
    const res = await request(app).get('/web0/api/app1/p');
    expect(res.body).toEqual(['IllegalArgumentException', 'IllegalArgumentException', 'set X-Fine']);
    expect(res.headers['x-fine']).toBe('ok');
    expect(res.headers).not.toHaveProperty('injected');
  } finally {
    await router.close();
  }
});

test.each(['quickjs', 'vm2'])('%s: a result whose getter never returns times out while serializing', async (engine) => {
  const { app, registry, router } = oneApi('export function fn() { return { get x() { while (true) {} } } }', {}, { engine, scriptTimeoutMs: 400, workers: 1 });
  try {
    registry.putScript('app1', 'ok.js', 'export function f() { return 1 }');
    registry.putApi('app1', { path: 'ok', call: { script: 'ok.js', function: 'f' }, returnType: 'JSON' });
    const res = await request(app).get('/web0/api/app1/p');
    expect(res.status).toBe(500);
    expect(res.body.code).toBe(270200);
    expect((await request(app).get('/web0/api/app1/ok')).body).toBe(1);
  } finally {
    await router.close();
  }
});

test.each(['quickjs', 'vm2'])('%s: every new version of a script replaces the old one (100 versions in a row)', async (engine) => {
  const { app, registry, router } = oneApi('export function fn() { return 0 }', {}, { engine, workers: 1 });
  try {
    for (let v = 1; v <= 100; v++) {
      registry.putScript('app1', 'main.js', `export function fn() { return ${v} }`);
      expect((await request(app).get('/web0/api/app1/p')).body).toBe(v);
    }
  } finally {
    await router.close();
  }
});

test('QuickJS workers instantiate one module compiled once per process, not each their own', () => {
  const { execFileSync } = require('node:child_process');
  const path = require('node:path');
  const out = JSON.parse(execFileSync(process.execPath, [path.join(__dirname, 'helpers', 'quickjs-module.js')], { encoding: 'utf8' }));
  expect(out.kind).toBe('[object WebAssembly.Module]');
  expect(out.same).toBe(true);
  expect(out.withModule).toEqual({ type: 'JSON', json: '{"sum":42}' });
  // the driver runs the module it is handed (an empty module cannot start)
  expect(out.withEmptyModule).toMatch(/^failed: /);
}, 30_000);

test('the context cache evicts the previous version of a script when a new one is added', () => {
  const { Lru } = require('../dist/cjs/runtime/worker/driver.js');
  const evicted = [];
  const lru = new Lru(10, (v) => evicted.push(v));
  lru.set('app\u0000h1', 'ctx-v1', 'app\u0000main.js');
  lru.set('app\u0000o1', 'ctx-other', 'app\u0000other.js');
  lru.set('app\u0000h2', 'ctx-v2', 'app\u0000main.js');
  expect(evicted).toEqual(['ctx-v1']);
  expect(lru.get('app\u0000h1')).toBeUndefined();
  expect(lru.get('app\u0000h2')).toBe('ctx-v2');
  expect(lru.get('app\u0000o1')).toBe('ctx-other');
  lru.set('app\u0000h2', 'ctx-v2', 'app\u0000main.js'); // the same version again evicts nothing
  expect(evicted).toEqual(['ctx-v1']);
});

test('the context cache evicts the entry used least recently', () => {
  const { Lru } = require('../dist/cjs/runtime/worker/driver.js');
  const evicted = [];
  const lru = new Lru(3, (v) => evicted.push(v));
  lru.set('a', 'A');
  lru.set('b', 'B');
  lru.set('c', 'C');
  expect(lru.get('a')).toBe('A'); // a is now the most recently used
  lru.set('d', 'D');
  expect(evicted).toEqual(['B']);
  lru.set('c', 'C2'); // replacing a value uses it, and evicts nothing
  expect(lru.get('c')).toBe('C2');
  lru.set('e', 'E');
  expect(evicted).toEqual(['B', 'A']);
  expect([lru.get('a'), lru.get('b'), lru.get('c'), lru.get('d'), lru.get('e')]).toEqual([undefined, undefined, 'C2', 'D', 'E']);
  expect(lru.size).toBe(3);
  lru.delete('d');
  expect(lru.size).toBe(2);
  expect(evicted).toEqual(['B', 'A']);
});

/**
 * app1 with API `p` (the slow script) and API `fast` (returns at once) on a listening server. Warms
 * the pool with one fast call, starts the slow call, and 30 ms later makes `n` fast calls at once:
 * returns their bodies, how long they took together, and the slow call's body.
 */
async function fastWhileSlow(pool, slowScript, routerOpts, n) {
  const { app, registry, router } = oneApi(slowScript, {}, { engine: pool, ...routerOpts });
  try {
    registry.putScript('app1', 'fast.js', 'export function f() { return { fast: true } }');
    registry.putApi('app1', { path: 'fast', call: { script: 'fast.js', function: 'f' }, returnType: 'JSON' });
    const server = app.listen(0);
    const base = `http://127.0.0.1:${server.address().port}/web0/api/app1`;
    try {
      expect((await (await fetch(`${base}/fast`)).json()).fast).toBe(true); // warm
      const slow = fetch(`${base}/p`).then((r) => r.json());
      await new Promise((r) => setTimeout(r, 30)); // the slow call is running
      const started = Date.now();
      const fast = await Promise.all(Array.from({ length: n }, () => fetch(`${base}/fast`).then((r) => r.json())));
      const fastMs = Date.now() - started;
      return { fast, fastMs, workers: pool.workerCount, slow: await slow };
    } finally {
      server.closeAllConnections?.();
      await new Promise((r) => server.close(r));
    }
  } finally {
    await router.close();
    await pool.close();
  }
}

test.each(['quickjs', 'vm2'])('%s: a job sent ahead to a worker that then blocks in a host call runs elsewhere at once', async (engine) => {
  // One worker kept warm. The slow call blocks its worker for 800 ms in getAccountByToken; fast
  // calls sent ahead to that worker are taken back and run on another worker, not after the wait.
  const pool = new WorkerPool({ engine, size: 1, maxWorkers: 4, memoryLimitMb: 32, maxConcurrentPerApp: 16 });
  const accounts = { getAccountByToken: (t) => new Promise((r) => setTimeout(() => r({ id: t }), 800)) };
  // 150 ms of computing first, so the fast calls are sent ahead while the worker is busy
  const slowScript = 'export function fn() { const t = Date.now(); while (Date.now() - t < 150) {} return platform.system.getAccountByToken("slow") }';
  const { fast, fastMs, slow } = await fastWhileSlow(pool, slowScript, { accounts }, 6);
  expect(fast).toEqual(Array.from({ length: 6 }, () => ({ fast: true })));
  expect(fastMs).toBeLessThan(650); // not queued behind the 800 ms host call
  expect(slow).toEqual({ id: 'slow' });
});

test.each(['quickjs', 'vm2'])('%s: while a job runs long on the only worker, another worker stands in for it', async (engine) => {
  // size 1 (the default on a 2-core machine): a script computing for 1500 ms must not hold up
  // other calls for that long; the pool starts a second worker (computeWorkers: 2) for them.
  const pool = new WorkerPool({ engine, size: 1, maxWorkers: 4, computeWorkers: 2, memoryLimitMb: 32, maxConcurrentPerApp: 16 });
  const spin = 'export function fn() { const t = Date.now(); while (Date.now() - t < 1500) {} return { spun: true } }';
  const { fast, fastMs, workers, slow } = await fastWhileSlow(pool, spin, {}, 4);
  expect(fast).toEqual(Array.from({ length: 4 }, () => ({ fast: true })));
  expect(fastMs).toBeLessThan(1200); // a worker start (~250 ms), not the 1500 ms job
  expect(workers).toBe(2); // and no more than computeWorkers
  expect(slow).toEqual({ spun: true });
});

test('a pool made with only an engine name gets working defaults', async () => {
  // every option of `new WorkerPool` is optional: the defaults match createApiRouter's
  const pool = new WorkerPool({ engine: 'quickjs' });
  const { app, router } = oneApi('export function fn(ctx) { return { ok: ctx.query.n } }', {}, { engine: pool });
  try {
    await request(app).get('/web0/api/app1/p?n=1').expect(200, { ok: '1' });
    const all = await Promise.all(Array.from({ length: 30 }, (_, i) => request(app).get(`/web0/api/app1/p?n=${i}`)));
    expect(all.map((r) => r.body.ok)).toEqual(Array.from({ length: 30 }, (_, i) => String(i)));
    expect(new WorkerPool().name).toBe('quickjs');
  } finally {
    await router.close();
    await pool.close();
  }
});

test.each([
  [{ engine: 'v8' }, 'engine'],
  [{ size: 0 }, 'size'],
  [{ size: 1.5 }, 'size'],
  [{ size: 4, maxWorkers: 2 }, 'maxWorkers'],
  [{ memoryLimitMb: 4 }, 'memoryLimitMb'],
  [{ maxConcurrentPerApp: '8' }, 'maxConcurrentPerApp'],
  [{ computeWorkers: -1 }, 'computeWorkers'],
  [{ graceMs: -5 }, 'graceMs'],
  [{ idleTimeoutMs: 3e9 }, 'idleTimeoutMs'],
  [{ logger: 'console' }, 'logger'],
])('new WorkerPool(%j) is refused, naming %s', (options, field) => {
  let error;
  try {
    new WorkerPool(options);
  } catch (e) {
    error = e;
  }
  expect(error).toMatchObject({ name: 'ConfigError', field });
  expect(error.message).toContain(`invalid ${field}:`);
});

test('the pool times a job by the worker\'s clock, not by how late the main thread reads the result, and one long job moves its average a little', async () => {
  // The pool sizes the work it sends ahead to a computing worker by the recent job time. A main
  // thread busy elsewhere reads results late; counting that wait as job time would make the pool
  // think jobs are slow and spread them over more workers than the work needs.
  const pool = new WorkerPool({ engine: 'quickjs', size: 1, maxWorkers: 1 });
  let blockMs = 0;
  const lateReader = {
    name: 'late-reader',
    run(job, host) {
      const result = pool.run(job, host);
      // after the pool's own dispatch in this turn: the worker runs the job while this thread is busy
      setImmediate(() => {
        const until = Date.now() + blockMs;
        while (Date.now() < until);
      });
      return result;
    },
    close: async () => undefined,
  };
  const { app, router } = oneApi('export function fn(ctx) { const ms = Number(ctx.query.ms) || 5; const t = Date.now(); while (Date.now() - t < ms) {} return { ok: true } }', {}, { engine: lateReader });
  try {
    // the average (10% per job, one job counting at most 3 times it) settles near 5 ms
    for (let i = 0; i < 30; i++) expect((await request(app).get('/web0/api/app1/p')).body).toEqual({ ok: true });
    const before = pool.avgJobMs;
    blockMs = 100;
    for (let i = 0; i < 15; i++) expect((await request(app).get('/web0/api/app1/p')).body).toEqual({ ok: true });
    // still 5 ms jobs (by the worker's clock, more on a loaded machine); counted at 100 ms each,
    // fifteen of them would have raised it about fifteenfold (1.2x each, at the 3x cap)
    expect(pool.avgJobMs).toBeLessThan(before * 4);
    // one job that really runs long (or whose thread lost its core) counts at most 3 times the average
    blockMs = 0;
    const settled = pool.avgJobMs;
    expect((await request(app).get('/web0/api/app1/p?ms=150')).body).toEqual({ ok: true });
    expect(pool.avgJobMs).toBeLessThanOrEqual(settled * 1.2 + 1e-9);
    expect(pool.avgJobMs).toBeGreaterThan(settled);
  } finally {
    await router.close();
    await pool.close();
  }
});
