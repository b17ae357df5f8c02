'use strict';
// Rate limiting end to end: createApiRouter in a real Express app, through supertest.
const http = require('node:http');
const request = require('supertest');
const { WorkerPool, RedisRateLimitStore, MemoryRateLimitStore } = require('../..');
const { makeApp } = require('../helpers/app');
const { startRedis, describeRedis } = require('../helpers/redis');

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
const cleanup = [];
afterEach(async () => {
  while (cleanup.length) await cleanup.pop()();
});

/** A quickjs pool that counts the jobs (script runs) it is given. */
function countingEngine() {
  const pool = new WorkerPool({ engine: 'quickjs', size: 1, maxWorkers: 2, memoryLimitMb: 64, maxConcurrentPerApp: 16 });
  const engine = {
    name: 'counting',
    jobs: [],
    run(job, host) {
      engine.jobs.push({ phase: job.phase, query: job.request.query });
      return pool.run(job, host);
    },
    close: () => pool.close(),
    ready: () => pool.ready(),
  };
  return engine;
}

const SCRIPT = `
export function fn(ctx) { return { ok: true, n: ctx.query.n ?? null } }
export function before(ctx) { if (ctx.query.u) ctx.request.setAttribute('user', ctx.query.u) }
`;

/** app1/p calling main.js#fn with `rateLimit: rule`; trust proxy on so X-Forwarded-For sets req.ip. */
function limitedApp(rule, { before = false, rateLimit, engine = countingEngine(), allowUnderscoreHeaders } = {}) {
  const built = makeApp({
    router: { engine, rateLimit, allowUnderscoreHeaders },
    setup: (app) => app.set('trust proxy', true),
    apps: {
      app1: {
        scripts: { 'main.js': SCRIPT },
        apis: [
          {
            path: 'p',
            call: { script: 'main.js', function: 'fn' },
            returnType: 'JSON',
            rateLimit: rule,
            ...(before ? { before: { script: 'main.js', function: 'before' } } : {}),
          },
        ],
      },
    },
  });
  cleanup.push(() => engine.close(), () => built.router.close());
  return { ...built, engine };
}

const get = (app, ip, query = '', headers = {}) => {
  const r = request(app).get(`/web0/api/app1/p${query}`).set('X-Forwarded-For', ip);
  for (const [k, v] of Object.entries(headers)) r.set(k, v);
  return r;
};

/**
 * A rule changed in the registry between requests: 1 per minute → 20/s must admit again within the
 * new interval (a 429 meanwhile says Retry-After 1, not 60); then lowered back to 1 per minute,
 * it grants at most the one slot the new rule allows, however many requests follow.
 */
async function ruleChangedAtRuntime(rateLimit) {
  const built = limitedApp({ requestsPerSecond: 1 / 60, identifier: 'global' }, { rateLimit });
  const put = (rule) => built.registry.putApi('app1', { path: 'p', call: { script: 'main.js', function: 'fn' }, returnType: 'JSON', rateLimit: rule });
  expect((await get(built.app, '10.0.0.1')).status).toBe(200);
  const limited = await get(built.app, '10.0.0.1');
  expect(limited.status).toBe(429);
  expect(Number(limited.headers['retry-after'])).toBeGreaterThan(50);
  put({ requestsPerSecond: 20, identifier: 'global' });
  const t0 = Date.now();
  let res;
  for (;;) {
    res = await get(built.app, '10.0.0.1');
    if (res.status === 200 || Date.now() - t0 > 3000) break;
    expect(res.status).toBe(429);
    expect(Number(res.headers['retry-after'])).toBe(1);
    await sleep(20);
  }
  expect(res.status).toBe(200);
  put({ requestsPerSecond: 1 / 60, identifier: 'global' });
  const statuses = [];
  const t1 = Date.now();
  while (Date.now() - t1 < 300 || statuses.length < 3) {
    statuses.push((await get(built.app, '10.0.0.1')).status);
    await sleep(10);
  }
  expect(statuses.filter((s) => s === 200).length).toBeLessThanOrEqual(1);
  expect(statuses[statuses.length - 1]).toBe(429);
}

describe('rate limiting through the router', () => {
  test('429 with the error body, Retry-After and the RateLimit headers', async () => {
    const { app, router } = limitedApp({ requestsPerSecond: 1 });
    await router.ready(); // (the second request must come within the second: not after a worker start)
    expect((await get(app, '10.9.9.9')).status).toBe(200); // (nor after the script's first compile: warm it on another bucket)
    const ok = await get(app, '10.0.0.1');
    expect(ok.status).toBe(200);
    expect(ok.headers['ratelimit-policy']).toBe('"default"; q=1; w=1');
    expect(ok.headers.ratelimit).toBe('"default"; r=0; t=1');
    expect(ok.headers['retry-after']).toBeUndefined();

    const res = await get(app, '10.0.0.1');
    expect(res.status).toBe(429);
    expect(res.headers['content-type']).toMatch(/^application\/json/);
    expect(res.body).toEqual({ requestId: res.headers['x-request-id'], message: 'Too many requests', code: 270400 });
    expect(res.headers['retry-after']).toBe('1');
    expect(res.headers['ratelimit-policy']).toBe('"default"; q=1; w=1');
    expect(res.headers.ratelimit).toBe('"default"; r=0; t=1');
  });

  test('no rule, or 0 requests per second: no limit and no headers', async () => {
    const { app } = limitedApp({ requestsPerSecond: 0, timeoutMs: 0 });
    for (let i = 0; i < 5; i++) {
      const res = await get(app, '10.0.0.1');
      expect(res.status).toBe(200);
      expect(res.headers.ratelimit).toBeUndefined();
    }
  });

  // (the spec's Timeout Duration: 'A negative value is treated as zero'; 0.1 req/s keeps both requests in one interval)
  test('a negative timeoutMs counts as 0: a request that would have to wait is rejected at once, never run late', async () => {
    const { app } = limitedApp({ requestsPerSecond: 0.1, timeoutMs: -5000 });
    expect((await get(app, '10.0.0.1')).status).toBe(200);
    const t0 = Date.now();
    const again = await get(app, '10.0.0.1');
    expect([again.status, again.body.code]).toEqual([429, 270400]);
    expect(Number(again.headers['retry-after'])).toBeGreaterThan(5); // (its slot is the next one, about 10 s away)
    expect(Date.now() - t0).toBeLessThan(5000); // (rejected at arrival: not after a 10 s wait)
  });

  // (0.1 req/s: each test's requests fall in one 10 s interval however slow the machine is)
  test('default identifier {ip}: one IP is limited separately from another', async () => {
    const { app } = limitedApp({ requestsPerSecond: 0.1 });
    expect((await get(app, '10.0.0.1')).status).toBe(200);
    expect((await get(app, '10.0.0.1')).status).toBe(429);
    expect((await get(app, '10.0.0.2')).status).toBe(200);
    expect((await get(app, '10.0.0.2')).status).toBe(429);
    // IPv6 clients in one /56 share a bucket
    expect((await get(app, '2001:db8:0:100::1')).status).toBe(200);
    expect((await get(app, '2001:db8:0:1ff::2')).status).toBe(429);
    expect((await get(app, '2001:db8:0:200::1')).status).toBe(200);
  });

  test('"global" is one bucket for every caller', async () => {
    const { app } = limitedApp({ requestsPerSecond: 0.1, identifier: 'global' });
    expect((await get(app, '10.0.0.1')).status).toBe(200);
    expect((await get(app, '10.0.0.2')).status).toBe(429);
    expect((await get(app, '10.0.0.3')).status).toBe(429);
  });

  test('{header.x-user}: one bucket per user, whatever the IP; no header falls back to the IP', async () => {
    const { app } = limitedApp({ requestsPerSecond: 0.1, identifier: '{header.x-user}' });
    expect((await get(app, '10.0.0.1', '', { 'X-User': 'alice' })).status).toBe(200);
    expect((await get(app, '10.0.0.2', '', { 'X-User': 'alice' })).status).toBe(429);
    expect((await get(app, '10.0.0.1', '', { 'X-User': 'bob' })).status).toBe(200);
    expect((await get(app, '10.0.0.9')).status).toBe(200);
    expect((await get(app, '10.0.0.9')).status).toBe(429);
  });

  test('the IP a missing value falls back to cannot be claimed: a client sending another caller\'s address as the value does not spend that caller\'s slot', async () => {
    const byHeader = limitedApp({ requestsPerSecond: 0.1, identifier: 'user:{header.x-user}' });
    expect((await get(byHeader.app, '10.0.0.5', '', { 'X-User': '10.0.0.9' })).status).toBe(200);
    expect((await get(byHeader.app, '10.0.0.5', '', { 'X-User': '10.0.0.9' })).status).toBe(429);
    expect((await get(byHeader.app, '10.0.0.9')).status).toBe(200); // no header: its own IP's bucket
    expect((await get(byHeader.app, '10.0.0.9')).status).toBe(429);
    // a query value can carry any character (%00 included): still not the fallback's bucket
    const byQuery = limitedApp({ requestsPerSecond: 0.1, identifier: '{query.key}' });
    for (const value of ['2001:db8:1::/56', '%002001:db8:1::/56']) {
      expect((await get(byQuery.app, '10.0.0.5', `?key=${encodeURIComponent(value).replace('%25', '%')}`)).status).toBe(200);
    }
    expect((await get(byQuery.app, '2001:db8:1::7')).status).toBe(200); // the /56 of this address
    expect((await get(byQuery.app, '2001:db8:1::8')).status).toBe(429);
  });

  test.each([4, 5])('{query.NAME} reads the query as scripts see it, also when the host turns Express %s\'s query parser off', async (express) => {
    const engine = countingEngine();
    const built = makeApp({
      express,
      router: { engine },
      setup: (app) => app.set('query parser', false),
      apps: { app1: { scripts: { 'main.js': SCRIPT }, apis: [{ path: 'p', call: { script: 'main.js', function: 'fn' }, returnType: 'JSON', rateLimit: { requestsPerSecond: 0.1, identifier: '{query.key}' } }] } },
    });
    cleanup.push(() => engine.close(), () => built.router.close());
    const alice = await request(built.app).get('/web0/api/app1/p?key=alice&n=1');
    expect(alice.status).toBe(200);
    expect(alice.body).toEqual({ ok: true, n: '1' }); // (the script reads the query from the URL)
    expect((await request(built.app).get('/web0/api/app1/p?key=bob')).status).toBe(200); // same IP, another key
    expect((await request(built.app).get('/web0/api/app1/p?n=2&key=alice&key=carol')).status).toBe(429); // first value
  });

  test('{header.__proto__} (allowUnderscoreHeaders) reads no prototype: callers without the header are keyed by their IP, not all by "{}"', async () => {
    const { app } = limitedApp({ requestsPerSecond: 0.1, identifier: '{header.__proto__}' }, { allowUnderscoreHeaders: true });
    expect((await get(app, '10.0.0.1')).status).toBe(200);
    expect((await get(app, '10.0.0.2')).status).toBe(200);
    expect((await get(app, '10.0.0.1')).status).toBe(429);
  });

  test('{header.NAME} with an underscore in NAME: the header is not passed (as to scripts), so the key falls back to the IP, unless allowUnderscoreHeaders', async () => {
    // spec: "Request header names that contain an underscore are not passed through unless the
    // fronting web server is set to allow underscores in headers."
    const dropped = limitedApp({ requestsPerSecond: 0.1, identifier: '{header.x_user}' });
    expect((await get(dropped.app, '10.0.0.1', '', { 'X_User': 'alice' })).status).toBe(200);
    expect((await get(dropped.app, '10.0.0.1', '', { 'X_User': 'bob' })).status).toBe(429); // one IP, one bucket
    expect((await get(dropped.app, '10.0.0.2', '', { 'X_User': 'alice' })).status).toBe(200);
    const allowed = limitedApp({ requestsPerSecond: 0.1, identifier: '{header.x_user}' }, { allowUnderscoreHeaders: true });
    expect((await get(allowed.app, '10.0.0.1', '', { 'X_User': 'alice' })).status).toBe(200);
    expect((await get(allowed.app, '10.0.0.1', '', { 'X_User': 'bob' })).status).toBe(200);
    expect((await get(allowed.app, '10.0.0.2', '', { 'X_User': 'alice' })).status).toBe(429);
  });

  test('{attr.user} set by the before script: limited after the before script', async () => {
    const { app, engine } = limitedApp({ requestsPerSecond: 1, identifier: '{attr.user}' }, { before: true });
    expect((await get(app, '10.0.0.1', '?u=alice&n=1')).body).toEqual({ ok: true, n: '1' });
    const limited = await get(app, '10.0.0.2', '?u=alice&n=2');
    expect(limited.status).toBe(429);
    expect(limited.body.code).toBe(270400);
    expect(limited.headers['retry-after']).toBe('1');
    expect((await get(app, '10.0.0.1', '?u=bob&n=3')).status).toBe(200);
    // before ran for every request; the call ran only for the admitted ones
    expect(engine.jobs.map((j) => j.phase)).toEqual(['before', 'rest', 'before', 'before', 'rest']);
  });

  test.each(['quickjs', 'vm2'])('{attr.NAME} holding an array (%s): the whole array is the key (JSON), not its first item', async (engine) => {
    const built = makeApp({
      router: { engine },
      setup: (app) => app.set('trust proxy', true),
      apps: {
        app1: {
          scripts: {
            'main.js': `
export function fn(ctx) { return { ok: true } }
export function before(ctx) { ctx.request.setAttribute('user', [ctx.query.t, ctx.query.u]) }`,
          },
          apis: [{ path: 'p', call: { script: 'main.js', function: 'fn' }, returnType: 'JSON', before: { script: 'main.js', function: 'before' }, rateLimit: { requestsPerSecond: 0.1, identifier: '{attr.user}' } }],
        },
      },
    });
    cleanup.push(() => built.router.close());
    expect((await get(built.app, '10.0.0.1', '?t=acme&u=alice')).status).toBe(200);
    expect((await get(built.app, '10.0.0.1', '?t=acme&u=bob')).status).toBe(200); // another user of the same tenant
    expect((await get(built.app, '10.0.0.2', '?t=acme&u=alice')).status).toBe(429);
  });

  test('a rejected request costs no script call', async () => {
    // one admission per 10 s: the four requests fall in one interval however slow the machine is
    const { app, engine } = limitedApp({ requestsPerSecond: 0.1 }, { before: true });
    const statuses = [];
    for (let i = 0; i < 4; i++) statuses.push((await get(app, '10.0.0.1')).status);
    expect(statuses).toEqual([200, 429, 429, 429]);
    expect(engine.jobs).toHaveLength(1);
  });

  test('waits for its turn within timeoutMs (FIFO), rejects past it', async () => {
    const { app } = limitedApp({ requestsPerSecond: 2, timeoutMs: 700, identifier: 'global' });
    const t0 = Date.now();
    const results = await Promise.all(
      [1, 2, 3, 4].map((n) =>
        get(app, `10.0.0.${n}`, `?n=${n}`).then((res) => ({ n, status: res.status, at: Date.now() - t0 })),
      ),
    );
    const ok = results.filter((r) => r.status === 200).sort((a, b) => a.at - b.at);
    expect(ok).toHaveLength(2); // waits 0 and 500 fit in 700; the next would wait 1000
    expect(ok[1].at).toBeGreaterThanOrEqual(450);
    expect(results.filter((r) => r.status === 429)).toHaveLength(2);
  });

  test('a client that disconnects while queued never runs its script', async () => {
    const { app, engine } = limitedApp({ requestsPerSecond: 1, timeoutMs: 5000 });
    const server = app.listen(0, '127.0.0.1');
    await new Promise((r) => server.once('listening', r));
    cleanup.push(() => new Promise((r) => server.close(r)));
    const base = `http://127.0.0.1:${server.address().port}/web0/api/app1/p`;
    // warm the worker and the script on another bucket: a first call slower than 1 s would leave no wait
    expect((await get(app, '10.9.9.9', '?n=warm')).status).toBe(200);
    engine.jobs.length = 0;

    expect((await request(base).get('?n=first')).status).toBe(200); // takes the slot: next waits ~1 s
    const gone = http.get(`${base}?n=gone`);
    gone.on('error', () => {});
    await sleep(200);
    gone.destroy(); // hang up while queued
    await sleep(1300); // past the moment its slot came up
    expect(engine.jobs.map((j) => j.query.n)).toEqual(['first']);
    // the next request is admitted (the dropped one's slot has passed)
    const after = await request(base).get('?n=after');
    expect(after.status).toBe(200);
    expect(engine.jobs.map((j) => j.query.n)).toEqual(['first', 'after']);
  });

  test('a client gone before the limiter is asked (during the before script) takes no slot and its call never runs', async () => {
    let sawClose;
    const closed = new Promise((r) => (sawClose = r));
    let beforeStarted;
    const started = new Promise((r) => (beforeStarted = r));
    const inner = countingEngine();
    // the before script of the request 'gone' ends only once the server has seen its client leave
    const engine = {
      ...inner,
      run(job, host) {
        if (job.phase !== 'before' || job.request.query.n !== 'gone') return inner.run(job, host);
        beforeStarted();
        return closed.then(() => inner.run(job, host));
      },
    };
    const store = new MemoryRateLimitStore();
    const reserved = [];
    const counting = { reserveSync: (...a) => (reserved.push(a[0]), store.reserveSync(...a)), reserve: (...a) => store.reserve(...a), close: () => store.close() };
    const built = makeApp({
      router: { engine, rateLimit: { store: counting } },
      setup: (app) =>
        app.use((req, res, next) => {
          if (req.query.n === 'gone') res.once('close', sawClose);
          next();
        }),
      apps: {
        app1: {
          scripts: { 'main.js': SCRIPT },
          apis: [{ path: 'p', before: { script: 'main.js', function: 'before' }, call: { script: 'main.js', function: 'fn' }, returnType: 'JSON', rateLimit: { requestsPerSecond: 1, timeoutMs: 5000, identifier: '{attr.user}' } }],
        },
      },
    });
    cleanup.push(() => inner.close(), () => store.close());
    const server = built.app.listen(0, '127.0.0.1');
    await new Promise((r) => server.once('listening', r));
    cleanup.push(() => new Promise((r) => server.close(r)));
    const base = `http://127.0.0.1:${server.address().port}/web0/api/app1/p`;

    expect((await request(base).get('?u=alice&n=first')).status).toBe(200); // takes the slot: the next waits ~1 s
    const gone = http.get(`${base}?u=alice&n=gone`);
    gone.on('error', () => {});
    await started;
    gone.destroy(); // hang up while the before script runs
    await closed;
    await built.router.close(); // resolves once every request in the router is done
    expect(inner.jobs.map((j) => `${j.phase}:${j.query.n}`)).toEqual(['before:first', 'rest:first', 'before:gone']);
    expect(reserved).toHaveLength(1); // only 'first' took a slot
  });

  test('a client gone during a slow registry lookup takes no slot and its script never runs', async () => {
    const { MemoryRegistry } = require('../..');
    const mem = new MemoryRegistry({
      apps: { app1: { scripts: { 'main.js': SCRIPT }, apis: [{ path: 'p', call: { script: 'main.js', function: 'fn' }, returnType: 'JSON', rateLimit: { requestsPerSecond: 1, timeoutMs: 5000, identifier: 'global' } }] } },
    });
    let sawClose;
    const closed = new Promise((r) => (sawClose = r));
    let lookupStarted;
    const started = new Promise((r) => (lookupStarted = r));
    // the script lookup of the request 'gone' answers only once the server has seen its client leave
    let gate;
    const registry = {
      getApi: (a, p, s) => mem.getApi(a, p, s),
      getScript: async (a, n, s) => {
        if (gate) {
          lookupStarted();
          await gate;
        }
        return mem.getScript(a, n, s);
      },
    };
    const engine = countingEngine();
    const built = makeApp({
      registry,
      router: { engine },
      setup: (app) =>
        app.use((req, res, next) => {
          if (req.query.n === 'gone') res.once('close', sawClose);
          next();
        }),
    });
    cleanup.push(() => engine.close());
    const server = built.app.listen(0, '127.0.0.1');
    await new Promise((r) => server.once('listening', r));
    cleanup.push(() => new Promise((r) => server.close(r)));
    const base = `http://127.0.0.1:${server.address().port}/web0/api/app1/p`;

    expect((await request(base).get('?n=first')).status).toBe(200); // takes the slot: the next waits ~1 s
    gate = closed;
    const gone = http.get(`${base}?n=gone`);
    gone.on('error', () => {});
    await started;
    gone.destroy();
    await closed;
    gate = undefined;
    await built.router.close(); // resolves once every request in the router is done
    expect(engine.jobs.map((j) => j.query.n)).toEqual(['first']);
  });

  test('the preview path counts in buckets of its own: trying a draft takes no slot of the published API', async () => {
    // one admission per 10 s: the requests fall in one interval however slow the machine is
    const api = { path: 'p', call: { script: 'main.js', function: 'fn' }, returnType: 'JSON', rateLimit: { requestsPerSecond: 0.1, identifier: 'global' } };
    const engine = countingEngine();
    const built = makeApp({ router: { engine, preview: { authorize: () => true } }, apps: { app1: { scripts: { 'main.js': SCRIPT }, apis: [api] } } });
    built.registry.putApi('app1', api, { stage: 'preview' });
    cleanup.push(() => engine.close(), () => built.router.close());
    expect((await request(built.app).get('/web0/api/preview/app1/p')).status).toBe(200);
    expect((await request(built.app).get('/web0/api/app1/p')).status).toBe(200);
    expect((await request(built.app).get('/web0/api/app1/p')).status).toBe(429);
    expect((await request(built.app).get('/web0/api/preview/app1/p')).status).toBe(429);
  });

  test('a rule changed at runtime (memory store): a raised limit admits within the new interval, a lowered one grants no fresh burst', async () => {
    await ruleChangedAtRuntime(undefined);
  });

  test('maxWaiting: over the cap, 429 RATE_LIMIT_QUEUE_FULL at once', async () => {
    // (0.1 req/s: the second request falls in the first one's interval however slow the machine is)
    const { app } = limitedApp({ requestsPerSecond: 0.1, timeoutMs: 20000, identifier: 'global' }, { rateLimit: { maxWaiting: 0 } });
    expect((await get(app, '10.0.0.1')).status).toBe(200);
    const t0 = Date.now();
    const res = await get(app, '10.0.0.1');
    expect(Date.now() - t0).toBeLessThan(500);
    expect(res.status).toBe(429);
    expect(res.body).toEqual({ requestId: res.headers['x-request-id'], message: 'Too many requests waiting', code: 270401 });
    expect(Number(res.headers['retry-after'])).toBeGreaterThanOrEqual(1);
  });

  test('close({ force: true }) answers a request waiting for its slot 503 SHUTTING_DOWN at once; its script never runs', async () => {
    // a store that tells when it has been asked (the request then waits for its slot, 10 s on)
    const memory = new MemoryRateLimitStore({ sweepIntervalMs: 0 });
    const asked = [];
    const store = { reserve: (...args) => (asked.shift()?.(), memory.reserve(...args)) };
    const { app, router, engine } = limitedApp({ requestsPerSecond: 0.1, timeoutMs: 20000, identifier: 'global' }, { rateLimit: { store } });
    expect((await get(app, '10.0.0.1', '?n=first')).status).toBe(200);
    const reserved = new Promise((r) => asked.push(r));
    const waiting = get(app, '10.0.0.1', '?n=waits').then((res) => res);
    await reserved;
    await new Promise((r) => setImmediate(r)); // (the limiter holds it now)
    const t0 = Date.now();
    await router.close({ force: true });
    const res = await waiting;
    expect(Date.now() - t0).toBeLessThan(3000); // not the 10 s until its slot
    expect(res.status).toBe(503);
    expect(res.body).toEqual({ requestId: res.headers['x-request-id'], message: 'The server is shutting down', code: 270208 });
    expect(res.headers['retry-after']).toBe('1');
    expect(engine.jobs.map((j) => j.query.n)).toEqual(['first']);
  });

  test('close({ force: true }) answers a request whose store has not answered yet 503 SHUTTING_DOWN at once; its script never runs', async () => {
    // a store that answers only when told (the limiter gives up on it after 2 s)
    const memory = new MemoryRateLimitStore({ sweepIntervalMs: 0 });
    let asked;
    const reached = new Promise((r) => (asked = r));
    const answers = [];
    const store = {
      reserve: (...args) => {
        asked();
        return new Promise((resolve) => answers.push(() => resolve(memory.reserve(...args))));
      },
    };
    const { app, router, engine } = limitedApp({ requestsPerSecond: 10, timeoutMs: 5000, identifier: 'global' }, { rateLimit: { store } });
    cleanup.push(async () => answers.forEach((a) => a()));
    const waiting = get(app, '10.0.0.1', '?n=asking').then((res) => res);
    await reached;
    const t0 = Date.now();
    await router.close({ force: true });
    const res = await Promise.race([waiting, sleep(1500).then(() => 'still waiting for the store')]);
    expect(res).not.toBe('still waiting for the store');
    expect(Date.now() - t0).toBeLessThan(1500);
    expect(res.status).toBe(503);
    expect(res.body).toEqual({ requestId: res.headers['x-request-id'], message: 'The server is shutting down', code: 270208 });
    answers.forEach((a) => a()); // (the store's late answer changes nothing)
    await sleep(50);
    expect(engine.jobs).toEqual([]);
  });
});

describeRedis('rate limiting through two routers sharing Redis', () => {
  let redis;
  beforeAll(async () => {
    redis = await startRedis();
  });
  afterAll(async () => {
    if (redis) await redis.stop();
  });

  test('a rule changed at runtime (Redis store): a raised limit admits within the new interval, a lowered one grants no fresh burst', async () => {
    const store = new RedisRateLimitStore({ url: redis.url, prefix: `reconfig-${process.pid}-${Date.now()}:` });
    cleanup.push(() => store.close());
    await ruleChangedAtRuntime({ store });
  });

  test('one limit and one order: 5 at once at 1 req/s, 1500 ms → 200 at ~0 and ~1000 ms, three 429 at once', async () => {
    const prefix = `router-${process.pid}-${Date.now()}:`;
    const rule = { requestsPerSecond: 1, timeoutMs: 1500, identifier: 'global' };
    const apps = [0, 1].map(() => {
      const store = new RedisRateLimitStore({ url: redis.url, prefix });
      cleanup.push(() => store.close());
      return limitedApp(rule, { rateLimit: { store } }).app;
    });
    // warm both routers (script compile) on another bucket so timings measure only the limiter
    await Promise.all(apps.map((app) => request(app).get('/web0/api/app1/p').set('X-Forwarded-For', '10.9.9.9')));
    await sleep(1100);
    const t0 = Date.now();
    const results = await Promise.all(
      [0, 1, 0, 1, 0].map((i, n) => get(apps[i], `10.0.0.${n}`).then((res) => ({ status: res.status, at: Date.now() - t0 }))),
    );
    const ok = results.filter((r) => r.status === 200).sort((a, b) => a.at - b.at);
    const rejected = results.filter((r) => r.status === 429);
    expect(ok).toHaveLength(2);
    expect(ok[0].at).toBeLessThan(700);
    expect(ok[1].at).toBeGreaterThanOrEqual(900);
    expect(rejected).toHaveLength(3);
    for (const r of rejected) expect(r.at).toBeLessThan(700);
  });

  test('Redis stopped: requests are answered (in-memory fallback), never hung', async () => {
    const store = new RedisRateLimitStore({ url: redis.url, prefix: `down-${process.pid}:` });
    cleanup.push(() => store.close());
    const warn = jest.fn();
    const logger = { info: jest.fn(), warn, error: jest.fn() };
    const engine = countingEngine();
    const built = makeApp({
      router: { engine, rateLimit: { store }, logger },
      setup: (app) => app.set('trust proxy', true),
      apps: { app1: { scripts: { 'main.js': SCRIPT }, apis: [{ path: 'p', call: { script: 'main.js', function: 'fn' }, returnType: 'JSON', rateLimit: { requestsPerSecond: 1 } }] } },
    });
    cleanup.push(() => engine.close(), () => built.router.close());
    expect((await get(built.app, '10.0.0.1')).status).toBe(200);
    await redis.stop();
    try {
      const t0 = Date.now();
      expect((await get(built.app, '10.0.0.2')).status).toBe(200);
      expect((await get(built.app, '10.0.0.2')).status).toBe(429);
      expect(Date.now() - t0).toBeLessThan(3000);
      expect(warn.mock.calls.filter((c) => /rate-limit store unavailable/.test(c[0]))).toHaveLength(1);
    } finally {
      await redis.restart();
    }
  });
});
