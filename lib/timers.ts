/** Longest delay a Node.js timer holds: past 2^31 - 1 ms (about 24.8 days) setTimeout fires after 1 ms. */
export const MAX_TIMER_MS = 2147483647;

/**
 * Ms on a monotonic clock, with sub-ms precision, comparable across the process's threads (epoch
 * ms at the process's start plus the time since): for durations and deadlines, which a step of the
 * wall clock (NTP, a VM resumed, an operator fixing the date) must not move. Not a wall time.
 */
export function clock(): number {
  return performance.timeOrigin + performance.now();
}
