/** Rate limiting: GCRA with a bounded wait, per (app, API, identifier) bucket. */
export type { RateLimitStore, Reservation } from './types';
export { reserveGcra, intervalFor, maxWaitFor, MAX_WAIT_MS } from './gcra';
export type { GcraResult } from './gcra';
export { MemoryRateLimitStore } from './memory-store';
export type { MemoryRateLimitStoreOptions } from './memory-store';
export { RedisRateLimitStore, GCRA_LUA } from './redis-store';
export type { RedisRateLimitStoreOptions } from './redis-store';
export {
  resolveIdentifier,
  templateUsesAttributes,
  parseTemplate,
  ipKey,
  DEFAULT_IDENTIFIER,
  DEFAULT_IPV6_SUBNET,
} from './identifier';
export { rateLimitHeaders, policyHeader, quotaOf, POLICY_NAME } from './headers';
export { createRateLimiter, bucketKey } from './limiter';
export type { RateLimiter, RateLimitDecision, RateLimiterOptions, AcquireArgs } from './limiter';
