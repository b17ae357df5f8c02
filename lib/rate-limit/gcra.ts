/**
 * GCRA (generic cell rate algorithm) with a bounded wait: the pure arithmetic, no clock, no state.
 * Every store (memory, Redis Lua, your own) does exactly this, atomically per bucket.
 *
 * - Emission interval T = 1000 / requestsPerSecond ms; tolerance = maxWait.
 * - On arrival: `wait = max(tat, now) - now`. If `wait > maxWait` reject at once (the bucket is
 *   untouched: a rejected request consumes no slot). Otherwise `tat = max(tat, now) + T` and the
 *   request runs after `wait` ms. Admissions are spaced by T, first come first served, no burst.
 * - A rule changed at runtime: a TAT past `now + ruleMaxWait + T` (ruleMaxWait = the rule's own
 *   max wait, which the limiter passes) cannot come from the rule in force, which never lets a
 *   TAT get there: an earlier rule with a longer interval or wait left it. It is lowered to that
 *   bound first, so a raised limit takes effect within one new interval instead of once the old
 *   one has passed. A lowered limit keeps the TAT as it is: it grants no fresh slot.
 */
import { MAX_TIMER_MS } from '../timers';
import type { Reservation } from './types';

export interface GcraResult {
  /**
   * The bucket's new theoretical arrival time. On rejection it is the TAT given, unless that was
   * stale (left by an earlier rule) and lowered: store it then too.
   */
  tat: number;
  reservation: Reservation;
}

/**
 * One GCRA reservation. `tat` is the bucket's theoretical arrival time (0 or any value <= now for a
 * new or idle bucket), `now` the clock in ms, `intervalMs` = T, `maxWaitMs` the longest wait allowed
 * (negative or NaN counts as 0). `ruleMaxWaitMs`, when given, is the rule's own max wait (the
 * limiter passes a shorter `maxWaitMs` when its waiting cap is reached): a TAT past
 * `now + ruleMaxWaitMs + intervalMs` was left by an earlier rule and is lowered to that bound.
 */
export function reserveGcra(tat: number, now: number, intervalMs: number, maxWaitMs: number, ruleMaxWaitMs?: number): GcraResult {
  const maxWait = maxWaitMs > 0 ? maxWaitMs : 0;
  if (ruleMaxWaitMs !== undefined) {
    // (left by a rule with a longer interval or wait: this rule never lets a TAT get past the bound)
    const bound = now + (ruleMaxWaitMs > maxWait ? ruleMaxWaitMs : maxWait) + intervalMs;
    if (tat > bound) tat = bound;
  }
  const start = tat > now ? tat : now;
  const wait = start - now;
  if (wait > maxWait) {
    return { tat, reservation: { admitted: false, retryAfterMs: wait - maxWait } };
  }
  return { tat: start + intervalMs, reservation: { admitted: true, waitMs: wait } };
}

/** T = 1000 / requestsPerSecond, in ms. */
export function intervalFor(requestsPerSecond: number): number {
  return 1000 / requestsPerSecond;
}

/** Longest wait a timer can hold (setTimeout overflows past 2^31 - 1 ms, about 24.8 days). */
export const MAX_WAIT_MS = MAX_TIMER_MS;

/** maxWait = max(0, timeoutMs ?? 0), capped at MAX_WAIT_MS; NaN and non-numbers count as 0. */
export function maxWaitFor(timeoutMs: number | undefined): number {
  if (typeof timeoutMs !== 'number' || !(timeoutMs > 0)) return 0;
  return timeoutMs < MAX_WAIT_MS ? timeoutMs : MAX_WAIT_MS;
}
