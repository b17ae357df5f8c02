'use strict';
const { MemoryRateLimitStore } = require('../../dist/cjs/rate-limit/memory-store');

function clock(start = 0) {
  const c = { t: start, now: () => c.t };
  return c;
}

describe('MemoryRateLimitStore', () => {
  test('reserve and reserveSync do the GCRA reservation per key', async () => {
    const c = clock(1000);
    const store = new MemoryRateLimitStore({ now: c.now, sweepIntervalMs: 0 });
    expect(await store.reserve('a', 1000, 1500)).toEqual({ admitted: true, waitMs: 0 });
    expect(store.reserveSync('a', 1000, 1500)).toEqual({ admitted: true, waitMs: 1000 });
    expect(store.reserveSync('a', 1000, 1500)).toEqual({ admitted: false, retryAfterMs: 500 });
    expect(store.reserveSync('b', 1000, 1500)).toEqual({ admitted: true, waitMs: 0 });
    await store.close();
  });

  test('a rejected request creates no bucket', () => {
    const store = new MemoryRateLimitStore({ now: () => 0, sweepIntervalMs: 0 });
    store.reserveSync('a', 1000, 0);
    expect(store.reserveSync('a', 1000, 0).admitted).toBe(false);
    expect(store.size).toBe(1);
    return store.close();
  });

  test('a limit raised at runtime takes effect within the new interval, not once the old one has passed', () => {
    const c = clock(0);
    const store = new MemoryRateLimitStore({ now: c.now, sweepIntervalMs: 0 });
    expect(store.reserveSync('a', 60_000, 0, 0).admitted).toBe(true); // 1 per minute
    c.t = 1000;
    expect(store.reserveSync('a', 60_000, 0, 0)).toEqual({ admitted: false, retryAfterMs: 59_000 });
    // raised to 100/s: at most one new interval (10 ms) to wait
    expect(store.reserveSync('a', 10, 0, 0)).toEqual({ admitted: false, retryAfterMs: 10 });
    c.t = 1010;
    expect(store.reserveSync('a', 10, 0, 0)).toEqual({ admitted: true, waitMs: 0 });
    c.t = 1015;
    expect(store.reserveSync('a', 10, 0, 0).admitted).toBe(false);
    c.t = 1020;
    expect(store.reserveSync('a', 10, 0, 0).admitted).toBe(true);
    return store.close();
  });

  test('sweep drops buckets whose TAT has passed, keeps live ones', () => {
    const c = clock(0);
    const store = new MemoryRateLimitStore({ now: c.now, sweepIntervalMs: 0 });
    store.reserveSync('short', 100, 0); // tat 100
    store.reserveSync('long', 5000, 0); // tat 5000
    c.t = 99;
    expect(store.sweep()).toBe(0);
    c.t = 100; // tat <= now: carries no state
    expect(store.sweep()).toBe(1);
    expect(store.size).toBe(1);
    // the dropped bucket behaves like an idle one
    expect(store.reserveSync('short', 100, 0)).toEqual({ admitted: true, waitMs: 0 });
    c.t = 6000;
    expect(store.sweep()).toBe(2);
    expect(store.size).toBe(0);
    return store.close();
  });

  test('the sweep timer runs and is unref()ed', async () => {
    const store = new MemoryRateLimitStore({ sweepIntervalMs: 20 });
    expect(store.timer.hasRef()).toBe(false);
    store.reserveSync('k', 10, 0);
    expect(store.size).toBe(1);
    await new Promise((r) => setTimeout(r, 120));
    expect(store.size).toBe(0);
    await store.close();
    expect(store.timer).toBeUndefined();
  });

  test('key cap: when full, expired buckets are swept first', () => {
    const c = clock(0);
    const store = new MemoryRateLimitStore({ now: c.now, maxKeys: 3, sweepIntervalMs: 0 });
    store.reserveSync('a', 100, 0);
    store.reserveSync('b', 100, 0);
    store.reserveSync('c', 10_000, 0);
    c.t = 500; // a and b idle, c live
    store.reserveSync('d', 10_000, 0);
    expect(store.size).toBe(2);
    expect([...store.buckets.keys()]).toEqual(['c', 'd']);
    return store.close();
  });

  test('key cap: when full of live buckets, the least recently used is evicted', () => {
    const c = clock(0);
    const store = new MemoryRateLimitStore({ now: c.now, maxKeys: 3, sweepIntervalMs: 0 });
    store.reserveSync('a', 10_000, 60_000);
    store.reserveSync('b', 10_000, 60_000);
    store.reserveSync('c', 10_000, 60_000);
    c.t = 10;
    store.reserveSync('a', 10_000, 60_000); // a used again: b is now the least recently used
    store.reserveSync('d', 10_000, 60_000);
    expect(store.size).toBe(3);
    expect([...store.buckets.keys()]).toEqual(['c', 'a', 'd']);
    for (let i = 0; i < 100; i++) store.reserveSync(`k${i}`, 10_000, 0);
    expect(store.size).toBe(3);
    return store.close();
  });

  test('key cap: eviction after eviction follows use, with buckets used and swept between them', () => {
    const c = clock(0);
    const store = new MemoryRateLimitStore({ now: c.now, maxKeys: 3, sweepIntervalMs: 0 });
    for (const k of ['a', 'b', 'c']) store.reserveSync(k, 10_000, 60_000);
    store.reserveSync('d', 10_000, 60_000); // evicts a
    store.reserveSync('b', 10_000, 60_000); // b used again
    store.reserveSync('e', 10_000, 60_000); // evicts c, not b
    expect([...store.buckets.keys()]).toEqual(['d', 'b', 'e']);
    store.reserveSync('d', 10_000, 60_000);
    store.reserveSync('f', 10_000, 60_000); // evicts b
    store.reserveSync('g', 10_000, 60_000); // evicts e
    expect([...store.buckets.keys()]).toEqual(['d', 'f', 'g']);
    store.buckets.delete('f'); // (as a sweep would)
    store.reserveSync('h', 10_000, 60_000); // room: nothing evicted
    store.reserveSync('i', 10_000, 60_000); // evicts d
    expect([...store.buckets.keys()]).toEqual(['g', 'h', 'i']);
    for (let i = 0; i < 10; i++) store.reserveSync(`k${i}`, 10_000, 60_000);
    expect([...store.buckets.keys()]).toEqual(['k7', 'k8', 'k9']);
    return store.close();
  });

  test('rejects invalid maxKeys', () => {
    for (const bad of [0, 1.5, null, '10']) expect(() => new MemoryRateLimitStore({ maxKeys: bad })).toThrow(/maxKeys/);
  });

  test('rejects a sweepIntervalMs a timer cannot hold (Node would sweep every 1 ms) or that is not a number', () => {
    for (const bad of [2 ** 31, 3e9, Infinity, NaN, -1, '60000', null]) {
      expect(() => new MemoryRateLimitStore({ sweepIntervalMs: bad })).toThrow(/sweepIntervalMs/);
    }
    return Promise.all([0, 1, 2 ** 31 - 1].map((ok) => new MemoryRateLimitStore({ sweepIntervalMs: ok }).close()));
  });

  test('refuses a now that is not a function, naming it (each reservation would throw, and the limiter fall back to a store of its own)', () => {
    const { ConfigError } = require('../..');
    for (const bad of [5, 'performance.now', null, { now: () => 0 }]) {
      let error;
      try {
        new MemoryRateLimitStore({ now: bad });
      } catch (e) {
        error = e;
      }
      expect(error).toBeInstanceOf(ConfigError);
      expect(error.field).toBe('now');
    }
    const s = new MemoryRateLimitStore({ now: () => 5, sweepIntervalMs: 0 });
    expect(s.reserveSync('k', 1000, 0)).toEqual({ admitted: true, waitMs: 0 });
  });

  test('refuses a key that is not an option, naming it and the nearest option', () => {
    expect(() => new MemoryRateLimitStore({ maxkeys: 10 })).toThrow(/maxkeys: is not an option \(did you mean 'maxKeys'\?\)/);
    expect(() => new MemoryRateLimitStore({ ttl: 10 })).toThrow(/ttl: is not an option; the options are maxKeys, sweepIntervalMs, now/);
  });

  test('refuses options that are not an object, naming them (new MemoryRateLimitStore(1000) kept every default without a word)', () => {
    for (const bad of [1000, null, 'maxKeys', [1000]]) {
      expect(() => new MemoryRateLimitStore(bad)).toThrow(expect.objectContaining({ name: 'ConfigError', field: 'options', message: expect.stringMatching(/takes an object \{ maxKeys\?, sweepIntervalMs\?, now\? \}, got/) }));
    }
    new MemoryRateLimitStore(undefined).close();
    new MemoryRateLimitStore({}).close();
  });

  test('close() clears buckets and is idempotent', async () => {
    const store = new MemoryRateLimitStore();
    store.reserveSync('a', 1000, 0);
    await store.close();
    await store.close();
    expect(store.size).toBe(0);
  });
});

test("the stores' and file storages' constructors refuse bad options with a ConfigError naming the option (code catching ConfigError sees them)", () => {
  const { ConfigError, RedisRateLimitStore, S3FileStorage, LocalFileStorage } = require('../..');
  const refused = (make, field) => {
    let err;
    try {
      make();
    } catch (e) {
      err = e;
    }
    expect(err).toBeInstanceOf(ConfigError);
    expect(err.field).toBe(field);
  };
  refused(() => new RedisRateLimitStore({}), 'url');
  refused(() => new RedisRateLimitStore({ url: 'redis://127.0.0.1:1', prefix: 5 }), 'prefix');
  refused(() => new RedisRateLimitStore({ url: 'redis://127.0.0.1:1', commandTimeoutMs: -1 }), 'commandTimeoutMs');
  refused(() => new S3FileStorage({}), 'bucket');
  refused(() => new S3FileStorage({ bucket: 'b', partSize: 10 }), 'partSize');
  refused(() => new S3FileStorage({ bucket: 'b', queueSize: 0 }), 'queueSize');
  refused(() => new LocalFileStorage({}), 'root');
});
