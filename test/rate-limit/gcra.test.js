'use strict';
const { reserveGcra, maxWaitFor, intervalFor, MAX_WAIT_MS } = require('../../dist/cjs/rate-limit/gcra');
const { createRateLimiter } = require('../../dist/cjs/rate-limit/limiter');

/** A bucket driven by a fake clock: reserve(now) applies reserveGcra and keeps the TAT. */
function bucket(rps, timeoutMs) {
  let tat = 0;
  const T = intervalFor(rps);
  const maxWait = maxWaitFor(timeoutMs);
  return {
    reserve(now) {
      const r = reserveGcra(tat, now, T, maxWait);
      tat = r.tat;
      return r.reservation;
    },
    get tat() {
      return tat;
    },
  };
}

describe('reserveGcra (fake clock)', () => {
  test('first request of an idle bucket runs at once and sets TAT = now + T', () => {
    const r = reserveGcra(0, 10_000, 100, 0);
    expect(r.reservation).toEqual({ admitted: true, waitMs: 0 });
    expect(r.tat).toBe(10_100);
  });

  test('admissions are spaced by T (10 req/s → 100 ms)', () => {
    const b = bucket(10, 1000);
    const waits = [];
    for (let i = 0; i < 5; i++) waits.push(b.reserve(0).waitMs);
    expect(waits).toEqual([0, 100, 200, 300, 400]);
  });

  test('requests arriving at the rate never wait', () => {
    const b = bucket(10, 0);
    for (let t = 0; t < 2000; t += 100) expect(b.reserve(t)).toEqual({ admitted: true, waitMs: 0 });
  });

  test('fractional rates: 0.5 req/s spaces admissions by 2 s', () => {
    const b = bucket(0.5, 5000);
    expect(b.reserve(0)).toEqual({ admitted: true, waitMs: 0 });
    expect(b.reserve(0)).toEqual({ admitted: true, waitMs: 2000 });
    expect(b.reserve(500)).toEqual({ admitted: true, waitMs: 3500 });
    expect(b.reserve(500)).toEqual({ admitted: false, retryAfterMs: 500 });
    expect(b.reserve(6000)).toEqual({ admitted: true, waitMs: 0 });
  });

  test('rejects at once when the wait would exceed maxWait, without consuming a slot', () => {
    const b = bucket(1, 1500);
    expect(b.reserve(0)).toEqual({ admitted: true, waitMs: 0 });
    expect(b.reserve(0)).toEqual({ admitted: true, waitMs: 1000 });
    const tat = b.tat;
    expect(b.reserve(0)).toEqual({ admitted: false, retryAfterMs: 500 });
    expect(b.reserve(0)).toEqual({ admitted: false, retryAfterMs: 500 });
    expect(b.tat).toBe(tat); // rejected requests left the bucket as it was
    // 500 ms later the wait is exactly 1500: admitted
    expect(b.reserve(500)).toEqual({ admitted: true, waitMs: 1500 });
  });

  test('the library survey case: 1 req/s, 1500 ms, 5 simultaneous → 2 admitted (0, 1000 ms), 3 rejected', () => {
    const b = bucket(1, 1500);
    const out = [0, 0, 0, 0, 0].map((t) => b.reserve(t));
    expect(out.filter((r) => r.admitted).map((r) => r.waitMs)).toEqual([0, 1000]);
    expect(out.filter((r) => !r.admitted)).toHaveLength(3);
  });

  test('a negative (or missing, or NaN) timeout counts as 0', () => {
    expect(maxWaitFor(-5)).toBe(0);
    expect(maxWaitFor(undefined)).toBe(0);
    expect(maxWaitFor(NaN)).toBe(0);
    expect(maxWaitFor(250)).toBe(250);
    expect(maxWaitFor(Infinity)).toBe(MAX_WAIT_MS);
    const b = bucket(1, -1000);
    expect(b.reserve(0).admitted).toBe(true);
    expect(b.reserve(0)).toEqual({ admitted: false, retryAfterMs: 1000 });
    // reserveGcra itself also treats a negative maxWait as 0
    expect(reserveGcra(100, 0, 100, -50).reservation).toEqual({ admitted: false, retryAfterMs: 100 });
  });

  test('FIFO: each admitted request runs after every earlier one, by T', () => {
    const b = bucket(4, 10_000);
    const runAt = [];
    let now = 0;
    for (let i = 0; i < 10; i++) {
      now += 30; // arrivals faster than the rate
      const r = b.reserve(now);
      expect(r.admitted).toBe(true);
      runAt.push(now + r.waitMs);
    }
    for (let i = 1; i < runAt.length; i++) expect(runAt[i] - runAt[i - 1]).toBeCloseTo(250, 6);
  });

  test('an idle bucket forgets its history (no burst credit, no debt)', () => {
    const b = bucket(2, 0);
    expect(b.reserve(0).admitted).toBe(true);
    expect(b.reserve(100).admitted).toBe(false);
    // a long pause earns no burst: two requests at once → second rejected
    expect(b.reserve(60_000).admitted).toBe(true);
    expect(b.reserve(60_000).admitted).toBe(false);
  });

  test('a rule changed at runtime (the rule\'s own max wait given): a raised limit takes effect within one new interval, a lowered one grants no fresh slot', () => {
    // 1 per minute, one request at t=0: TAT = 60 000
    const first = reserveGcra(0, 0, 60_000, 0, 0);
    expect(first.reservation.admitted).toBe(true);
    // raised to 100/s at t=1000: the old TAT is past anything this rule could leave (now + 0 + 10),
    // so it is lowered to that bound (and returned, to be stored even though this one is rejected)
    const raised = reserveGcra(first.tat, 1000, 10, 0, 0);
    expect(raised.reservation).toEqual({ admitted: false, retryAfterMs: 10 });
    expect(raised.tat).toBe(1010);
    expect(reserveGcra(raised.tat, 1010, 10, 0, 0).reservation).toEqual({ admitted: true, waitMs: 0 });
    // with a wait of 50 ms, the bound is now + 50 + 10
    expect(reserveGcra(first.tat, 1000, 10, 50, 50)).toEqual({ tat: 1060, reservation: { admitted: false, retryAfterMs: 10 } });
    // the limiter's waiting cap asks with a max wait of 0 but the rule's own 50: a TAT the rule
    // can leave (within now + 50 + 10) is no stale one and stands
    expect(reserveGcra(1055, 1000, 10, 0, 50)).toEqual({ tat: 1055, reservation: { admitted: false, retryAfterMs: 55 } });
    // a caller without the rule's max wait (a store of an older contract) keeps the old TAT
    expect(reserveGcra(first.tat, 1000, 10, 0).reservation).toEqual({ admitted: false, retryAfterMs: 59_000 });
    // lowered from 10/s to 1 per minute right after a request: its TAT stands, no fresh slot
    const fast = reserveGcra(0, 0, 100, 0, 0);
    const lowered = reserveGcra(fast.tat, 50, 60_000, 0, 0);
    expect(lowered.reservation).toEqual({ admitted: false, retryAfterMs: 50 });
    expect(lowered.tat).toBe(100);
    const next = reserveGcra(lowered.tat, 100, 60_000, 0, 0);
    expect(next.reservation.admitted).toBe(true);
    expect(reserveGcra(next.tat, 30_000, 60_000, 0, 0).reservation).toEqual({ admitted: false, retryAfterMs: 30_100 });
  });

  test('0 requests per second = no limit: the rule is inactive', () => {
    const limiter = createRateLimiter(undefined, undefined);
    expect(limiter.isActive({ requestsPerSecond: 0 })).toBe(false);
    expect(limiter.isActive({ requestsPerSecond: -1 })).toBe(false);
    expect(limiter.isActive(undefined)).toBe(false);
    expect(limiter.isActive({ requestsPerSecond: 0.5 })).toBe(true);
    return limiter.close();
  });
});
