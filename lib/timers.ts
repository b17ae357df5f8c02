/** Longest delay a Node.js timer holds: past 2^31 - 1 ms (about 24.8 days) setTimeout fires after 1 ms. */
export const MAX_TIMER_MS = 2147483647;
