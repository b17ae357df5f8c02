/**
 * The default rate-limit store: buckets in a Map of this process. Bounded: idle buckets (whose
 * theoretical arrival time has passed, so they carry no state) are swept on a timer, and at most
 * `maxKeys` buckets are kept (when full: sweep, then evict the least recently used).
 */
import { performance } from 'node:perf_hooks';
import { MAX_TIMER_MS } from '../timers';
import { reserveGcra } from './gcra';
import type { RateLimitStore, Reservation } from './types';
import { onlyKnownKeys, shown, type Same } from '../validations';
import { ConfigError } from '../errors';

export interface MemoryRateLimitStoreOptions {
  /** Most buckets kept. Default 100000. */
  maxKeys?: number;
  /** How often idle buckets are swept, in ms (at most 2147483647); 0 disables the timer. Default 60000. */
  sweepIntervalMs?: number;
  /**
   * The clock, in ms. Default `performance.now()`: monotonic (a wall-clock step cannot free or
   * block slots) and finer than a millisecond (rates above 1000/s per bucket stay exact).
   */
  now?: () => number;
}

/** The keys of MemoryRateLimitStoreOptions (the build fails when one is added to the type and not here). */
const OPTION_KEYS = ['maxKeys', 'sweepIntervalMs', 'now'] as const;
const keysMatch: Same<keyof MemoryRateLimitStoreOptions, (typeof OPTION_KEYS)[number]> = true;
void keysMatch;

/** A sweep forced by a full store runs at most this often (ms of the store's clock). */
const FULL_SWEEP_EVERY_MS = 1000;

export class MemoryRateLimitStore implements RateLimitStore {
  /** key → theoretical arrival time (ms). Insertion order = least recently used first. */
  private readonly buckets = new Map<string, number>();
  private readonly maxKeys: number;
  /** Where eviction has got to in the buckets' order (least recently used first). */
  private evicting: IterableIterator<string> | undefined;
  private readonly now: () => number;
  private timer: NodeJS.Timeout | undefined;
  private nextFullSweepAt = -Infinity;
  private closed = false;

  constructor(options: MemoryRateLimitStoreOptions = {}) {
    // (a number, as `new MemoryRateLimitStore(1000)` meaning maxKeys, had no keys: every default silently kept)
    if (typeof options !== 'object' || options === null || Array.isArray(options)) {
      throw new ConfigError('options', `new MemoryRateLimitStore() takes an object { maxKeys?, sweepIntervalMs?, now? }, got ${shown(options)}`);
    }
    onlyKnownKeys(options as unknown as Record<string, unknown>, OPTION_KEYS, '');
    // (undefined takes the default; null, like any other value, is checked)
    const maxKeys = options.maxKeys === undefined ? 100000 : options.maxKeys;
    if (!(Number.isInteger(maxKeys) && maxKeys > 0)) {
      throw new ConfigError('maxKeys', `must be a positive integer, got ${shown(maxKeys)}`);
    }
    this.maxKeys = maxKeys;
    // (a now that is not a function would throw at every reservation: the limiter would fall back to a store of its own)
    if (options.now !== undefined && typeof options.now !== 'function') {
      throw new ConfigError('now', `must be a function returning ms, got ${shown(options.now)}`);
    }
    this.now = options.now ?? (() => performance.now());
    const every = options.sweepIntervalMs === undefined ? 60000 : options.sweepIntervalMs;
    // (past MAX_TIMER_MS a Node.js timer fires after 1 ms: a sweep of every bucket each millisecond)
    if (typeof every !== 'number' || !(every >= 0 && every <= MAX_TIMER_MS)) {
      throw new ConfigError('sweepIntervalMs', `must be a number of ms from 0 to ${MAX_TIMER_MS}, got ${shown(every)}`);
    }
    if (every > 0) {
      this.timer = setInterval(() => this.sweep(), every);
      this.timer.unref();
    }
  }

  /** Number of buckets currently kept. */
  get size(): number {
    return this.buckets.size;
  }

  /** The GCRA reservation, answered synchronously (the limiter uses this to skip a promise). */
  reserveSync(key: string, intervalMs: number, maxWaitMs: number, ruleMaxWaitMs?: number): Reservation {
    const now = this.now();
    const buckets = this.buckets;
    const tat = buckets.get(key);
    const result = reserveGcra(tat === undefined ? 0 : tat, now, intervalMs, maxWaitMs, ruleMaxWaitMs);
    if (result.reservation.admitted) {
      if (tat === undefined) {
        if (buckets.size >= this.maxKeys) this.makeRoom(now);
      } else {
        buckets.delete(key); // move to the most recently used end
      }
      buckets.set(key, result.tat);
    } else if (tat !== undefined && result.tat !== tat) {
      buckets.set(key, result.tat); // a stale TAT left by an earlier rule, lowered to this rule's bound
    }
    return result.reservation;
  }

  reserve(key: string, intervalMs: number, maxWaitMs: number, ruleMaxWaitMs?: number): Promise<Reservation> {
    return Promise.resolve(this.reserveSync(key, intervalMs, maxWaitMs, ruleMaxWaitMs));
  }

  /** Drops every bucket whose theoretical arrival time is not after now. Returns how many. */
  sweep(now: number = this.now()): number {
    let removed = 0;
    for (const [key, tat] of this.buckets) {
      if (tat <= now) {
        this.buckets.delete(key);
        removed++;
      }
    }
    return removed;
  }

  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    if (this.timer) clearInterval(this.timer);
    this.timer = undefined;
    this.buckets.clear();
    this.evicting = undefined;
  }

  private makeRoom(now: number): void {
    // A full sweep is O(keys): when the store stays full of live buckets, do it at most once a second.
    if (now >= this.nextFullSweepAt) {
      this.nextFullSweepAt = now + FULL_SWEEP_EVERY_MS;
      this.sweep(now);
    }
    // Still full of live buckets: evict the least recently used. One iterator serves eviction after
    // eviction: a new one would step again over the deleted entries V8 keeps at the front of the
    // map until it rehashes (tens of us a new key at 100k live keys).
    while (this.buckets.size >= this.maxKeys) {
      this.evicting ??= this.buckets.keys();
      const next = this.evicting.next();
      if (next.done) {
        this.evicting = undefined;
        if (this.buckets.size === 0) break;
        continue;
      }
      this.buckets.delete(next.value);
    }
  }
}
