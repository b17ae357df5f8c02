/**
 * Response headers of the rate limiter: the IETF draft `RateLimit-Policy` / `RateLimit` pair
 * (draft-ietf-httpapi-ratelimit-headers, formatted like express-rate-limit's `draft-8` headers:
 * `RateLimit-Policy: "default"; q=10; w=1` and `RateLimit: "default"; r=0; t=1`) and `Retry-After`
 * (whole seconds, at least 1) on a rejection.
 *
 * Mapping of the GCRA rule onto the draft's quota model:
 * - `q` / `w`: the rule's rate as a quota per window, `q / w = requestsPerSecond` with the smallest
 *   whole window that makes `q` whole (10/s → q=10;w=1, 0.5/s → q=1;w=2, 2.5/s → q=5;w=2).
 * - `r`: how many more requests sent right now would be accepted (run at once or after a wait of at
 *   most the rule's timeout); 0 on a rejection.
 * - `t`: seconds until the bucket is idle again (no request reserved ahead); on a rejection, the
 *   seconds until a request would be accepted (the same value as `Retry-After`).
 */
import type { Reservation } from './types';

export const POLICY_NAME = 'default';

const policyCache = new Map<number, string>();

/** The `RateLimit-Policy` value of a rate (cached per rate). */
export function policyHeader(requestsPerSecond: number): string {
  let value = policyCache.get(requestsPerSecond);
  if (value === undefined) {
    const { quota, windowSeconds } = quotaOf(requestsPerSecond);
    value = `"${POLICY_NAME}"; q=${quota}; w=${windowSeconds}`;
    if (policyCache.size >= 1000) policyCache.clear();
    policyCache.set(requestsPerSecond, value);
  }
  return value;
}

/** The rate as a whole quota per whole window of seconds. */
export function quotaOf(requestsPerSecond: number): { quota: number; windowSeconds: number } {
  for (let w = 1; w <= 3600; w++) {
    const q = requestsPerSecond * w;
    const rounded = Math.round(q);
    if (rounded >= 1 && Math.abs(q - rounded) < 1e-9 * Math.max(1, q)) return { quota: rounded, windowSeconds: w };
  }
  // No small whole window fits (e.g. 1/7 per second): the nearest approximation.
  if (requestsPerSecond >= 1) return { quota: Math.floor(requestsPerSecond), windowSeconds: 1 };
  return { quota: 1, windowSeconds: Math.max(1, Math.round(1 / requestsPerSecond)) };
}

/** Whole seconds, rounded up, at least `min`. */
export function toSeconds(ms: number, min = 0): number {
  const s = Math.ceil(ms / 1000 - 1e-9);
  return s > min ? s : min;
}

/**
 * Header values for one reservation of a rule with interval `intervalMs` and max wait `maxWaitMs`.
 * Returns a fresh object (the caller may add to it).
 */
export function rateLimitHeaders(
  requestsPerSecond: number,
  intervalMs: number,
  maxWaitMs: number,
  reservation: Reservation,
): Record<string, string> {
  const policy = policyHeader(requestsPerSecond);
  if (reservation.admitted) {
    // After this reservation the next request sent now would wait `ahead` ms.
    const ahead = reservation.waitMs + intervalMs;
    const remaining = ahead <= maxWaitMs + 1e-6 ? Math.floor((maxWaitMs - ahead) / intervalMs + 1e-9) + 1 : 0;
    return {
      'RateLimit-Policy': policy,
      RateLimit: `"${POLICY_NAME}"; r=${remaining}; t=${toSeconds(ahead)}`,
    };
  }
  const retryAfter = toSeconds(reservation.retryAfterMs, 1);
  return {
    'RateLimit-Policy': policy,
    RateLimit: `"${POLICY_NAME}"; r=0; t=${retryAfter}`,
    'Retry-After': String(retryAfter),
  };
}
