'use strict';
// Tenant churn: a router serving thousands of apps that come and go keeps its host memory and its
// /metrics bounded (every structure keyed by app, API or script is bounded or cleaned).
const http = require('node:http');
const express = require('express');
const { createApiRouter, MemoryRegistry } = require('..');

const routers = [];
afterAll(() => Promise.all(routers.map((r) => r.close())));

/** A router on a port of its own: `get(path)` answers the status. */
async function serve(options = {}) {
  const registry = new MemoryRegistry();
  const router = createApiRouter({ registry, workers: 1, maxWorkers: 1, ...options });
  routers.push(router);
  const app = express();
  app.use('/api', router);
  const server = http.createServer(app).listen(0);
  await new Promise((resolve) => server.once('listening', resolve));
  const agent = new http.Agent({ keepAlive: true, maxSockets: 1 });
  const { port } = server.address();
  const get = (path) =>
    new Promise((resolve, reject) => {
      http.get({ port, path, agent }, (res) => res.resume().on('end', () => resolve(res.statusCode))).on('error', reject);
    });
  const stop = () => {
    agent.destroy();
    return new Promise((resolve) => server.close(resolve));
  };
  return { registry, router, get, stop };
}

/** Creates app `id` with one API, calls it `calls` times, deletes it. */
async function churn(t, id, calls = 2) {
  t.registry.putScript(id, 'main.js', `export function fn() { return '${id}' }`);
  t.registry.putApi(id, { path: 'p', call: { script: 'main.js', function: 'fn' }, returnType: 'Text' });
  for (let k = 0; k < calls; k++) expect(await t.get(`/api/${id}/p`)).toBe(200);
  t.registry.removeApp(id);
}

/** The distinct values of label `label` on the lines of metric `name`. */
function labelValues(text, name, label) {
  const out = new Set();
  for (const line of text.split('\n')) {
    if (!line.startsWith(name + '{')) continue;
    const m = new RegExp(`${label}="([^"]*)"`).exec(line);
    if (m) out.add(m[1]);
  }
  return out;
}

/** The sum of the samples of `name` (a counter) over every label set. */
function total(text, name) {
  let sum = 0;
  for (const line of text.split('\n')) if (line.startsWith(name + '{')) sum += Number(line.slice(line.lastIndexOf(' ') + 1));
  return sum;
}

describe('metrics with many apps', () => {
  test('apps created, called and deleted: at most maxApis (app, API) pairs have series, the others count as (other)', async () => {
    const t = await serve({ metrics: { maxApis: 50 } });
    try {
      for (let i = 0; i < 300; i++) await churn(t, `churn${i}`);
    } finally {
      await t.stop();
    }
    const text = await t.router.metrics.text();
    const apps = labelValues(text, 'scriptable_api_requests_total', 'app');
    expect(apps.size).toBe(51);
    expect(apps.has('(other)')).toBe(true);
    expect(labelValues(text, 'scriptable_api_request_duration_seconds_bucket', 'app').size).toBe(51);
    expect(labelValues(text, 'scriptable_api_queue_wait_seconds_bucket', 'app').size).toBeLessThanOrEqual(51);
    // (every request is still counted)
    expect(total(text, 'scriptable_api_requests_total')).toBe(600);
  }, 120_000);

  test('by default 1000 pairs: 5,000 apps keep /metrics to a bounded size, rendered quickly', async () => {
    const { router } = await serve().then(async (t) => (await t.stop(), t));
    for (let i = 0; i < 5000; i++) {
      router.metrics.script(`app${i}`, 'p', false, 0.002, 0.001);
      router.metrics.rateLimit(`app${i}`, 'p', false, 'rejected', { reason: 'rate_limited' });
      router.metrics.request(`app${i}`, 'p', false, 200, 0.003);
    }
    const t0 = performance.now();
    const text = await router.metrics.text();
    const ms = performance.now() - t0;
    expect(labelValues(text, 'scriptable_api_requests_total', 'app').size).toBe(1001);
    expect(total(text, 'scriptable_api_requests_total')).toBe(5000);
    expect(total(text, 'scriptable_api_rate_limit_rejected_total')).toBe(5000);
    // (5,000 apps' own series came to about 30 MB of text, rendered in seconds)
    expect(text.length).toBeLessThan(8 * 1024 * 1024);
    expect(ms).toBeLessThan(5000);
  }, 60_000);

  test("a pair idle for 15 minutes gives its series up to a new one (a deleted app's go)", async () => {
    const t = await serve({ metrics: { maxApis: 2 } });
    await t.stop();
    const m = t.router.metrics;
    m.request('a', 'p', false, 200, 0.001);
    m.rateLimit('a', 'p', false, 'rejected', { reason: 'queue_full' });
    m.script('a', 'p', false, 0.001, 0.001);
    m.request('b', 'p', true, 404, 0.001);
    m.request('c', 'p', false, 200, 0.001); // full, nobody idle: (other)
    let text = await m.text();
    expect(labelValues(text, 'scriptable_api_requests_total', 'app')).toEqual(new Set(['a', 'b', '(other)']));
    const now = performance.now();
    const clock = jest.spyOn(performance, 'now').mockReturnValue(now + 15 * 60_000 + 1000);
    try {
      m.request('b', 'p', true, 200, 0.001); // b is seen again: a is the one idle longest
      m.request('c', 'p', false, 200, 0.001);
    } finally {
      clock.mockRestore();
    }
    text = await m.text();
    expect(labelValues(text, 'scriptable_api_requests_total', 'app')).toEqual(new Set(['b', 'c', '(other)']));
    for (const name of ['request_duration_seconds_bucket', 'script_duration_seconds_bucket', 'queue_wait_seconds_bucket', 'rate_limit_rejected_total']) {
      expect(labelValues(text, `scriptable_api_${name}`, 'app').has('a')).toBe(false);
    }
  });

  test('a script sets any status from 200 to 599: an API counts its first 32 apart and the later ones by class, so one tenant cannot fill /metrics', async () => {
    const t = await serve();
    t.registry.putScript('app', 'main.js', 'export function fn(ctx) { ctx.response.setStatus(Number(ctx.query.s)); return "" }');
    t.registry.putApi('app', { path: 'p', call: { script: 'main.js', function: 'fn' }, returnType: 'Text' });
    const sent = [];
    for (let s = 200; s < 600; s += 5) sent.push(s);
    try {
      for (const s of sent) expect(await t.get(`/api/app/p?s=${s}`)).toBe(s);
    } finally {
      await t.stop();
    }
    let text = await t.router.metrics.text();
    const statuses = labelValues(text, 'scriptable_api_requests_total', 'status');
    const own = sent.slice(0, 32).map(String);
    expect(statuses).toEqual(new Set([...own, '3xx', '4xx', '5xx'])); // (200 to 355 are the first 32)
    // (every request is counted, under its own status or its class)
    expect(total(text, 'scriptable_api_requests_total')).toBe(sent.length);
    const count = (status) => Number(text.split('\n').find((l) => l.startsWith('scriptable_api_requests_total{') && l.includes(`status="${status}"`)).split(' ').pop());
    expect(count('5xx')).toBe(sent.filter((s) => s >= 500).length);
    expect(count('200')).toBe(1);

    // a thousand APIs answering every status: /metrics stays a few MB (it was 37 MB, 2 s to render)
    const m = t.router.metrics;
    for (let a = 0; a < 1000; a++) for (let s = 200; s < 600; s++) m.request('tenant', `api${a}`, false, s, 0.001);
    text = await m.text();
    expect(text.length).toBeLessThan(8 * 1024 * 1024);
    expect(total(text, 'scriptable_api_requests_total')).toBe(sent.length + 400_000);
  }, 120_000);

  test("an app named (other) with an API (other) counts with the pairs beyond maxApis: never two series of the same labels", async () => {
    const t = await serve({ metrics: { maxApis: 1 } });
    for (const [app, api] of [['(other)', '(other)'], ['b', 'p'], ['c', 'p']]) {
      t.registry.putScript(app, 'main.js', 'export function fn() { return "" }');
      t.registry.putApi(app, { path: api, call: { script: 'main.js', function: 'fn' }, returnType: 'Text' });
    }
    try {
      for (const path of ['/api/(other)/(other)', '/api/b/p', '/api/c/p']) expect(await t.get(path)).toBe(200);
    } finally {
      await t.stop();
    }
    const text = await t.router.metrics.text();
    const series = text.split('\n').filter((l) => l.startsWith('scriptable_api_requests_total{') || l.startsWith('scriptable_api_request_duration_seconds_count{'));
    expect(series.map((l) => l.slice(0, l.lastIndexOf(' '))).sort()).toEqual(
      [...new Set(series.map((l) => l.slice(0, l.lastIndexOf(' '))))].sort(),
    );
    expect(series.filter((l) => l.startsWith('scriptable_api_requests_total{'))).toEqual([
      'scriptable_api_requests_total{app="(other)",api="(other)",preview="false",status="200"} 2',
      'scriptable_api_requests_total{app="b",api="p",preview="false",status="200"} 1',
    ]);
  });

  test('metrics.maxApis must be a positive integer', () => {
    for (const maxApis of [0, -1, 1.5, '10', null]) {
      expect(() => createApiRouter({ registry: new MemoryRegistry(), metrics: { maxApis } })).toThrow(/metrics\.maxApis/);
    }
  });
});

/** Heap in use after a full collection (gc exposed only for the call: other suites of this worker get no gc global). */
function heapUsed() {
  const v8 = require('node:v8');
  const vm = require('node:vm');
  v8.setFlagsFromString('--expose-gc');
  try {
    const gc = vm.runInNewContext('gc');
    gc();
    gc();
  } finally {
    v8.setFlagsFromString('--no-expose-gc');
  }
  return process.memoryUsage().heapUsed;
}

describe('host memory with many apps', () => {
  test('the source texts of apps deleted do not stay in the router: 40 apps with a 1 MiB script each come and go', async () => {
    const t = await serve({ metrics: false, scriptSizeLimit: '2mb' });
    try {
      await churn(t, 'warm');
      const before = heapUsed();
      for (let i = 0; i < 40; i++) {
        const id = `big${i}`;
        t.registry.putScript(id, 'main.js', `// ${String(i).padEnd(1024 * 1024, '.')}\nexport function fn() { return 'ok' }`);
        t.registry.putApi(id, { path: 'p', call: { script: 'main.js', function: 'fn' }, returnType: 'Text' });
        expect(await t.get(`/api/${id}/p`)).toBe(200);
        t.registry.removeApp(id);
      }
      const grown = heapUsed() - before;
      // (the router kept every source it had hashed, up to 5,000 of them whatever their size: 40 MiB here)
      expect(grown).toBeLessThan(20 * 1024 * 1024);
    } finally {
      await t.stop();
    }
  }, 120_000);
});

/** A job calling `main.js`'s fn in app `appId`: with `source`, the job brings the script; without, it brings none (the worker answers at once, no context is made). */
const poolJob = (appId, source) => ({
  requestId: appId,
  appId,
  apiPath: 'p',
  returnType: 'JSON',
  phase: 'all',
  call: { script: 'main.js', function: 'fn' },
  scripts: source === undefined ? {} : { 'main.js': { name: 'main.js', hash: `${appId}-main`, source } },
  request: {},
  state: { attributes: {}, response: {} },
  timeoutMs: 30_000,
});

describe('the pool with many apps', () => {
  test("5,000 apps' calls: the pool remembers the home worker of at most 4,096 apps, and nothing else per app once they end", async () => {
    const { WorkerPool } = require('..');
    const pool = new WorkerPool({ size: 1, maxWorkers: 1 });
    try {
      await pool.ready();
      const host = { call: async () => null };
      const results = await Promise.all(Array.from({ length: 5000 }, (_, i) => pool.run(poolJob(`app${i}`), host)));
      expect(results.every((r) => r.outcome.kind === 'error' && r.outcome.code === 270202)).toBe(true);
      expect(pool.homes.size).toBeLessThanOrEqual(4096);
      expect(pool.homes.has('app4999')).toBe(true); // (the latest are kept)
      for (const map of [pool.inFlight, pool.blockedApps, pool.heavyAt, pool.sent]) expect(map.size).toBe(0);
      expect(pool.queue.size).toBe(0);
    } finally {
      await pool.close();
    }
  }, 60_000);

  test('an app the pool saw in one long built-in call is forgotten 10 s later, whether or not it calls again (deleted, say)', async () => {
    const { WorkerPool } = require('..');
    const pool = new WorkerPool({ size: 1, maxWorkers: 1 });
    const host = { call: async () => null };
    try {
      await pool.ready();
      // (JSON.stringify of a value 25,000 levels deep runs one built-in call of seconds in QuickJS,
      // without an interrupt check and with little memory: 2.2 s on a fast machine; a JSON.parse
      // of 10 MB ran out of memory within 500 ms there)
      const heavy = await pool.run(poolJob('heavy', "export function fn() { let v = []; for (let i = 0; i < 25000; i++) v = [v]; JSON.stringify(v); throw new Error('done') }"), host);
      expect(heavy.outcome.kind).toBe('error');
      expect(pool.heavyAt.has('heavy')).toBe(true);
      // another app's calls go on; the heavy app sends none
      const end = Date.now() + 30_000;
      while (pool.heavyAt.size > 0 && Date.now() < end) {
        expect((await pool.run(poolJob('light', 'export function fn() { return 1 }'), host)).outcome.kind).toBe('written');
        await new Promise((r) => setTimeout(r, 100));
      }
      expect(pool.heavyAt.size).toBe(0);
    } finally {
      await pool.close();
    }
  }, 60_000);
});

describe('an app created again under a deleted app\'s id', () => {
  const fs = require('node:fs');
  const os = require('node:os');
  const path = require('node:path');
  const request = require('supertest');
  const { DirectoryRegistry } = require('..');
  // module state: what a tenant keeps between its calls (a cache of tokens, say)
  const SCRIPT = 'let calls = 0; export function fn(ctx) { calls++; return { calls } }';
  const API = { path: 'p', call: { script: 'm.js', function: 'fn' }, returnType: 'JSON' };
  const mount = (registry, extra = {}) => {
    const router = createApiRouter({ registry, workers: 1, maxWorkers: 1, logger: false, ...extra });
    routers.push(router);
    const app = express();
    app.use('/api', router);
    return app;
  };

  test.each(['quickjs', 'vm2'])('never sees the deleted app\'s module state, even with a byte-identical script (MemoryRegistry, %s)', async (engine) => {
    const registry = new MemoryRegistry({ apps: { shop: { scripts: { 'm.js': SCRIPT }, apis: [API] } } });
    const app = mount(registry, { engine });
    expect((await request(app).get('/api/shop/p')).body).toEqual({ calls: 1 });
    expect((await request(app).get('/api/shop/p')).body).toEqual({ calls: 2 });
    registry.removeApp('shop');
    registry.putScript('shop', 'm.js', SCRIPT).putApi('shop', API);
    expect((await request(app).get('/api/shop/p')).body).toEqual({ calls: 1 });
    // (an edit of the same app keeps its incarnation: a script put again unchanged keeps its context)
    registry.putScript('shop', 'm.js', SCRIPT);
    expect((await request(app).get('/api/shop/p')).body).toEqual({ calls: 2 });
  });

  test('never sees the deleted app\'s module state, even with a byte-identical script (DirectoryRegistry)', async () => {
    const root = fs.mkdtempSync(path.join(os.tmpdir(), 'sapi-generation-'));
    const make = () => {
      fs.mkdirSync(path.join(root, 'shop', 'scripts'), { recursive: true });
      fs.mkdirSync(path.join(root, 'shop', 'apis'), { recursive: true });
      fs.writeFileSync(path.join(root, 'shop', 'scripts', 'm.js'), SCRIPT);
      fs.writeFileSync(path.join(root, 'shop', 'apis', 'p.json'), JSON.stringify(API));
    };
    make();
    const registry = new DirectoryRegistry({ root, watch: false, logger: false });
    try {
      const app = mount(registry);
      expect((await request(app).get('/api/shop/p')).body).toEqual({ calls: 1 });
      expect((await request(app).get('/api/shop/p')).body).toEqual({ calls: 2 });
      fs.rmSync(path.join(root, 'shop'), { recursive: true });
      registry.reload('shop');
      expect((await request(app).get('/api/shop/p')).status).toBe(404);
      make();
      registry.reload('shop');
      expect((await request(app).get('/api/shop/p')).body).toEqual({ calls: 1 });
    } finally {
      await registry.close();
      fs.rmSync(root, { recursive: true, force: true });
    }
  });

  test('a registry whose appGeneration answers a promise: 500 HOST_ERROR saying it must answer synchronously', async () => {
    const memory = new MemoryRegistry({ apps: { shop: { scripts: { 'm.js': SCRIPT }, apis: [API] } } });
    const registry = { getApi: (...a) => memory.getApi(...a), getScript: (...a) => memory.getScript(...a), appGeneration: async () => 1 };
    const res = await request(mount(registry)).get('/api/shop/p');
    expect(res.status).toBe(500);
    expect(res.body.code).toBe(270602);
  });
});
