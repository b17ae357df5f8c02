'use strict';
const { createRateLimiter, bucketKey } = require('../../dist/cjs/rate-limit/limiter');
const { MemoryRateLimitStore } = require('../../dist/cjs/rate-limit/memory-store');
const { rateLimitHeaders, policyHeader, quotaOf } = require('../../dist/cjs/rate-limit/headers');

function fakeReq(ip = '203.0.113.7', headers = {}) {
  return { ip, headers, url: '/', socket: { remoteAddress: ip } };
}
function logger() {
  return { debug: jest.fn(), info: jest.fn(), warn: jest.fn(), error: jest.fn() };
}
const args = (rule, extra = {}) => ({ appId: 'app', apiPath: 'orders/list', rule, req: fakeReq(), ...extra });
const tick = () => new Promise((r) => setImmediate(r));

/** A store that can be switched between working (memory), failing and hanging. */
function flakyStore(now) {
  const inner = new MemoryRateLimitStore({ now, sweepIntervalMs: 0 });
  const s = {
    mode: 'up',
    calls: 0,
    reserve(key, i, w) {
      s.calls++;
      if (s.mode === 'down') return Promise.reject(new Error('ECONNREFUSED'));
      if (s.mode === 'throw') throw new Error('sync failure');
      if (s.mode === 'hang') return new Promise(() => {});
      if (s.mode === 'garbage') return Promise.resolve({ nope: true });
      // (a rejection to retry later than the longest interval any rule has: no Retry-After value prints it)
      if (s.mode === 'forever') return Promise.resolve({ admitted: false, retryAfterMs: 1e308 });
      return inner.reserve(key, i, w);
    },
  };
  return s;
}

describe('headers', () => {
  test('RateLimit-Policy expresses the rate as a whole quota per window', () => {
    expect(policyHeader(10)).toBe('"default"; q=10; w=1');
    expect(policyHeader(0.5)).toBe('"default"; q=1; w=2');
    expect(policyHeader(2.5)).toBe('"default"; q=5; w=2');
    expect(quotaOf(0.25)).toEqual({ quota: 1, windowSeconds: 4 });
    expect(quotaOf(1 / 3)).toEqual({ quota: 1, windowSeconds: 3 });
  });

  test('admitted: remaining requests acceptable now, seconds until the bucket is idle', () => {
    // 1 req/s, 3 s max wait, admitted at once: 3 more fit (waits 1, 2, 3 s); idle in 1 s
    expect(rateLimitHeaders(1, 1000, 3000, { admitted: true, waitMs: 0 })).toEqual({
      'RateLimit-Policy': '"default"; q=1; w=1',
      RateLimit: '"default"; r=3; t=1',
    });
    // no waiting allowed: nothing else fits right now
    expect(rateLimitHeaders(10, 100, 0, { admitted: true, waitMs: 0 }).RateLimit).toBe('"default"; r=0; t=1');
    expect(rateLimitHeaders(1, 1000, 1500, { admitted: true, waitMs: 1000 }).RateLimit).toBe('"default"; r=0; t=2');
  });

  test('rejected: Retry-After in whole seconds, at least 1, and r=0', () => {
    expect(rateLimitHeaders(1, 1000, 0, { admitted: false, retryAfterMs: 20 })).toEqual({
      'RateLimit-Policy': '"default"; q=1; w=1',
      RateLimit: '"default"; r=0; t=1',
      'Retry-After': '1',
    });
    expect(rateLimitHeaders(0.5, 2000, 0, { admitted: false, retryAfterMs: 2000 })['Retry-After']).toBe('2');
    expect(rateLimitHeaders(0.5, 2000, 0, { admitted: false, retryAfterMs: 2001 })['Retry-After']).toBe('3');
  });
});

describe('createRateLimiter', () => {
  test('a rate so low its interval overflows to Infinity (1e-320 req/s, a valid rule): one admission, then 429 with whole-number headers', async () => {
    const l = createRateLimiter(undefined, undefined);
    const rule = { requestsPerSecond: 1e-320, identifier: 'global' };
    expect((await l.acquire(args(rule))).ok).toBe(true);
    const d = await l.acquire(args(rule));
    expect(d.ok).toBe(false);
    expect(d.headers['Retry-After']).toMatch(/^\d{1,15}$/);
    expect(d.headers.RateLimit).toMatch(/^"default"; r=0; t=\d{1,15}$/);
    expect(d.headers['RateLimit-Policy']).toMatch(/^"default"; q=1; w=\d{1,15}$/);
    return l.close();
  });

  test('isActive / needsAttributes', async () => {
    const l = createRateLimiter(undefined, undefined);
    expect(l.isActive({ requestsPerSecond: 5 })).toBe(true);
    expect(l.isActive({ requestsPerSecond: 0 })).toBe(false);
    expect(l.needsAttributes({ requestsPerSecond: 5, identifier: '{attr.user}' })).toBe(true);
    expect(l.needsAttributes({ requestsPerSecond: 5 })).toBe(false);
    await l.close();
  });

  test('validates options', () => {
    expect(() => createRateLimiter({ onStoreError: 'closed' })).toThrow(/onStoreError/);
    expect(() => createRateLimiter({ maxWaiting: -1 })).toThrow(/maxWaiting/);
    expect(() => createRateLimiter({ ipv6Subnet: 200 })).toThrow(/ipv6Subnet/);
    expect(() => createRateLimiter({ store: {} })).toThrow(/store/);
  });

  test('bucket key: app, API path and identifier separated by NUL; hashed when long', () => {
    expect(bucketKey('a', 'p', '1.2.3.4')).toBe('a\u0000p\u00001.2.3.4');
    const long = bucketKey('a', 'p', 'x'.repeat(500));
    expect(long).toMatch(/^sha256:[A-Za-z0-9_-]{43}$/);
    expect(bucketKey('a', 'p', 'x'.repeat(500))).toBe(long);
    expect(bucketKey('a', 'p', 'x'.repeat(501))).not.toBe(long);
  });

  test('admitted at once: ok with RateLimit headers, no Retry-After', async () => {
    const l = createRateLimiter(undefined, undefined);
    const d = await l.acquire(args({ requestsPerSecond: 2 }));
    expect(d).toEqual({ ok: true, headers: { 'RateLimit-Policy': '"default"; q=2; w=1', RateLimit: '"default"; r=0; t=1' } });
    await l.close();
  });

  test('over the rate without a timeout: RATE_LIMITED with Retry-After', async () => {
    const l = createRateLimiter(undefined, undefined);
    const rule = { requestsPerSecond: 1 };
    expect((await l.acquire(args(rule))).ok).toBe(true);
    const d = await l.acquire(args(rule));
    expect(d.ok).toBe(false);
    expect(d.error).toBe('RATE_LIMITED');
    expect(d.headers['Retry-After']).toBe('1');
    expect(d.headers.RateLimit).toBe('"default"; r=0; t=1');
    // another IP, another API, another app: separate buckets
    expect((await l.acquire({ ...args(rule), req: fakeReq('198.51.100.2') })).ok).toBe(true);
    expect((await l.acquire({ ...args(rule), apiPath: 'other' })).ok).toBe(true);
    expect((await l.acquire({ ...args(rule), appId: 'app2' })).ok).toBe(true);
    await l.close();
  });

  test('a store whose clock steps 1 h back or ahead (Redis TIME after a failover, a now() on the wall clock) keeps the rate, losing at most one interval', async () => {
    const c = { t: 1_000_000 };
    const store = new MemoryRateLimitStore({ now: () => c.t, sweepIntervalMs: 0 });
    const l = createRateLimiter({ store }, logger());
    const rule = { requestsPerSecond: 10 }; // (a slot every 100 ms, no waiting)
    for (let i = 0; i < 10; i++, c.t += 100) expect((await l.acquire(args(rule))).ok).toBe(true);
    // the clock steps 1 h back: the bucket's slots, an hour ahead now, do not shut it for the hour
    c.t -= 3600e3;
    const d = await l.acquire(args(rule));
    expect(d.ok).toBe(false);
    expect(d.headers['Retry-After']).toBe('1');
    c.t += 100;
    expect((await l.acquire(args(rule))).ok).toBe(true);
    expect((await l.acquire(args(rule))).ok).toBe(false); // (and no burst: one a slot)
    // the clock steps 1 h ahead: one request at once, then the rate again
    c.t += 3600e3;
    expect((await l.acquire(args(rule))).ok).toBe(true);
    expect((await l.acquire(args(rule))).ok).toBe(false);
    await l.close();
  });

  test('inactive rule (0 req/s) admits without headers', async () => {
    const l = createRateLimiter(undefined, undefined);
    for (let i = 0; i < 5; i++) expect(await l.acquire(args({ requestsPerSecond: 0 }))).toEqual({ ok: true, headers: {} });
    await l.close();
  });

  test('waits for its slot (real time, generous tolerance)', async () => {
    const l = createRateLimiter(undefined, undefined);
    const rule = { requestsPerSecond: 5, timeoutMs: 1000, identifier: 'global' };
    const t0 = Date.now();
    const done = [];
    await Promise.all(
      [0, 1, 2].map((i) => l.acquire(args(rule)).then((d) => done.push({ i, ok: d.ok, at: Date.now() - t0 }))),
    );
    expect(done.map((d) => d.i)).toEqual([0, 1, 2]); // FIFO
    expect(done.every((d) => d.ok)).toBe(true);
    expect(done[0].at).toBeLessThan(100);
    expect(done[1].at).toBeGreaterThanOrEqual(190);
    expect(done[2].at).toBeGreaterThanOrEqual(390);
    expect(done[2].at).toBeLessThan(1500);
    expect(l.waitingCount).toBe(0);
    await l.close();
  });

  test('a client that disconnects while waiting is dropped and frees its waiting place', async () => {
    const l = createRateLimiter(undefined, undefined);
    const rule = { requestsPerSecond: 0.01, timeoutMs: 600_000, identifier: 'global' };
    expect((await l.acquire(args(rule))).ok).toBe(true);
    const ac = new AbortController();
    const p = l.acquire(args(rule, { signal: ac.signal }));
    await tick();
    expect(l.waitingCount).toBe(1);
    ac.abort();
    await expect(p).resolves.toEqual({ ok: false, headers: {} });
    expect(l.waitingCount).toBe(0);
    await l.close();
  });

  test('a client that disconnects while the store has not answered is dropped at once and frees its waiting place', async () => {
    const store = flakyStore(() => 0);
    store.mode = 'hang';
    const l = createRateLimiter({ store, storeTimeoutMs: 0 }, undefined);
    const ac = new AbortController();
    const p = l.acquire(args({ requestsPerSecond: 1, timeoutMs: 1000, identifier: 'global' }, { signal: ac.signal }));
    await tick();
    expect(store.calls).toBe(1);
    expect(l.waitingCount).toBe(1);
    ac.abort();
    await expect(p).resolves.toEqual({ ok: false, headers: {} });
    expect(l.waitingCount).toBe(0);
    await l.close();
  });

  test('a signal already aborted: dropped without reserving', async () => {
    const store = flakyStore(() => 0);
    const l = createRateLimiter({ store }, undefined);
    const ac = new AbortController();
    ac.abort();
    await expect(l.acquire(args({ requestsPerSecond: 1 }, { signal: ac.signal }))).resolves.toEqual({ ok: false, headers: {} });
    expect(store.calls).toBe(0);
    await l.close();
  });

  test('maxWaiting: over the cap, RATE_LIMIT_QUEUE_FULL at once, without consuming a slot', async () => {
    const store = new MemoryRateLimitStore({ now: () => 0, sweepIntervalMs: 0 });
    const l = createRateLimiter({ store, maxWaiting: 2 }, undefined);
    const rule = { requestsPerSecond: 1, timeoutMs: 60_000, identifier: 'global' };
    const ac = new AbortController();
    expect((await l.acquire(args(rule))).ok).toBe(true); // runs at once: tat 1000
    const w1 = l.acquire(args(rule, { signal: ac.signal })); // waits 1000
    const w2 = l.acquire(args(rule, { signal: ac.signal })); // waits 2000
    await tick();
    expect(l.waitingCount).toBe(2);
    const t0 = Date.now();
    const full = await l.acquire(args(rule));
    expect(Date.now() - t0).toBeLessThan(100);
    expect(full.ok).toBe(false);
    expect(full.error).toBe('RATE_LIMIT_QUEUE_FULL');
    expect(Number(full.headers['Retry-After'])).toBeGreaterThanOrEqual(1);
    // a bucket with a free slot still runs at once while the queue is full
    expect((await l.acquire({ ...args(rule), apiPath: 'other' })).ok).toBe(true);
    // no slot was consumed by the rejected request: the next wait is still 3000
    expect(store.reserveSync(bucketKey('app', 'orders/list', 'global'), 1000, 60_000)).toEqual({ admitted: true, waitMs: 3000 });
    ac.abort();
    await Promise.all([w1, w2]);
    expect(l.waitingCount).toBe(0);
    await l.close();
    await store.close();
  });

  test('maxWaiting: a request that would exceed its timeout anyway gets RATE_LIMITED', async () => {
    const store = new MemoryRateLimitStore({ now: () => 0, sweepIntervalMs: 0 });
    const l = createRateLimiter({ store, maxWaiting: 1 }, undefined);
    const rule = { requestsPerSecond: 1, timeoutMs: 1500, identifier: 'global' };
    const ac = new AbortController();
    await l.acquire(args(rule));
    const w = l.acquire(args(rule, { signal: ac.signal })); // waits 1000, holds the only place
    await tick();
    const d = await l.acquire(args(rule)); // would wait 2000 > 1500
    expect(d.error).toBe('RATE_LIMITED');
    expect(d.headers['Retry-After']).toBe('1');
    ac.abort();
    await w;
    await l.close();
    await store.close();
  });

  test('maxWaiting 0: no request ever waits', async () => {
    const l = createRateLimiter({ maxWaiting: 0 }, undefined);
    const rule = { requestsPerSecond: 1, timeoutMs: 5000 };
    expect((await l.acquire(args(rule))).ok).toBe(true);
    expect((await l.acquire(args(rule))).error).toBe('RATE_LIMIT_QUEUE_FULL');
    await l.close();
  });

  test('store failure → in-memory fallback, one warning per outage, one info on recovery', async () => {
    const store = flakyStore(() => Date.now());
    const log = logger();
    const l = createRateLimiter({ store, storeRetryMs: 0 }, log);
    const rule = { requestsPerSecond: 1 };
    store.mode = 'down';
    const a = await l.acquire(args(rule));
    const b = await l.acquire(args(rule));
    expect(a.ok).toBe(true);
    expect(b).toMatchObject({ ok: false, error: 'RATE_LIMITED' }); // the fallback still limits
    expect(b.headers['Retry-After']).toBe('1');
    for (let i = 0; i < 5; i++) await l.acquire(args(rule));
    expect(log.warn).toHaveBeenCalledTimes(1);
    expect(log.warn.mock.calls[0][0]).toMatch(/unavailable/);
    expect(log.warn.mock.calls[0][1]).toEqual({ error: 'ECONNREFUSED' });
    store.mode = 'up';
    expect((await l.acquire({ ...args(rule), req: fakeReq('192.0.2.50') })).ok).toBe(true);
    expect(log.info).toHaveBeenCalledTimes(1);
    expect(log.info.mock.calls[0][0]).toMatch(/recovered/);
    await l.acquire(args(rule));
    expect(log.info).toHaveBeenCalledTimes(1);
    store.mode = 'down'; // a second outage is logged again
    await l.acquire(args(rule));
    await l.acquire(args(rule));
    expect(log.warn).toHaveBeenCalledTimes(2);
    await l.close();
  });

  test('during an outage the store is retried at most once per storeRetryMs', async () => {
    const store = flakyStore(() => Date.now());
    const l = createRateLimiter({ store, storeRetryMs: 60_000 }, logger());
    store.mode = 'down';
    for (let i = 0; i < 10; i++) await l.acquire(args({ requestsPerSecond: 100 }));
    expect(store.calls).toBe(1);
    await l.close();
  });

  test('a wall-clock step back during an outage does not put off the next retry of the store', async () => {
    const store = flakyStore(() => Date.now());
    const l = createRateLimiter({ store, storeRetryMs: 50 }, logger());
    const realNow = Date.now;
    try {
      store.mode = 'down';
      await l.acquire(args({ requestsPerSecond: 100 }));
      expect(store.calls).toBe(1);
      store.mode = 'up';
      jest.spyOn(Date, 'now').mockImplementation(() => realNow() - 3600e3);
      // (the store's answer comes from a probe once storeRetryMs has passed on the monotonic clock)
      const t0 = performance.now();
      while (store.calls === 1 && performance.now() - t0 < 5000) {
        await new Promise((r) => setTimeout(r, 20));
        await l.acquire(args({ requestsPerSecond: 100 }));
      }
      expect(store.calls).toBe(2);
    } finally {
      jest.restoreAllMocks();
      await l.close();
    }
  });

  test('a store answering a wait no timer can hold (past 2^31 - 1 ms) is a malformed answer, not a request admitted at once', async () => {
    const store = { reserve: async () => ({ admitted: true, waitMs: 3e9 }) };
    const log = logger();
    const l = createRateLimiter({ store, storeRetryMs: 60_000 }, log);
    const warnings = [];
    const onWarning = (w) => warnings.push(w.name);
    process.on('warning', onWarning);
    try {
      const rule = { requestsPerSecond: 1, timeoutMs: 1000 };
      const first = await l.acquire(args(rule));
      expect(first.waitedMs).toBeUndefined(); // (the fallback's slot, free: admitted without waiting)
      expect(log.warn).toHaveBeenCalledWith(expect.stringMatching(/store unavailable/), expect.anything());
      // the fallback limits: the next one waits its second, not 1 ms
      const t0 = performance.now();
      const second = await l.acquire(args(rule));
      expect(second.ok).toBe(true);
      expect(performance.now() - t0).toBeGreaterThan(800);
      await new Promise((r) => setImmediate(r));
      expect(warnings).not.toContain('TimeoutOverflowWarning');
    } finally {
      process.off('warning', onWarning);
      await l.close();
    }
  });

  test("store failure with onStoreError 'open' admits, logged once", async () => {
    const store = flakyStore(() => Date.now());
    const log = logger();
    const l = createRateLimiter({ store, onStoreError: 'open', storeRetryMs: 0 }, log);
    store.mode = 'down';
    for (let i = 0; i < 5; i++) expect(await l.acquire(args({ requestsPerSecond: 1 }))).toEqual({ ok: true, headers: {} });
    expect(log.warn).toHaveBeenCalledTimes(1);
    expect(log.warn.mock.calls[0][0]).toMatch(/without limiting/);
    await l.close();
  });

  test('a store that throws synchronously, hangs, or answers garbage never fails or hangs a request', async () => {
    for (const mode of ['throw', 'hang', 'garbage', 'forever']) {
      const store = flakyStore(() => Date.now());
      const log = logger();
      const l = createRateLimiter({ store, storeTimeoutMs: 200 }, log);
      store.mode = mode;
      const t0 = Date.now();
      const d = await l.acquire(args({ requestsPerSecond: 1, timeoutMs: 5000 }));
      expect(d.ok).toBe(true);
      expect(Date.now() - t0).toBeLessThan(1500);
      expect(log.warn).toHaveBeenCalledTimes(1);
      expect(l.waitingCount).toBe(0);
      await l.close();
    }
  });

  test('a synchronous store (reserveSync) that throws or answers garbage falls back, then recovers', async () => {
    const inner = new MemoryRateLimitStore({ sweepIntervalMs: 0 });
    let mode = 'throw';
    const store = {
      reserveSync(k, i, w) {
        if (mode === 'throw') throw new Error('sync down');
        if (mode === 'garbage') return { admitted: true, waitMs: NaN };
        return inner.reserveSync(k, i, w);
      },
      reserve: (k, i, w) => Promise.resolve().then(() => store.reserveSync(k, i, w)),
    };
    const log = logger();
    const l = createRateLimiter({ store, storeRetryMs: 0 }, log);
    const rule = { requestsPerSecond: 1 };
    expect((await l.acquire(args(rule))).ok).toBe(true);
    expect((await l.acquire(args(rule))).error).toBe('RATE_LIMITED'); // the fallback limits
    mode = 'garbage';
    expect((await l.acquire({ ...args(rule), req: fakeReq('192.0.2.77') })).ok).toBe(true);
    expect(log.warn).toHaveBeenCalledTimes(1);
    mode = 'ok';
    expect((await l.acquire({ ...args(rule), req: fakeReq('192.0.2.78') })).ok).toBe(true);
    expect(log.info).toHaveBeenCalledTimes(1);
    expect(inner.size).toBe(1);
    await l.close();
    await inner.close();
  });

  test('never rejects, even on an unusable request', async () => {
    const log = logger();
    const l = createRateLimiter(undefined, log);
    const d = await l.acquire({ appId: 'a', apiPath: 'p', rule: { requestsPerSecond: 1, identifier: '{header.x}' }, req: {} });
    expect(d.ok).toBe(true);
    expect(log.error).toHaveBeenCalledTimes(1);
    await l.close();
  });

  test('{attr.X} identifiers use the attributes passed to acquire', async () => {
    const l = createRateLimiter(undefined, undefined);
    const rule = { requestsPerSecond: 1, identifier: '{attr.user}' };
    expect((await l.acquire(args(rule, { attributes: { user: 'u1' } }))).ok).toBe(true);
    expect((await l.acquire(args(rule, { attributes: { user: 'u1' } }))).ok).toBe(false);
    expect((await l.acquire(args(rule, { attributes: { user: 'u2' } }))).ok).toBe(true);
    await l.close();
  });

  test('a store failing after close() (a request a forced close ended) starts no in-memory fallback and logs no outage', async () => {
    const failures = [];
    const store = { reserve: () => new Promise((_, reject) => failures.push(reject)) };
    const log = logger();
    const l = createRateLimiter({ store, storeTimeoutMs: 0 }, log);
    const ac = new AbortController();
    const p = l.acquire(args({ requestsPerSecond: 1, timeoutMs: 1000, identifier: 'global' }, { signal: ac.signal }));
    await tick();
    expect(failures).toHaveLength(1);
    ac.abort();
    await expect(p).resolves.toEqual({ ok: false, headers: {} });
    await l.close();
    failures[0](new Error('ECONNRESET'));
    await tick();
    expect(log.warn).not.toHaveBeenCalled();
    expect(l.fallback).toBeUndefined(); // (its sweep timer would outlive the router)
  });

  test('close() closes the stores the limiter created, not one passed in', async () => {
    const given = new MemoryRateLimitStore({ sweepIntervalMs: 0 });
    const spy = jest.spyOn(given, 'close');
    const l = createRateLimiter({ store: given }, undefined);
    await l.acquire(args({ requestsPerSecond: 1 }));
    await l.close();
    expect(spy).not.toHaveBeenCalled();
    expect(given.size).toBe(1);
    await given.close();

    const own = createRateLimiter(undefined, undefined);
    await own.acquire(args({ requestsPerSecond: 1 }));
    const ownStore = own.store;
    expect(ownStore.size).toBe(1);
    await own.close();
    expect(ownStore.size).toBe(0);
  });
});
