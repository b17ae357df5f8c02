'use strict';
const Redis = require('ioredis');
const { RedisRateLimitStore } = require('../../dist/cjs/rate-limit/redis-store');
const { createRateLimiter, bucketKey } = require('../../dist/cjs/rate-limit/limiter');
const { startRedis, describeRedis } = require('../helpers/redis');

function fakeReq(ip = '203.0.113.7') {
  return { ip, headers: {}, url: '/', socket: { remoteAddress: ip } };
}
function logger() {
  return { debug: jest.fn(), info: jest.fn(), warn: jest.fn(), error: jest.fn() };
}
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
let n = 0;
const uniq = (name) => `${name}-${process.pid}-${++n}`;

describeRedis('RedisRateLimitStore (real redis-server)', () => {
  let redis;
  let admin;
  const cleanup = [];

  beforeAll(async () => {
    redis = await startRedis();
    admin = new Redis(redis.url, { lazyConnect: true });
    await admin.connect();
  });

  afterEach(async () => {
    while (cleanup.length) await cleanup.pop()();
  });

  afterAll(async () => {
    if (admin) admin.disconnect();
    if (redis) await redis.stop();
  });

  function store(opts = {}) {
    const s = new RedisRateLimitStore({ url: redis.url, ...opts });
    cleanup.push(() => s.close());
    return s;
  }

  test('needs a url or a client', () => {
    expect(() => new RedisRateLimitStore({})).toThrow(/url.*client/);
  });

  test('a url beside a client is refused naming url (the client would be used and the url silently ignored), and so are the options only a client made from url takes', () => {
    const { ConfigError } = require('../..');
    const client = new Redis(redis.url, { lazyConnect: true });
    cleanup.push(async () => client.disconnect());
    for (const [extra, field] of [[{ url: redis.url }, 'url'], [{ connectTimeoutMs: 50 }, 'connectTimeoutMs'], [{ redisOptions: { password: 'x' } }, 'redisOptions']]) {
      let error;
      try {
        new RedisRateLimitStore({ client, ...extra });
      } catch (e) {
        error = e;
      }
      expect(error).toBeInstanceOf(ConfigError);
      expect(error.field).toBe(field);
      expect(error.message).toMatch(/client/);
    }
    // (a client alone, with the options that apply to it, is fine)
    const s = new RedisRateLimitStore({ client, prefix: 'p:', commandTimeoutMs: 50 });
    expect(s.client).toBe(client);
  });

  test('refuses timeouts a timer cannot hold (Node fires them after 1 ms) and a prefix that is not a string, naming the option', () => {
    for (const [name, bad] of [['commandTimeoutMs', 3e9], ['commandTimeoutMs', -1], ['commandTimeoutMs', '1000'], ['connectTimeoutMs', 2 ** 31], ['connectTimeoutMs', NaN], ['prefix', 5]]) {
      expect(() => new RedisRateLimitStore({ url: redis.url, [name]: bad })).toThrow(new RegExp(name));
    }
  });

  test('refuses a key that is not an option, naming it (ioredis options belong in redisOptions)', () => {
    expect(() => new RedisRateLimitStore({ url: redis.url, commandTimeout: 200 })).toThrow(/commandTimeout.*is not an option.*did you mean 'commandTimeoutMs'/);
    expect(() => new RedisRateLimitStore({ url: redis.url, password: 'secret' })).toThrow(/password.*is not an option/);
  });

  test('a url that is not a string, redisOptions that are not an object or a client that is not one are refused, naming the option', () => {
    const { ConfigError } = require('../..');
    // (ioredis reads a number as a port: every reservation would fail over to the fallback)
    for (const [options, field] of [[{ url: 6379 }, 'url'], [{ url: redis.url, redisOptions: 'tls' }, 'redisOptions'], [{ client: {} }, 'client'], [{ client: 'redis://x' }, 'client']]) {
      let error;
      try {
        new RedisRateLimitStore(options);
      } catch (e) {
        error = e;
      }
      expect(error).toBeInstanceOf(ConfigError);
      expect(error.field).toBe(field);
    }
  });

  test('a url Redis cannot be reached by (another scheme, unparsable) is refused naming url, without echoing it (it may hold a password)', () => {
    const { ConfigError } = require('../..');
    for (const [url, why] of [['http://cache:6379', /redis:\/\/ or rediss:\/\//], ['not a url', /not a Redis URL/], ['redis://:secret@[::1', /not a Redis URL/]]) {
      let error;
      try {
        new RedisRateLimitStore({ url });
      } catch (e) {
        error = e;
      }
      expect(error).toBeInstanceOf(ConfigError);
      expect(error.field).toBe('url');
      expect(error.message).toMatch(why);
      expect(error.message).not.toMatch(/secret/);
    }
    // the forms ioredis reads stay accepted: a scheme, host:port, a unix socket path
    for (const url of ['rediss://cache.internal:6380/2', '127.0.0.1:1', '/tmp/redis.sock']) store({ url, connectTimeoutMs: 50 });
  });

  test('commandTimeoutMs up to 2147483647 ms still reaches Redis', async () => {
    const s = store({ commandTimeoutMs: 2 ** 31 - 1 });
    expect(await s.reserve(uniq('long-timeout'), 1000, 0)).toEqual({ admitted: true, waitMs: 0 });
  });

  test('GCRA reservation with Redis TIME: spacing, rejection without consuming a slot', async () => {
    const s = store();
    const key = uniq('basic');
    expect(await s.reserve(key, 1000, 1500)).toEqual({ admitted: true, waitMs: 0 });
    const second = await s.reserve(key, 1000, 1500);
    expect(second.admitted).toBe(true);
    expect(second.waitMs).toBeGreaterThan(900);
    expect(second.waitMs).toBeLessThanOrEqual(1000);
    const third = await s.reserve(key, 1000, 1500);
    expect(third.admitted).toBe(false);
    expect(third.retryAfterMs).toBeGreaterThan(400);
    expect(third.retryAfterMs).toBeLessThanOrEqual(500);
    const tat = await admin.get(`sapi:rl:${key}`);
    await s.reserve(key, 1000, 1500);
    expect(await admin.get(`sapi:rl:${key}`)).toBe(tat); // rejected: bucket unchanged
  });

  test('a limit raised at runtime takes effect within the new interval: the old, longer TAT is lowered (and kept so) even by a rejected request', async () => {
    const s = store();
    const key = uniq('raised');
    // (a caller of the older contract, without the rule's max wait, leaves the bucket as it was)
    const old = uniq('old-contract');
    expect(await s.reserve(old, 60_000, 0)).toEqual({ admitted: true, waitMs: 0 });
    expect((await s.reserve(old, 50, 0)).retryAfterMs).toBeGreaterThan(50_000);
    expect(await s.reserve(key, 60_000, 0, 0)).toEqual({ admitted: true, waitMs: 0 }); // 1 per minute
    // raised to 20/s (50 ms): rejected at most for one new interval
    const first = await s.reserve(key, 50, 0, 0);
    if (!first.admitted) expect(first.retryAfterMs).toBeLessThanOrEqual(50);
    expect(Number(await admin.pttl(`sapi:rl:${key}`))).toBeLessThanOrEqual(100);
    const deadline = Date.now() + 2000;
    let admitted = first.admitted;
    while (!admitted && Date.now() < deadline) {
      await sleep(20);
      admitted = (await s.reserve(key, 50, 0, 0)).admitted;
    }
    expect(admitted).toBe(true);
    // a rule unchanged keeps its bucket as it was: a rejection does not touch it
    const tat = await admin.get(`sapi:rl:${key}`);
    const again = await s.reserve(key, 50, 0, 0);
    if (!again.admitted) expect(await admin.get(`sapi:rl:${key}`)).toBe(tat);
  });

  test("Redis TIME stepping 1 h back (the server's clock set back, a failover to a replica an hour behind) shuts a bucket for one interval, not the hour", async () => {
    const s = store();
    const key = uniq('stepped');
    // the bucket as the limiter left it an hour ahead of the clock Redis now reads
    const [sec, usec] = await admin.time();
    await admin.set(`sapi:rl:${key}`, String(Number(sec) * 1e6 + Number(usec) + 3600e6), 'PX', 3600e3);
    const first = await s.reserve(key, 100, 0, 0); // 10 req/s, no waiting
    expect(first.admitted).toBe(false);
    expect(first.retryAfterMs).toBeLessThanOrEqual(100);
    const deadline = performance.now() + 2000;
    let admitted = false;
    while (!admitted && performance.now() < deadline) {
      await sleep(20);
      admitted = (await s.reserve(key, 100, 0, 0)).admitted;
    }
    expect(admitted).toBe(true);
  });

  test('a rate whose interval overflows to Infinity (1e-320 req/s, a valid rule): limited, with whole-number headers, and no false Redis outage', async () => {
    const log = logger();
    const l = createRateLimiter({ store: store() }, log);
    cleanup.push(() => l.close());
    const args = { appId: 'app', apiPath: uniq('subnormal'), rule: { requestsPerSecond: 1e-320, identifier: 'global' }, req: fakeReq() };
    expect((await l.acquire(args)).ok).toBe(true);
    const d = await l.acquire(args);
    expect(d).toMatchObject({ ok: false, error: 'RATE_LIMITED' });
    expect(d.headers['Retry-After']).toMatch(/^\d{1,15}$/);
    expect(d.headers['RateLimit-Policy']).toMatch(/^"default"; q=1; w=\d{1,15}$/);
    expect(log.warn).not.toHaveBeenCalled();
    expect(log.error).not.toHaveBeenCalled();
    // the store alone, asked for a wait past what a Redis integer holds, answers a positive one
    const s = store();
    const key = uniq('huge');
    await s.reserve(key, 1e19, 0, 0);
    expect((await s.reserve(key, 1e19, 0, 0)).retryAfterMs).toBeGreaterThan(1e12);
  });

  test('a rate so low its bucket outlives any clock (1e-16 req/s): admitted once, then refused, without a Redis error', async () => {
    const s = store();
    const key = uniq('tiny');
    expect(await s.reserve(key, 1e19, 0)).toEqual({ admitted: true, waitMs: 0 });
    expect((await s.reserve(key, 1e19, 0)).admitted).toBe(false);
    expect(Number(await admin.pttl(`sapi:rl:${key}`))).toBeGreaterThan(1e12);
  });

  test('fractional intervals (3 req/s) keep microsecond precision', async () => {
    const s = store();
    const key = uniq('frac');
    // each admission time is (when the call reached Redis) + its wait; the call reached it between
    // the moments we sent it and got the answer, so consecutive admissions, 333.33 ms apart, are
    // bounded whatever the machine's pace between calls
    const calls = [];
    for (let i = 0; i < 4; i++) {
      const sent = performance.now();
      const { waitMs } = await s.reserve(key, 1000 / 3, 5000);
      calls.push({ sent, answered: performance.now(), waitMs });
    }
    for (let i = 1; i < 4; i++) {
      const [prev, cur] = [calls[i - 1], calls[i]];
      expect(cur.answered + cur.waitMs - (prev.sent + prev.waitMs)).toBeGreaterThanOrEqual(1000 / 3 - 1);
      expect(cur.sent + cur.waitMs - (prev.answered + prev.waitMs)).toBeLessThanOrEqual(1000 / 3 + 1);
    }
    expect(calls[0].waitMs).toBe(0);
  });

  test('two stores (two ioredis clients) share one limit atomically: 5 at once, 1 req/s, 1500 ms', async () => {
    const a = store();
    const b = store();
    const key = uniq('shared');
    const results = await Promise.all([a, b, a, b, a].map((s) => s.reserve(key, 1000, 1500)));
    const admitted = results.filter((r) => r.admitted).map((r) => r.waitMs).sort((x, y) => x - y);
    expect(admitted).toHaveLength(2);
    expect(admitted[0]).toBe(0);
    expect(admitted[1]).toBeGreaterThan(900);
    expect(admitted[1]).toBeLessThanOrEqual(1000);
    expect(results.filter((r) => !r.admitted)).toHaveLength(3);
  });

  test('two limiters sharing Redis: admitted at ~0 and ~1000 ms, three rejected at once', async () => {
    const l1 = createRateLimiter({ store: store() }, undefined);
    const l2 = createRateLimiter({ store: store() }, undefined);
    cleanup.push(() => l1.close(), () => l2.close());
    const rule = { requestsPerSecond: 1, timeoutMs: 1500, identifier: 'global' };
    const apiPath = uniq('two-limiters');
    const t0 = Date.now();
    const out = await Promise.all(
      [l1, l2, l1, l2, l1].map((l) =>
        l.acquire({ appId: 'app', apiPath, rule, req: fakeReq() }).then((d) => ({ ...d, at: Date.now() - t0 })),
      ),
    );
    const ok = out.filter((d) => d.ok).sort((x, y) => x.at - y.at);
    const rejected = out.filter((d) => !d.ok);
    expect(ok).toHaveLength(2);
    expect(ok[0].at).toBeLessThan(300);
    expect(ok[1].at).toBeGreaterThanOrEqual(850);
    expect(ok[1].at).toBeLessThan(1800);
    expect(rejected).toHaveLength(3);
    for (const d of rejected) {
      expect(d.error).toBe('RATE_LIMITED');
      expect(d.at).toBeLessThan(500);
      expect(d.headers['Retry-After']).toBe('1');
    }
  });

  test('prefix and key TTL: one key per bucket, expiring when its TAT passes', async () => {
    const prefix = `${uniq('pfx')}:`;
    const s = store({ prefix });
    await s.reserve('k1', 2000, 5000);
    await s.reserve('k1', 2000, 5000); // tat = now + 4000
    await s.reserve('k2', 500, 0);
    const keys = (await admin.keys(`${prefix}*`)).sort();
    expect(keys).toEqual([`${prefix}k1`, `${prefix}k2`]);
    const ttl1 = await admin.pttl(`${prefix}k1`);
    const ttl2 = await admin.pttl(`${prefix}k2`);
    expect(ttl1).toBeGreaterThan(3000);
    expect(ttl1).toBeLessThanOrEqual(4000);
    expect(ttl2).toBeGreaterThan(0);
    expect(ttl2).toBeLessThanOrEqual(500);
    expect(await admin.keys(`sapi:rl:k1`)).toEqual([]);
  });

  test('a given client is used and never closed by the store; NOSCRIPT falls back to EVAL', async () => {
    const client = new Redis(redis.url);
    cleanup.push(async () => client.quit());
    const s = new RedisRateLimitStore({ client, prefix: `${uniq('given')}:` });
    await admin.script('FLUSH');
    expect((await s.reserve('k', 1000, 0)).admitted).toBe(true); // EVALSHA → NOSCRIPT → EVAL
    expect((await s.reserve('k', 1000, 0)).admitted).toBe(false); // EVALSHA now cached
    await s.close();
    expect(client.status).toBe('ready');
    expect(await client.ping()).toBe('PONG');
    await expect(s.reserve('k', 1000, 0)).rejects.toThrow(/closed/);
  });

  test('close() quits a client it created', async () => {
    const s = new RedisRateLimitStore({ url: redis.url });
    await s.reserve(uniq('q'), 1000, 0);
    await s.close();
    expect(['end', 'close']).toContain(s.client.status);
  });

  test('close() called again while the first is under way resolves once the connection is closed, with the first', async () => {
    const s = new RedisRateLimitStore({ url: redis.url });
    await s.reserve(uniq('q2'), 1000, 0);
    const first = s.close();
    await s.close(); // (a host closing from two places: its shutdown handler and its teardown)
    expect(['end', 'close']).toContain(s.client.status);
    await first;
    await s.close();
    expect(s.client.status).toBe('end');
  });

  test('close() while the client first connects fails a reservation waiting for it at once, not at commandTimeoutMs', async () => {
    const s = new RedisRateLimitStore({ url: redis.url, commandTimeoutMs: 5000 });
    expect(s.client.status).toBe('connecting');
    const t0 = Date.now();
    const waiting = s.reserve('k', 1000, 0).then(() => 'admitted', (e) => e.message);
    await s.close();
    expect(await waiting).toMatch(/connection was closed/);
    expect(Date.now() - t0).toBeLessThan(2500);
  });

  test('Redis stopped mid-test: reserve rejects quickly, the limiter falls back, then recovers on restart', async () => {
    const s = store({ prefix: `${uniq('outage')}:` });
    const log = logger();
    const l = createRateLimiter({ store: s, storeRetryMs: 100 }, log);
    cleanup.push(() => l.close());
    const rule = { requestsPerSecond: 1, timeoutMs: 0 };
    const acquire = (ip) => l.acquire({ appId: 'app', apiPath: 'p', rule, req: fakeReq(ip) });
    expect((await acquire('192.0.2.1')).ok).toBe(true);
    expect(log.warn).not.toHaveBeenCalled();

    await redis.stop();
    let t0 = Date.now();
    await expect(s.reserve('x', 1000, 0)).rejects.toThrow();
    expect(Date.now() - t0).toBeLessThan(2000);

    t0 = Date.now();
    const a = await acquire('192.0.2.2');
    const b = await acquire('192.0.2.2');
    expect(Date.now() - t0).toBeLessThan(2000);
    expect(a.ok).toBe(true); // the in-memory fallback admits...
    expect(b).toMatchObject({ ok: false, error: 'RATE_LIMITED' }); // ...and limits
    for (let i = 0; i < 5; i++) {
      t0 = Date.now();
      await acquire('192.0.2.3');
      expect(Date.now() - t0).toBeLessThan(2000);
      await sleep(50);
    }
    expect(log.warn).toHaveBeenCalledTimes(1);

    await redis.restart();
    // the client reconnects in the background; requests keep being answered meanwhile
    const deadline = Date.now() + 15_000;
    while (log.info.mock.calls.length === 0 && Date.now() < deadline) {
      t0 = Date.now();
      const d = await acquire('192.0.2.4');
      expect(Date.now() - t0).toBeLessThan(2000);
      expect(d.ok === true || d.error === 'RATE_LIMITED').toBe(true);
      await sleep(100);
    }
    expect(log.info).toHaveBeenCalledTimes(1);
    expect(log.info.mock.calls[0][0]).toMatch(/recovered/);
    expect(log.warn).toHaveBeenCalledTimes(1);
    // limiting happens in Redis again
    const key = bucketKey('app', 'p', '192.0.2.9');
    expect((await acquire('192.0.2.9')).ok).toBe(true);
    expect(await admin.exists(`${s.prefix}${key}`)).toBe(1);
  }, 40_000);
});
