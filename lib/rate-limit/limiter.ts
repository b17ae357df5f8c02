/**
 * The rate limiter the router calls: resolves the bucket of a request, reserves a slot in the
 * store (GCRA), holds the request for its wait, and turns the outcome into a decision and headers.
 *
 * - Bucket key: `${appId}\0${apiPath}\0${identifier}` (SHA-256 of it when longer than 200 chars),
 *   with `preview\0` in front for the preview path.
 * - A global cap `maxWaiting` on requests waiting for a slot across all buckets. A request whose
 *   rule allows a wait claims a waiting place *before* reserving; when none is free it reserves
 *   with a max wait of 0, so it still runs if its slot is free right now, and otherwise is rejected
 *   with RATE_LIMIT_QUEUE_FULL without consuming a slot (RATE_LIMITED if its wait would exceed the
 *   rule's timeout anyway).
 * - A client that disconnects while waiting (its `signal` aborts), for its slot or for the store's
 *   answer, is dropped at once: the decision is `{ ok: false, headers: {} }` and its waiting place
 *   is freed. Its reserved slot stays spent.
 * - Store failures never fail or hang a request: `onStoreError: 'memory'` (default) uses an
 *   in-memory store of this limiter for the outage, `'open'` admits. One warning per outage, one
 *   info line on recovery. During an outage the store is tried again by one request at a time,
 *   at most once per `storeRetryMs`. A store call slower than `storeTimeoutMs` counts as a failure.
 * - Hot path: a request admitted at once by a store with `reserveSync` (the memory store) costs
 *   one resolved promise, no timer.
 */
import { createHash } from 'node:crypto';
import type { Request } from 'express';
import { ConfigError } from '../errors';
import type { Logger, RateLimitOptions, RateLimitRule } from '../types';
import { MAX_WAIT_MS, maxWaitFor } from './gcra';
import { rateLimitHeaders } from './headers';
import { withTimeout } from './with-timeout';
import { DEFAULT_IPV6_SUBNET, resolveIdentifier, templateUsesAttributes } from './identifier';
import { MemoryRateLimitStore } from './memory-store';
import type { RateLimitStore, Reservation } from './types';
import { clock } from '../timers';

export interface RateLimitDecision {
  ok: boolean;
  /** When ok is false: which error ('RATE_LIMITED' | 'RATE_LIMIT_QUEUE_FULL'), undefined if the client went away while waiting. */
  error?: 'RATE_LIMITED' | 'RATE_LIMIT_QUEUE_FULL';
  /** Headers to set on the response (RateLimit-Policy, RateLimit, and Retry-After on rejection). */
  headers: Record<string, string>;
  /** Admitted after waiting for its slot: how long (ms). Absent when admitted at once. */
  waitedMs?: number;
}

export interface AcquireArgs {
  appId: string;
  apiPath: string;
  /** `'preview'` for the preview path: its buckets are apart from the published API's. Default `'published'`. */
  stage?: 'published' | 'preview';
  rule: RateLimitRule;
  req: Request;
  attributes?: Record<string, unknown>;
  signal?: AbortSignal;
}

export interface RateLimiter {
  /** True if the rule is active (requestsPerSecond > 0). Cheap. */
  isActive(rule: RateLimitRule | undefined): boolean;
  /** True if the rule's identifier needs request attributes (`{attr.X}`): then the router calls acquire after the before script. */
  needsAttributes(rule: RateLimitRule): boolean;
  /** Reserve a slot; resolves after the wait (ok true), or at once with a rejection. If `signal` aborts while waiting (client disconnected), resolves { ok:false, headers:{} } without error and frees the waiting count. Never rejects: store failures follow `onStoreError`. */
  acquire(args: AcquireArgs): Promise<RateLimitDecision>;
  close(): Promise<void>;
}

/** `RateLimitOptions` plus knobs for tests and tuning. */
export interface RateLimiterOptions extends RateLimitOptions {
  /** During a store outage, how often (ms) one request tries the store again. Default 1000. */
  storeRetryMs?: number;
  /**
   * A store call (of a store without `reserveSync`) taking longer than this counts as a store
   * failure, so a hung store cannot hang requests. Default 2000; 0 disables.
   */
  storeTimeoutMs?: number;
  /** The router's `allowUnderscoreHeaders`: without it, `{header.NAME}` with a `_` in NAME is absent. Default false. */
  allowUnderscoreHeaders?: boolean;
}

/** Bucket keys longer than this are replaced by their SHA-256. */
const MAX_KEY_LENGTH = 200;

/**
 * The lowest rate applied (one per 1e15 ms, about 31,700 years). A lower positive rate (the schema
 * takes any number > 0, down to 5e-324) gave waits past what a Redis integer reply holds (Redis
 * answered a negative wait, read as an outage), or an interval of Infinity (`Retry-After: Infinity`).
 */
const MIN_RATE = 1e-12;

function admitNoHeaders(): RateLimitDecision {
  return { ok: true, headers: {} };
}

/** A reservation that means "admit without limiting" (onStoreError: 'open'). */
const OPEN = null;
type Outcome = Reservation | typeof OPEN;

export function createRateLimiter(options: RateLimiterOptions | undefined, logger: Logger | undefined): RateLimiter {
  return new Limiter(options ?? {}, logger);
}

/**
 * The bucket key of a request (exported for tests and custom stores' debugging). A preview
 * request's key starts with `preview\0`: trying a draft takes no slot of the published API.
 */
export function bucketKey(appId: string, apiPath: string, identifier: string, stage?: 'published' | 'preview'): string {
  const key = `${stage === 'preview' ? 'preview\u0000' : ''}${appId}\u0000${apiPath}\u0000${identifier}`;
  if (key.length <= MAX_KEY_LENGTH) return key;
  return 'sha256:' + createHash('sha256').update(key).digest('base64url');
}

class Limiter implements RateLimiter {
  private readonly store: RateLimitStore;
  private readonly storeSync: boolean;
  private readonly ownsStore: boolean;
  private readonly onStoreError: 'memory' | 'open';
  private readonly maxWaiting: number;
  private readonly ipv6Subnet: number;
  private readonly storeRetryMs: number;
  private readonly storeTimeoutMs: number;
  private readonly allowUnderscoreHeaders: boolean;
  private readonly logger: Logger | undefined;
  private fallback: MemoryRateLimitStore | undefined;
  /** Requests waiting, or about to learn whether they wait, for a slot. */
  private waiting = 0;
  private storeDown = false;
  private probing = false;
  private nextProbeAt = 0;
  /** close() was called: a store call still pending then belongs to a request a forced close ended. */
  private closed = false;

  constructor(options: RateLimiterOptions, logger: Logger | undefined) {
    const onStoreError = options.onStoreError ?? 'memory';
    if (onStoreError !== 'memory' && onStoreError !== 'open') {
      throw new ConfigError('rateLimit.onStoreError', `expected 'memory' or 'open', got ${JSON.stringify(onStoreError)}`);
    }
    const maxWaiting = options.maxWaiting ?? 1000;
    if (!(Number.isInteger(maxWaiting) && maxWaiting >= 0)) {
      throw new ConfigError('rateLimit.maxWaiting', 'expected a whole number >= 0');
    }
    const ipv6Subnet = options.ipv6Subnet ?? DEFAULT_IPV6_SUBNET;
    if (!(Number.isInteger(ipv6Subnet) && ipv6Subnet >= 1 && ipv6Subnet <= 128)) {
      throw new ConfigError('rateLimit.ipv6Subnet', 'expected a whole number from 1 to 128');
    }
    const store = options.store;
    if (store !== undefined && (store === null || typeof store.reserve !== 'function')) {
      throw new ConfigError('rateLimit.store', 'expected an object with a reserve(key, intervalMs, maxWaitMs) method');
    }
    this.onStoreError = onStoreError;
    this.maxWaiting = maxWaiting;
    this.ipv6Subnet = ipv6Subnet;
    this.storeRetryMs = options.storeRetryMs ?? 1000;
    this.storeTimeoutMs = options.storeTimeoutMs ?? 2000;
    this.allowUnderscoreHeaders = options.allowUnderscoreHeaders === true;
    this.logger = logger;
    this.store = store ?? new MemoryRateLimitStore();
    this.ownsStore = store === undefined;
    this.storeSync = typeof this.store.reserveSync === 'function';
  }

  /** Requests currently waiting for a slot (for tests and metrics). */
  get waitingCount(): number {
    return this.waiting;
  }

  isActive(rule: RateLimitRule | undefined): boolean {
    return rule != null && rule.requestsPerSecond > 0;
  }

  needsAttributes(rule: RateLimitRule): boolean {
    return templateUsesAttributes(rule.identifier);
  }

  acquire(args: AcquireArgs): Promise<RateLimitDecision> {
    let ctx: Ctx | undefined;
    try {
      const { rule, signal } = args;
      if (signal?.aborted) return Promise.resolve({ ok: false, headers: {} });
      let rps = rule.requestsPerSecond;
      if (!(rps > 0)) return Promise.resolve(admitNoHeaders());
      if (rps < MIN_RATE) rps = MIN_RATE;
      const intervalMs = 1000 / rps;
      const maxWaitMs = maxWaitFor(rule.timeoutMs);
      const identifier = resolveIdentifier(rule.identifier, args.req, args.attributes, this.ipv6Subnet, this.allowUnderscoreHeaders);
      const key = bucketKey(args.appId, args.apiPath, identifier, args.stage);

      // Claim a waiting place before reserving; without one, only an immediate slot is taken.
      ctx = { rps, intervalMs, maxWaitMs, reserveWaitMs: maxWaitMs, claimed: false, signal };
      if (maxWaitMs > 0) {
        if (this.waiting < this.maxWaiting) {
          this.waiting++;
          ctx.claimed = true;
        } else {
          ctx.reserveWaitMs = 0;
        }
      }

      if (!this.storeDown && this.storeSync) {
        // Fast path (memory store): no promise but the one returned.
        let outcome: Outcome;
        try {
          outcome = checkReservation(
            (this.store.reserveSync as NonNullable<RateLimitStore['reserveSync']>)(key, intervalMs, ctx.reserveWaitMs, maxWaitMs),
          );
        } catch (err) {
          outcome = this.storeFailed(err, key, intervalMs, ctx.reserveWaitMs, maxWaitMs);
        }
        const decision = this.finish(outcome, ctx);
        return decision instanceof Promise ? decision : Promise.resolve(decision);
      }
      const c = ctx;
      return untilAborted(this.reserveAsync(key, intervalMs, c.reserveWaitMs, maxWaitMs), signal)
        .then((outcome) => {
          if (outcome === undefined || signal?.aborted) {
            this.release(c);
            return { ok: false, headers: {} };
          }
          return this.finish(outcome, c);
        })
        .catch((err: unknown) => this.failedOpen(err, c));
    } catch (err) {
      return Promise.resolve(this.failedOpen(err, ctx));
    }
  }

  /** Something unexpected threw: admit (never fail a request because of the limiter). */
  private failedOpen(err: unknown, ctx: Ctx | undefined): RateLimitDecision {
    if (ctx) this.release(ctx);
    this.log('error', 'scriptable-api: rate limiter failed; request admitted', err);
    return admitNoHeaders();
  }

  async close(): Promise<void> {
    this.closed = true;
    const closing: Promise<void>[] = [];
    if (this.ownsStore && this.store.close) closing.push(this.store.close());
    if (this.fallback) closing.push(this.fallback.close());
    await Promise.allSettled(closing);
  }

  /** The store call, with outage handling. Never rejects unless something unexpected throws. */
  private reserveAsync(key: string, intervalMs: number, maxWaitMs: number, ruleMaxWaitMs: number): Promise<Outcome> {
    if (this.storeDown) {
      // One request at a time tries the store again, at most once per storeRetryMs.
      if (this.probing || clock() < this.nextProbeAt) {
        return Promise.resolve(this.degraded(key, intervalMs, maxWaitMs, ruleMaxWaitMs));
      }
      this.probing = true;
      return this.callStore(key, intervalMs, maxWaitMs, ruleMaxWaitMs).then(
        (reservation) => {
          this.probing = false;
          this.recovered();
          return reservation;
        },
        (err) => {
          this.probing = false;
          return this.storeFailed(err, key, intervalMs, maxWaitMs, ruleMaxWaitMs);
        },
      );
    }
    return this.callStore(key, intervalMs, maxWaitMs, ruleMaxWaitMs).then(
      (reservation) => reservation,
      (err) => this.storeFailed(err, key, intervalMs, maxWaitMs, ruleMaxWaitMs),
    );
  }

  private callStore(key: string, intervalMs: number, maxWaitMs: number, ruleMaxWaitMs: number): Promise<Reservation> {
    try {
      const call = Promise.resolve(this.store.reserve(key, intervalMs, maxWaitMs, ruleMaxWaitMs));
      return (this.storeTimeoutMs > 0 ? withTimeout(call, this.storeTimeoutMs, `rate-limit store did not answer within ${this.storeTimeoutMs} ms`) : call).then(checkReservation);
    } catch (err) {
      return Promise.reject(err);
    }
  }

  private storeFailed(err: unknown, key: string, intervalMs: number, maxWaitMs: number, ruleMaxWaitMs: number): Outcome {
    // (a call that outlived close(): its request was ended by a forced close; no outage to report)
    if (this.closed) return OPEN;
    this.nextProbeAt = clock() + this.storeRetryMs;
    if (!this.storeDown) {
      this.storeDown = true;
      this.log(
        'warn',
        this.onStoreError === 'open'
          ? 'scriptable-api: rate-limit store unavailable; admitting requests without limiting until it recovers'
          : 'scriptable-api: rate-limit store unavailable; limiting in memory (this process only) until it recovers',
        err,
      );
    }
    return this.degraded(key, intervalMs, maxWaitMs, ruleMaxWaitMs);
  }

  private recovered(): void {
    if (!this.storeDown) return;
    this.storeDown = false;
    this.logger?.info('scriptable-api: rate-limit store recovered');
  }

  private degraded(key: string, intervalMs: number, maxWaitMs: number, ruleMaxWaitMs: number): Outcome {
    if (this.onStoreError === 'open') return OPEN;
    if (!this.fallback) this.fallback = new MemoryRateLimitStore();
    return this.fallback.reserveSync(key, intervalMs, maxWaitMs, ruleMaxWaitMs);
  }

  private release(ctx: Ctx): void {
    if (ctx.claimed) {
      ctx.claimed = false;
      this.waiting--;
    }
  }

  /** Turns a reservation into a decision; waits when the slot is ahead. */
  private finish(outcome: Outcome, ctx: Ctx): RateLimitDecision | Promise<RateLimitDecision> {
    if (outcome === OPEN) {
      this.release(ctx);
      return admitNoHeaders();
    }
    if (!outcome.admitted) {
      this.release(ctx);
      let error: 'RATE_LIMITED' | 'RATE_LIMIT_QUEUE_FULL' = 'RATE_LIMITED';
      let reservation: Reservation = outcome;
      if (ctx.reserveWaitMs < ctx.maxWaitMs) {
        // Reserved with a shortened wait because the waiting cap was reached.
        const wait = outcome.retryAfterMs + ctx.reserveWaitMs;
        if (wait <= ctx.maxWaitMs) error = 'RATE_LIMIT_QUEUE_FULL';
        else reservation = { admitted: false, retryAfterMs: wait - ctx.maxWaitMs };
      }
      return { ok: false, error, headers: rateLimitHeaders(ctx.rps, ctx.intervalMs, ctx.maxWaitMs, reservation) };
    }
    const headers = rateLimitHeaders(ctx.rps, ctx.intervalMs, ctx.maxWaitMs, outcome);
    if (!(outcome.waitMs > 0)) {
      this.release(ctx);
      return { ok: true, headers };
    }
    if (!ctx.claimed) {
      // A store that made us wait although we asked for no wait: count it anyway.
      ctx.claimed = true;
      this.waiting++;
    }
    return this.wait(outcome.waitMs, ctx, headers);
  }

  private wait(ms: number, ctx: Ctx, headers: Record<string, string>): Promise<RateLimitDecision> {
    const signal = ctx.signal;
    return new Promise<RateLimitDecision>((resolve) => {
      const onAbort = () => {
        clearTimeout(timer);
        this.release(ctx);
        resolve({ ok: false, headers: {} });
      };
      const timer = setTimeout(() => {
        signal?.removeEventListener('abort', onAbort);
        this.release(ctx);
        resolve({ ok: true, headers, waitedMs: ms });
      }, ms);
      signal?.addEventListener('abort', onAbort, { once: true });
    });
  }

  private log(level: 'warn' | 'error', message: string, err: unknown): void {
    if (!this.logger) return;
    this.logger[level](message, { error: err instanceof Error ? err.message : String(err) });
  }
}

interface Ctx {
  rps: number;
  intervalMs: number;
  maxWaitMs: number;
  /** The max wait passed to the store (0 when the waiting cap was reached). */
  reserveWaitMs: number;
  /** Whether this request holds one of the `maxWaiting` places. */
  claimed: boolean;
  signal: AbortSignal | undefined;
}

/**
 * The store's answer, or undefined as soon as the signal aborts (the client left, or a forced
 * close): a slow store does not hold a request that is already over. A later answer is ignored
 * (a slot it reserved stays spent, as for a client that leaves while waiting for its slot).
 */
function untilAborted<T>(answer: Promise<T>, signal: AbortSignal | undefined): Promise<T | undefined> {
  if (!signal) return answer;
  return new Promise<T | undefined>((resolve, reject) => {
    const onAbort = () => resolve(undefined);
    signal.addEventListener('abort', onAbort, { once: true });
    answer.then(
      (value) => {
        signal.removeEventListener('abort', onAbort);
        resolve(value);
      },
      (err) => {
        signal.removeEventListener('abort', onAbort);
        reject(err);
      },
    );
  });
}

function checkReservation(r: Reservation): Reservation {
  if (
    !r ||
    typeof r !== 'object' ||
    // (a wait past MAX_WAIT_MS, longer than any rule allows, would overflow its timer: it fires after 1 ms)
    // (a retry later than the longest interval any rule has, 1 / MIN_RATE, would print as `1e+305`)
    (r.admitted === true ? !(r.waitMs >= 0 && r.waitMs <= MAX_WAIT_MS) : r.admitted !== false || !(r.retryAfterMs >= 0 && r.retryAfterMs <= 1000 / MIN_RATE))
  ) {
    throw new Error('rate-limit store returned an invalid reservation');
  }
  return r;
}
