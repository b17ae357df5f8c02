/**
 * Rate-limit store contract. A store keeps one theoretical arrival time (TAT) per bucket key and
 * does the GCRA reservation atomically. Implement it to put buckets in your own database.
 */

/** The outcome of one reservation. */
export type Reservation =
  /** Admitted: wait `waitMs` (0 = run now) before running. */
  | { admitted: true; waitMs: number }
  /** Rejected at once: the wait would exceed the rule's maximum; `retryAfterMs` until a slot frees. */
  | { admitted: false; retryAfterMs: number };

export interface RateLimitStore {
  /**
   * GCRA reservation for bucket `key`: `wait = max(tat, now) - now`; if `wait > maxWaitMs` reject,
   * else `tat = max(tat, now) + intervalMs` and admit after `wait`. Must be atomic per key.
   *
   * `ruleMaxWaitMs` (passed by the limiter; absent from older callers) is the rule's own max wait,
   * at least `maxWaitMs`. A stored `tat` past `now + ruleMaxWaitMs + intervalMs` was left by an
   * earlier rule with a longer interval or wait (the rule was changed at runtime): lower it to that
   * bound first, and store the lowered value even when the request is rejected, as `reserveGcra`
   * does. A store that ignores the argument still works: a raised limit then takes effect only
   * once the old TAT has passed.
   */
  reserve(key: string, intervalMs: number, maxWaitMs: number, ruleMaxWaitMs?: number): Promise<Reservation>;
  /**
   * Optional fast path for stores that can answer without I/O (the in-memory store): the same
   * reservation as `reserve`, returned synchronously. The limiter prefers it when present.
   */
  reserveSync?(key: string, intervalMs: number, maxWaitMs: number, ruleMaxWaitMs?: number): Reservation;
  /** Release connections and timers. */
  close?(): Promise<void>;
}
