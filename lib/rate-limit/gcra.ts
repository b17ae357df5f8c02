/**
 * GCRA (generic cell rate algorithm) with a bounded wait: the pure arithmetic, no clock, no state.
 * Every store (memory, Redis Lua, your own) does exactly this, atomically per bucket.
 *
 * - Emission interval T = 1000 / requestsPerSecond ms; tolerance = maxWait.
 * - On arrival: `wait = max(tat, now) - now`. If `wait > maxWait` reject at once (the bucket is
 *   untouched: a rejected request consumes no slot). Otherwise `tat = max(tat, now) + T` and the
 *   request runs after `wait` ms. Admissions are spaced by T, first come first served, no burst.
 */
import { MAX_TIMER_MS } from '../timers';
import type { Reservation } from './types';

export interface GcraResult {
  /** The bucket's new theoretical arrival time (unchanged on rejection). */
  tat: number;
  reservation: Reservation;
}

/**
 * One GCRA reservation. `tat` is the bucket's theoretical arrival time (0 or any value <= now for a
 * new or idle bucket), `now` the clock in ms, `intervalMs` = T, `maxWaitMs` the longest wait allowed
 * (negative or NaN counts as 0).
 */
export function reserveGcra(tat: number, now: number, intervalMs: number, maxWaitMs: number): GcraResult {
  const maxWait = maxWaitMs > 0 ? maxWaitMs : 0;
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
