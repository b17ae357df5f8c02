'use strict';
// router.metrics: Prometheus text through prom-client — requests by app, API and status, script
// time, queue wait, workers, rate-limit outcomes — in the router's own registry or the host's.
const request = require('supertest');
const express = require('express');
const fs = require('node:fs');
const prom = require('prom-client');
const { createApiRouter, MemoryRegistry } = require('../..');

const routers = [];
const cleanups = [];
afterAll(() => Promise.all([...routers.map((r) => r.close()), ...cleanups.map((c) => c())]));

const apps = {
  app1: {
    scripts: { 'main.js': 'export function fn() { return 1 }', 'bad.js': 'export function fn() { throw new Error("x") }' },
    apis: [
      { path: 'ok', call: { script: 'main.js', function: 'fn' }, returnType: 'JSON' },
      { path: 'bad', call: { script: 'bad.js', function: 'fn' }, returnType: 'JSON' },
      { path: 'limited', call: { script: 'main.js', function: 'fn' }, returnType: 'JSON', rateLimit: { requestsPerSecond: 2, timeoutMs: 600, identifier: 'global' } },
    ],
  },
};

function setup(options = {}) {
  const router = createApiRouter({ registry: new MemoryRegistry({ apps }), workers: 1, ...options });
  routers.push(router);
  const app = express();
  app.use('/api', router);
  if (router.metrics) app.get('/metrics', router.metrics.handler);
  return { app, router };
}

/** The value of one sample line, e.g. `x_total{app="a"} 3`. */
function sample(text, name, labels = {}) {
  const want = Object.entries(labels).map(([k, v]) => `${k}="${v}"`);
  for (const line of text.split('\n')) {
    if (!line.startsWith(name + '{') && !line.startsWith(name + ' ')) continue;
    if (want.every((w) => line.includes(w))) return Number(line.slice(line.lastIndexOf(' ') + 1));
  }
  return undefined;
}

test('requests by app, API and status; script time, queue wait and workers; served at /metrics', async () => {
  // (maxWorkers 1: on a loaded machine a slow first call has the pool start a stand-in worker)
  const { app, router } = setup({ maxWorkers: 1 });
  await request(app).get('/api/app1/ok').expect(200);
  await request(app).get('/api/app1/ok').expect(200);
  await request(app).get('/api/app1/bad').expect(500);
  await request(app).get('/api/app1/nope').expect(404);
  await request(app).get('/api/other-app/x').expect(404);
  const res = await request(app).get('/metrics');
  expect(res.status).toBe(200);
  expect(res.headers['content-type']).toBe(router.metrics.contentType);
  const text = res.text;
  expect(sample(text, 'scriptable_api_requests_total', { app: 'app1', api: 'ok', status: '200' })).toBe(2);
  expect(sample(text, 'scriptable_api_requests_total', { app: 'app1', api: 'bad', status: '500' })).toBe(1);
  // unknown apps and paths are never labels of their own
  expect(sample(text, 'scriptable_api_requests_total', { app: '', api: '', status: '404' })).toBe(2);
  expect(text).not.toContain('other-app');
  expect(sample(text, 'scriptable_api_script_duration_seconds_count', { app: 'app1', api: 'ok' })).toBe(2);
  expect(sample(text, 'scriptable_api_script_duration_seconds_sum', { app: 'app1', api: 'ok' })).toBeGreaterThan(0);
  expect(sample(text, 'scriptable_api_queue_wait_seconds_count', { app: 'app1' })).toBe(3);
  expect(sample(text, 'scriptable_api_request_duration_seconds_count', { app: 'app1', api: 'ok' })).toBe(2);
  expect(sample(text, 'scriptable_api_workers')).toBe(1);
  expect(sample(text, 'scriptable_api_workers_busy')).toBe(0);
  expect(sample(text, 'scriptable_api_jobs_queued')).toBe(0);
  expect(await router.metrics.text()).toContain('# TYPE scriptable_api_requests_total counter');
});

test("histogram buckets are cumulative with +Inf counting every request; the registry's resetMetrics starts every series over", async () => {
  const { app, router } = setup({ metrics: { buckets: [0.000001, 60] } });
  await request(app).get('/api/app1/ok').expect(200);
  await request(app).get('/api/app1/ok').expect(200);
  let text = await router.metrics.text();
  const bucket = (le) => sample(text, 'scriptable_api_request_duration_seconds_bucket', { app: 'app1', api: 'ok', le });
  // no request takes under a microsecond; every one is under a minute
  expect([bucket('0.000001'), bucket('60'), bucket('+Inf')]).toEqual([0, 2, 2]);
  expect(text).toContain('# TYPE scriptable_api_request_duration_seconds histogram');
  router.metrics.registry.resetMetrics();
  text = await router.metrics.text();
  expect(sample(text, 'scriptable_api_requests_total', { app: 'app1', api: 'ok', status: '200' })).toBeUndefined();
  await request(app).get('/api/app1/ok').expect(200);
  text = await router.metrics.text();
  expect(sample(text, 'scriptable_api_requests_total', { app: 'app1', api: 'ok', status: '200' })).toBe(1);
  expect(bucket('+Inf')).toBe(1);
});

test('a client that leaves while sending its body (a plain body, an upload) counts as 499: the 400 its request failed with was never sent', async () => {
  const net = require('node:net');
  const http = require('node:http');
  const failed = [];
  let seen;
  const logger = { info: (m, meta) => { failed.push(meta); seen?.(); }, warn() {}, error() {} };
  const router = createApiRouter({ registry: new MemoryRegistry({ apps }), workers: 1, logger });
  routers.push(router);
  let arrived;
  const app = express()
    .use((_req, _res, next) => {
      arrived?.();
      next();
    })
    .use('/api', router);
  const server = http.createServer(app).listen(0);
  cleanups.push(() => new Promise((r) => server.close(r)));
  await new Promise((r) => server.once('listening', r));
  const boundary = 'xyz';
  const bodies = [
    ['Content-Length: 1000', 'abc'],
    [`Content-Type: multipart/form-data; boundary=${boundary}\r\nContent-Length: 100000`, `--${boundary}\r\nContent-Disposition: form-data; name="f"; filename="a.txt"\r\n\r\nhello`],
  ];
  for (const [headers, body] of bodies) {
    const logged = new Promise((r) => (seen = r));
    const reached = new Promise((r) => (arrived = r));
    const socket = net.connect(server.address().port, '127.0.0.1', () => socket.write(`POST /api/app1/ok HTTP/1.1\r\nHost: x\r\n${headers}\r\n\r\n${body}`));
    socket.on('error', () => undefined);
    // (the request reached the router, which reads its body: the client leaves)
    await reached;
    socket.destroy();
    await logged; // (the request failed on its body: counted right after)
    await new Promise((r) => setImmediate(r));
  }
  expect(failed.map((m) => [m.stage, m.status])).toEqual([['body', 400], ['body', 400]]);
  const text = await router.metrics.text();
  expect(sample(text, 'scriptable_api_requests_total', { app: 'app1', api: 'ok', status: '499' })).toBe(2);
  expect(sample(text, 'scriptable_api_requests_total', { app: 'app1', api: 'ok', status: '400' })).toBeUndefined();
});

test('rate limit: admissions, waits and rejections', async () => {
  const { app, router } = setup();
  // 2/s with at most 600 ms of wait, 5 at once: the first at once, the second after ~500 ms, the rest rejected
  const statuses = await Promise.all(Array.from({ length: 5 }, () => request(app).get('/api/app1/limited').then((r) => r.status)));
  const ok = statuses.filter((s) => s === 200).length;
  const rejected = statuses.filter((s) => s === 429).length;
  expect(ok + rejected).toBe(5);
  expect(ok).toBeGreaterThanOrEqual(2);
  expect(rejected).toBeGreaterThanOrEqual(1);
  const text = await router.metrics.text();
  const labels = { app: 'app1', api: 'limited' };
  expect(sample(text, 'scriptable_api_rate_limit_admitted_total', labels)).toBe(ok);
  expect(sample(text, 'scriptable_api_rate_limit_waited_total', labels)).toBeGreaterThanOrEqual(1);
  expect(sample(text, 'scriptable_api_rate_limit_wait_seconds_count', labels)).toBe(ok);
  expect(sample(text, 'scriptable_api_rate_limit_wait_seconds_sum', labels)).toBeGreaterThan(0.2);
  expect(sample(text, 'scriptable_api_rate_limit_rejected_total', { ...labels, reason: 'rate_limited' })).toBe(rejected);
  expect(sample(text, 'scriptable_api_requests_total', { ...labels, status: '429' })).toBe(rejected);
});

test("into the host's registry with a prefix; metrics: false turns them off", async () => {
  const registry = new prom.Registry();
  const { app, router } = setup({ metrics: { registry, prefix: 'tenant_api_' } });
  await request(app).get('/api/app1/ok').expect(200);
  expect(router.metrics.registry).toBe(registry);
  expect(sample(await registry.metrics(), 'tenant_api_requests_total', { app: 'app1', status: '200' })).toBe(1);
  // a second router in the same registry needs its own prefix
  expect(() => setup({ metrics: { registry, prefix: 'tenant_api_' } })).toThrow(/invalid metrics\.prefix: .*own prefix/);
  expect(setup({ metrics: false }).router.metrics).toBeUndefined();
  expect(() => setup({ metrics: { registry: {} } })).toThrow(/invalid metrics\.registry/);
  expect(() => setup({ metrics: { prefix: 'bad-prefix' } })).toThrow(/invalid metrics\.prefix/);
});

test("a metric of the registry that fails to collect: /metrics answers 500 without its error's text (the host's internals), which the router's logger gets", async () => {
  const registry = new prom.Registry();
  new prom.Gauge({
    name: 'host_db_connections',
    help: 'a gauge of the host whose collect fails',
    registers: [registry],
    collect() {
      throw new Error('connect ECONNREFUSED 10.0.0.7:5432 (postgres://app:hunter2@db.internal)');
    },
  });
  const errors = [];
  const { app } = setup({ metrics: { registry }, logger: { info() {}, warn() {}, error: (m) => errors.push(String(m)) } });
  const res = await request(app).get('/metrics');
  expect(res.status).toBe(500);
  expect(res.text).toBe('metrics failed');
  expect(errors).toEqual([expect.stringContaining('ECONNREFUSED 10.0.0.7:5432')]);
  expect(errors[0]).toMatch(/^scriptable-api: collecting the metrics failed: /);
});

test('queue wait counts time spent waiting for the one worker', async () => {
  const slow = 'export function fn() { const end = Date.now() + 150; while (Date.now() < end) {} return 1 }';
  const registry = new MemoryRegistry({ apps: { a: { scripts: { 's.js': slow }, apis: [{ path: 's', call: { script: 's.js', function: 'fn' }, returnType: 'JSON' }] } } });
  const router = createApiRouter({ registry, workers: 1, maxWorkers: 1 });
  routers.push(router);
  const app = express().use('/api', router);
  await request(app).get('/api/a/s').expect(200); // (the worker is warm)
  await Promise.all([request(app).get('/api/a/s'), request(app).get('/api/a/s')]);
  const text = await router.metrics.text();
  expect(sample(text, 'scriptable_api_queue_wait_seconds_count', { app: 'a' })).toBe(3);
  // the second of the pair waited for the first (~150 ms of script time)
  expect(sample(text, 'scriptable_api_queue_wait_seconds_sum', { app: 'a' })).toBeGreaterThan(0.1);
  expect(sample(text, 'scriptable_api_script_duration_seconds_sum', { app: 'a', api: 's' })).toBeGreaterThan(0.4);
});

test('a call that waited out queueTimeoutMs counts its wait as queue wait, not script time', async () => {
  const slow = 'export function fn() { const end = Date.now() + 1500; while (Date.now() < end) {} return 1 }';
  const fast = 'export function fn() { return 1 }';
  const registry = new MemoryRegistry({
    apps: {
      a: { scripts: { 's.js': slow }, apis: [{ path: 's', call: { script: 's.js', function: 'fn' }, returnType: 'JSON' }] },
      warm: { scripts: { 'f.js': fast }, apis: [{ path: 'f', call: { script: 'f.js', function: 'fn' }, returnType: 'JSON' }] },
    },
  });
  const router = createApiRouter({ registry, workers: 1, maxConcurrentPerApp: 1, queueTimeoutMs: 500 });
  routers.push(router);
  const app = express().use('/api', router);
  // (a worker started and warm: the first of the pair starts at once, whatever the machine's load)
  await router.ready();
  await request(app).get('/api/warm/f').expect(200);
  const [first, second] = await Promise.all([request(app).get('/api/a/s'), request(app).get('/api/a/s')]);
  expect([first.status, second.status].sort()).toEqual([200, 503]);
  const text = await router.metrics.text();
  expect(sample(text, 'scriptable_api_queue_wait_seconds_count', { app: 'a' })).toBe(2);
  // (the timed-out call's ~500 ms in line are queue wait; only the one that ran has script time)
  expect(sample(text, 'scriptable_api_queue_wait_seconds_sum', { app: 'a' })).toBeGreaterThanOrEqual(0.49);
  expect(sample(text, 'scriptable_api_script_duration_seconds_sum', { app: 'a', api: 's' })).toBeLessThan(1.5 + 0.49);
  // (and only it is observed: a 0 s observation for the call that never ran pulled the quantiles
  // of script time towards 0 just when calls queue up)
  expect(sample(text, 'scriptable_api_script_duration_seconds_count', { app: 'a', api: 's' })).toBe(1);
  expect(sample(text, 'scriptable_api_script_duration_seconds_bucket', { app: 'a', api: 's', le: '1' })).toBe(0);
  expect(sample(text, 'scriptable_api_requests_total', { app: 'a', api: 's', status: '503' })).toBe(1);
});

test('the example server serves its metrics at /metrics', async () => {
  const { createServer } = require('../../examples/server');
  const { app, close, dataDir } = createServer();
  cleanups.push(async () => {
    await close();
    fs.rmSync(dataDir, { recursive: true, force: true });
  });
  await request(app).get('/web0/api/shop/hello?name=Ada').expect(200);
  const res = await request(app).get('/metrics').expect(200);
  expect(res.headers['content-type']).toMatch(/^text\/plain/);
  expect(sample(res.text, 'scriptable_api_requests_total', { app: 'shop', api: 'hello', status: '200' })).toBe(1);
});

test('a closed router takes its metrics off the registry: a new one may register them again', async () => {
  const registry = new prom.Registry();
  const first = createApiRouter({ registry: new MemoryRegistry({ apps }), workers: 1, metrics: { registry } });
  await first.close();
  const second = createApiRouter({ registry: new MemoryRegistry({ apps }), workers: 1, metrics: { registry } });
  routers.push(second);
  expect(registry.getSingleMetric('scriptable_api_requests_total')).toBeDefined();
});

test('the API label is the configured path, whatever spelling a registry that matches loosely accepts', async () => {
  const memory = new MemoryRegistry({ apps });
  // a registry that matches API paths without regard to case (as a case-insensitive database would)
  const loose = { getApi: (appId, p, stage) => memory.getApi(appId, String(p).toLowerCase(), stage), getScript: (...a) => memory.getScript(...a) };
  const router = createApiRouter({ registry: loose, workers: 1 });
  routers.push(router);
  const app = express();
  app.use('/api', router);
  app.get('/metrics', router.metrics.handler);
  for (const p of ['ok', 'OK', 'Ok', 'oK']) await request(app).get(`/api/app1/${p}`).expect(200);
  const text = (await request(app).get('/metrics')).text;
  expect(sample(text, 'scriptable_api_requests_total', { app: 'app1', api: 'ok', status: '200' })).toBe(4);
  expect(text).not.toMatch(/api="(OK|Ok|oK)"/);
});

test('preview requests are counted apart from the live API (label preview="true")', async () => {
  const registry = new MemoryRegistry({ apps });
  // the draft of `ok` throws: trying it must not show as failures of the live API
  registry.putScript('app1', 'main.js', 'export function fn() { throw new Error("draft") }', { stage: 'preview' });
  const router = createApiRouter({ registry, workers: 1, preview: { authorize: () => true } });
  routers.push(router);
  const app = express().use('/api', router);
  await request(app).get('/api/app1/ok').expect(200);
  await request(app).get('/api/preview/app1/ok').expect(500);
  await request(app).get('/api/preview/app1/limited').expect(500);
  await request(app).get('/api/app1/limited').expect(200);
  const text = await router.metrics.text();
  const live = { app: 'app1', api: 'ok', preview: 'false' };
  const draft = { app: 'app1', api: 'ok', preview: 'true' };
  expect(sample(text, 'scriptable_api_requests_total', { ...live, status: '200' })).toBe(1);
  expect(sample(text, 'scriptable_api_requests_total', { ...live, status: '500' })).toBeUndefined();
  expect(sample(text, 'scriptable_api_requests_total', { ...draft, status: '500' })).toBe(1);
  expect(sample(text, 'scriptable_api_request_duration_seconds_count', live)).toBe(1);
  expect(sample(text, 'scriptable_api_request_duration_seconds_count', draft)).toBe(1);
  expect(sample(text, 'scriptable_api_script_duration_seconds_count', live)).toBe(1);
  expect(sample(text, 'scriptable_api_script_duration_seconds_count', draft)).toBe(1);
  expect(sample(text, 'scriptable_api_rate_limit_admitted_total', { app: 'app1', api: 'limited', preview: 'false' })).toBe(1);
  expect(sample(text, 'scriptable_api_rate_limit_admitted_total', { app: 'app1', api: 'limited', preview: 'true' })).toBe(1);
});

test.each(['quickjs', 'vm2'])('a request limited after its before script counts once in script time and queue wait (%s)', async (engine) => {
  const registry = new MemoryRegistry({
    apps: {
      a: {
        scripts: { 'b.js': 'export function b(ctx) { ctx.request.setAttribute("user", "u1") }', 'm.js': 'export function fn() { return 1 }' },
        apis: [{ path: 'lim', before: { script: 'b.js', function: 'b' }, call: { script: 'm.js', function: 'fn' }, returnType: 'JSON', rateLimit: { requestsPerSecond: 100, timeoutMs: 1000, identifier: '{attr.user}' } }],
      },
    },
  });
  const router = createApiRouter({ registry, workers: 1, engine });
  routers.push(router);
  const app = express().use('/api', router);
  await request(app).get('/api/a/lim').expect(200);
  await request(app).get('/api/a/lim').expect(200);
  const text = await router.metrics.text();
  const labels = { app: 'a', api: 'lim' };
  expect(sample(text, 'scriptable_api_request_duration_seconds_count', labels)).toBe(2);
  // (the before script and the rest run as two jobs: one observation a request, of their sum)
  expect(sample(text, 'scriptable_api_script_duration_seconds_count', labels)).toBe(2);
  expect(sample(text, 'scriptable_api_queue_wait_seconds_count', { app: 'a' })).toBe(2);
  expect(sample(text, 'scriptable_api_rate_limit_admitted_total', labels)).toBe(2);
});

test("a prefix that clashes with one of the host's metrics fails before any metric of the router is registered", () => {
  const registry = new prom.Registry();
  // (the host's own gauge has the name of the router's last metric)
  new prom.Gauge({ name: 'app_jobs_queued', help: "the host's own", registers: [registry] });
  expect(() => setup({ metrics: { registry, prefix: 'app_' } })).toThrow(/invalid metrics\.prefix: the registry already has a metric 'app_jobs_queued'/);
  expect(registry.getMetricsAsArray().map((m) => m.name)).toEqual(['app_jobs_queued']);
  // (nothing left behind: once the host's name is out of the way, the same prefix works)
  registry.removeSingleMetric('app_jobs_queued');
  expect(setup({ metrics: { registry, prefix: 'app_' } }).router.metrics.registry).toBe(registry);
});

test('metrics.buckets must be finite: prom-client adds the +Inf bucket itself', () => {
  expect(() => setup({ metrics: { buckets: [0.5, Infinity] } })).toThrow(/invalid metrics\.buckets: must be a non-empty array of increasing finite numbers/);
  expect(() => setup({ metrics: { buckets: [0.5, Number.MAX_VALUE] } })).not.toThrow();
});
