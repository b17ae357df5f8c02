'use strict';
// The worker pool as an engine of its own: started with its workers, sized, refilled after
// failures, fair across apps, limits measured from when a call starts running.
const request = require('supertest');
const { WorkerPool } = require('scriptable-api');
const { oneApi, makeApp } = require('./helpers/app');

/** Resolves when `cond()` holds, checking on every turn of the event loop (bounded by `ms`). */
const until = async (cond, ms = 10_000) => {
  const end = Date.now() + ms;
  while (!cond()) {
    if (Date.now() > end) throw new Error('condition not met in time');
    await new Promise((r) => setImmediate(r));
  }
};

test('a pool starts its workers at once; ready() resolves when they can take work; stats() tells what they do', async () => {
  const pool = new WorkerPool({ engine: 'quickjs', size: 2, maxWorkers: 4 });
  try {
    expect(pool.stats()).toEqual({ workers: 2, busy: 0, queued: 0 });
    await pool.ready();
    expect(pool.stats()).toEqual({ workers: 2, busy: 0, queued: 0 });
  } finally {
    await pool.close();
  }
  expect(pool.workerCount).toBe(0);
  await expect(pool.ready()).rejects.toThrow(/closed/);
});

test('vm2: a worker terminated for a runaway script is replaced at once, keeping the pool warm', async () => {
  // (vm2 cannot stop a script itself: the pool terminates its worker past the deadline plus graceMs)
  const pool = new WorkerPool({ engine: 'vm2', size: 2, maxWorkers: 4, memoryLimitMb: 32, graceMs: 50 });
  const { app, registry, router } = oneApi('export function fn() { while (true) {} }', {}, { engine: pool, scriptTimeoutMs: 300 });
  try {
    // (another app's API: app1's calls run on a worker set apart for a minute once one ended its worker)
    registry.putScript('app2', 'ok.js', 'export function f() { return 1 }');
    registry.putApi('app2', { path: 'ok', call: { script: 'ok.js', function: 'f' }, returnType: 'JSON' });
    await pool.ready();
    const res = await request(app).get('/web0/api/app1/p');
    expect(res.body.code).toBe(270200);
    expect(pool.workerCount).toBe(2); // the replacement is already starting
    await pool.ready();
    expect((await request(app).get('/web0/api/app2/ok')).body).toBe(1);
  } finally {
    await router.close(); // a router does not close an engine it was given
    expect(pool.workerCount).toBe(2);
    await pool.close();
    expect(pool.workerCount).toBe(0);
  }
});

test("vm2: a runaway allocating without end is answered at its deadline, not once V8 has ended its worker", async () => {
  // (V8 takes seconds to end a thread allocating 8 MB a turn: about 17 s here; close() waits for it)
  const { app, router } = oneApi('export function fn() { for (;;) new Array(1e6).fill(1) }', {}, { engine: 'vm2', scriptTimeoutMs: 300, workers: 1 });
  try {
    const t0 = Date.now();
    const res = await request(app).get('/web0/api/app1/p');
    expect(res.body.code).toBe(270200);
    expect(Date.now() - t0).toBeLessThan(8000);
  } finally {
    await router.close();
  }
}, 90_000);

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
  // the driver runs the module it is handed (an empty one cannot start)
  expect(out.withEmptyModule).toMatch(/^failed: /);
}, 30_000);

test.each(['quickjs', 'vm2'])('%s: with scriptTimeoutMs 100, twelve sequential requests from a cold start all succeed', async (engine) => {
  // worker start-up, loading the transforms and compiling the script are not the script's time
  const { app, router } = oneApi('export function fn(ctx) { return { n: Number(ctx.query.n) } }', {}, { engine, scriptTimeoutMs: 100 });
  try {
    for (let n = 0; n < 12; n++) {
      const res = await request(app).get(`/web0/api/app1/p?n=${n}`);
      expect({ status: res.status, body: res.body }).toEqual({ status: 200, body: { n } });
    }
  } finally {
    await router.close();
  }
});

test.each(['quickjs', 'vm2'])('%s: the request right after a timed-out one succeeds', async (engine) => {
  const { app, router } = oneApi(
    'export function fn(ctx) { if (ctx.query.loop) while (true) {} return { ok: true } }',
    {},
    { engine, scriptTimeoutMs: 300, workers: 1 },
  );
  try {
    await router.ready();
    for (let round = 0; round < 2; round++) {
      const timedOut = await request(app).get('/web0/api/app1/p?loop=1');
      expect({ status: timedOut.status, code: timedOut.body.code }).toEqual({ status: 500, code: 270200 });
      const next = await request(app).get('/web0/api/app1/p');
      expect({ status: next.status, body: next.body }).toEqual({ status: 200, body: { ok: true } });
    }
  } finally {
    await router.close();
  }
});

/**
 * Two apps on a listening server: `slow` (the script given) and `fast` (returns at once). Starts
 * the slow call (6 s), waits until it runs, then makes `n` fast calls of app `fastApp` at once:
 * whether they all answered before the slow call did.
 */
async function fastWhileSlow(pool, slowScript, routerOpts, n, fastApp = 'other') {
  const fastApi = { scripts: { 'fast.js': 'export function f() { return { fast: true } }' }, apis: [{ path: 'fast', call: { script: 'fast.js', function: 'f' }, returnType: 'JSON' }] };
  const apps = { app1: { scripts: { 'slow.js': slowScript, ...fastApi.scripts }, apis: [{ path: 'slow', call: { script: 'slow.js', function: 'fn' }, returnType: 'JSON' }, ...fastApi.apis] } };
  if (fastApp !== 'app1') apps[fastApp] = fastApi;
  const { app, router } = makeApp({ apps, router: { engine: pool, ...routerOpts } });
  const server = app.listen(0);
  const base = `http://127.0.0.1:${server.address().port}/web0/api`;
  try {
    await pool.ready();
    expect((await (await fetch(`${base}/${fastApp}/fast`)).json()).fast).toBe(true); // warm
    const busyBefore = pool.stats().busy;
    const slow = fetch(`${base}/app1/slow`).then((r) => r.json());
    await until(() => pool.stats().busy > busyBefore); // the slow call runs
    let slowDone = false;
    slow.then(() => (slowDone = true));
    const fast = await Promise.all(Array.from({ length: n }, () => fetch(`${base}/${fastApp}/fast`).then((r) => r.json())));
    const fastFirst = !slowDone;
    return { fast, fastFirst, workers: pool.workerCount, slow: await slow };
  } finally {
    server.closeAllConnections?.();
    await new Promise((r) => server.close(r));
    await router.close();
    await pool.close();
  }
}

test.each(['quickjs', 'vm2'])('%s: a script waiting on the host holds no thread: other calls run on the same worker meanwhile', async (engine) => {
  // one worker at most: the fast calls cannot be run anywhere else
  const pool = new WorkerPool({ engine, size: 1, maxWorkers: 1 });
  const accounts = { getAccountByToken: (t) => new Promise((r) => setTimeout(() => r({ id: t }), 6000)) };
  const slowScript = 'export function fn() { return platform.system.getAccountByToken("slow") }';
  const { fast, fastFirst, slow } = await fastWhileSlow(pool, slowScript, { accounts }, 6, 'app1');
  expect(fast).toEqual(Array.from({ length: 6 }, () => ({ fast: true })));
  expect(fastFirst).toBe(true); // not queued behind the host call
  expect(slow).toEqual({ id: 'slow' });
});

test.each(['quickjs', 'vm2'])('%s: a script blocking its worker (blocking mode) gets another worker started for the other calls', async (engine) => {
  // a host call inside a callback handed to a built-in cannot become an await: blocking mode
  const pool = new WorkerPool({ engine, size: 1, maxWorkers: 4 });
  const accounts = { getAccountByToken: (t) => new Promise((r) => setTimeout(() => r({ id: t }), 6000)) };
  const slowScript = 'export function fn() { return ["slow"].map((t) => platform.system.getAccountByToken(t))[0] }';
  const { fast, fastFirst, workers, slow } = await fastWhileSlow(pool, slowScript, { accounts }, 6);
  expect(fast).toEqual(Array.from({ length: 6 }, () => ({ fast: true })));
  expect(fastFirst).toBe(true); // a worker start, not the host call
  expect(workers).toBeLessThanOrEqual(3);
  expect(slow).toEqual({ id: 'slow' });
});

test.each(['quickjs', 'vm2'])('%s: while a job computes long on the only worker, another worker serves the other apps', async (engine) => {
  const pool = new WorkerPool({ engine, size: 1, maxWorkers: 4 });
  const spin = 'export function fn() { const t = Date.now(); while (Date.now() - t < 6000) {} return { spun: true } }';
  const { fast, fastFirst, workers, slow } = await fastWhileSlow(pool, spin, {}, 4);
  expect(fast).toEqual(Array.from({ length: 4 }, () => ({ fast: true })));
  expect(fastFirst).toBe(true); // a worker start, not the job
  expect(workers).toBeLessThanOrEqual(3);
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
    const bare = new WorkerPool();
    expect(bare.name).toBe('quickjs');
    await bare.close();
  } finally {
    await router.close();
    await pool.close();
  }
});

test.each([
  [{ engine: 'v8' }, 'engine'],
  [{ size: 0 }, 'size'],
  [{ size: 1.5 }, 'size'],
  // (each worker is a thread with a heap of its own, started one after another: a million never finish starting)
  [{ size: 1e6 }, 'size'],
  [{ maxWorkers: 1025 }, 'maxWorkers'],
  [{ size: 4, maxWorkers: 2 }, 'maxWorkers'],
  [{ memoryLimitMb: 4 }, 'memoryLimitMb'],
  [{ contextBudgetMb: 2 }, 'contextBudgetMb'],
  [{ maxConcurrentPerApp: '8' }, 'maxConcurrentPerApp'],
  [{ maxWorkersPerApp: 0 }, 'maxWorkersPerApp'],
  [{ queueTimeoutMs: 0 }, 'queueTimeoutMs'],
  [{ graceMs: -5 }, 'graceMs'],
  [{ idleTimeoutMs: 3e9 }, 'idleTimeoutMs'],
  [{ logger: 'console' }, 'logger'],
  [{ logger: {} }, 'logger'],
  // (a QuickJS worker's heap holds at most 2048 MiB: one call's limit, the contexts' budget and 32 MiB)
  [{ memoryLimitMb: 2048 }, 'memoryLimitMb'],
  [{ memoryLimitMb: 1761 }, 'memoryLimitMb'],
  [{ memoryLimitMb: 1017, contextBudgetMb: 1000 }, 'memoryLimitMb'],
  [{ logger: { info() {}, error() {} } }, 'logger'],
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

test('new WorkerPool refuses a key that is not an option, naming the one meant (a typo would keep the default)', () => {
  const refused = (options) => {
    try {
      new WorkerPool(options);
    } catch (e) {
      return e;
    }
    throw new Error('accepted: ' + JSON.stringify(options));
  };
  expect(refused({ memoryLimitMB: 8 })).toMatchObject({ name: 'ConfigError', field: 'memoryLimitMB', message: "scriptable-api: invalid memoryLimitMB: is not an option (did you mean 'memoryLimitMb'?)" });
  expect(refused({ sise: 2 })).toMatchObject({ field: 'sise', message: "scriptable-api: invalid sise: is not an option (did you mean 'size'?)" });
  expect(refused({ workers: 2 }).message).toMatch(/^scriptable-api: invalid workers: is not an option; the options are engine, size, maxWorkers, /);
});

test("a QuickJS call's memory limit fits its worker's heap beside the contexts' budget: the router refuses one that does not, naming scriptMemoryLimitMb", async () => {
  const { MemoryRegistry, createApiRouter } = require('scriptable-api');
  const registry = new MemoryRegistry({ apps: {} });
  expect(() => createApiRouter({ registry, scriptMemoryLimitMb: 4096 })).toThrow(expect.objectContaining({ name: 'ConfigError', field: 'scriptMemoryLimitMb' }));
  expect(() => createApiRouter({ registry, scriptMemoryLimitMb: 1500, contextBudgetMb: 600 })).toThrow(expect.objectContaining({ field: 'scriptMemoryLimitMb' }));
  // the largest that fits works, and vm2 (no WebAssembly heap) takes more
  for (const options of [{ memoryLimitMb: 1632 }, { engine: 'vm2', memoryLimitMb: 4096 }]) {
    const pool = new WorkerPool({ size: 1, ...options });
    try {
      await pool.ready();
      const res = await request(makeApp({ router: { engine: pool }, apps: { a: { scripts: { 'm.js': 'export function fn() { return 1 }' }, apis: [{ path: 'p', call: { script: 'm.js', function: 'fn' }, returnType: 'JSON' }] } } }).app).get('/web0/api/a/p');
      expect(res.body).toBe(1);
    } finally {
      await pool.close();
    }
  }
}, 30_000);

test('a maxWorkers below the default size (CPUs - 1) is taken: the pool starts maxWorkers workers', async () => {
  const os = require('node:os');
  const real = os.availableParallelism;
  os.availableParallelism = () => 8; // (a machine with more cores than maxWorkers)
  let pool;
  try {
    pool = new WorkerPool({ maxWorkers: 2 });
  } finally {
    os.availableParallelism = real;
  }
  try {
    await pool.ready();
    expect(pool.workerCount).toBe(2);
  } finally {
    await pool.close();
  }
  // given both, size above maxWorkers is still refused
  expect(() => new WorkerPool({ size: 3, maxWorkers: 2 })).toThrow(expect.objectContaining({ field: 'maxWorkers' }));
}, 30_000);

describe('which worker an app\'s calls go to', () => {
  // (each worker opens a context of its own for the script: ID tells them apart)
  const BUSY = `const ID = Math.random();
export function fn(ctx) { var t = Date.now(); while (Date.now() - t < 5) {} return { id: ID } }`;

  test("a hot app's calls spread to an idle worker while calls wait to start on its own", async () => {
    const { app, router } = oneApi(BUSY, {}, { workers: 2, maxWorkersPerApp: 2 });
    try {
      await router.ready();
      const ids = new Set();
      for (let round = 0; round < 5 && ids.size < 2; round++) {
        const all = await Promise.all(Array.from({ length: 40 }, () => request(app).get('/web0/api/app1/p')));
        for (const r of all) ids.add(r.body.id);
      }
      expect(ids.size).toBe(2);
    } finally {
      await router.close();
    }
  }, 60_000);

  test('an app called one call at a time stays on the worker holding its context', async () => {
    const { app, router } = oneApi(BUSY, {}, { workers: 2, maxWorkersPerApp: 2 });
    try {
      await router.ready();
      const ids = new Set();
      for (let i = 0; i < 60; i++) ids.add((await request(app).get('/web0/api/app1/p')).body.id);
      expect(ids.size).toBe(1);
    } finally {
      await router.close();
    }
  }, 60_000);
});

test("a pool's own logger that throws, or whose promise rejects, loses that line: the call is answered and the process lives; pino gets its fields", async () => {
  const pino = require('pino');
  const { Writable } = require('node:stream');
  const records = [];
  const dest = new Writable({ write(chunk, _e, cb) { for (const l of String(chunk).split('\n')) if (l) records.push(JSON.parse(l)); cb(); } });
  const down = (mode) => () => {
    if (mode === 'throw') throw new Error('log transport down');
    return Promise.reject(new Error('log transport down'));
  };
  // (a host call in a callback handed to a built-in: the script runs in blocking mode, which the pool logs at warn)
  const source = 'export function fn() { return [1].map(function () { return platform.system.getAccountByToken("t") }) }';
  for (const logger of [{ info: down('throw'), warn: down('throw'), error: down('throw') }, { info: down('reject'), warn: down('reject'), error: down('reject') }, pino(dest)]) {
    const pool = new WorkerPool({ engine: 'quickjs', size: 1, logger });
    const { app } = oneApi(source, {}, { engine: pool });
    try {
      const res = await request(app).get('/web0/api/app1/p');
      expect([res.status, res.body]).toEqual([200, [null]]);
      // (a rejection nobody handled would end the process by the next turn)
      await new Promise((r) => setImmediate(r));
    } finally {
      await pool.close();
    }
  }
  expect(records.find((r) => /blocking mode/.test(r.msg))).toMatchObject({ level: 40, appId: 'app1', script: 'main.js' });
});
