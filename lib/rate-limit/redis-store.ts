/**
 * A rate-limit store in Redis: one key per bucket holding its theoretical arrival time, the GCRA
 * reservation done atomically by one Lua script with Redis `TIME` as the only clock, so any number
 * of routers (in one process or many) sharing the Redis enforce one limit and one order.
 * The script touches only KEYS[1]: it works on Redis Cluster.
 */
import { createHash } from 'node:crypto';
import type { RateLimitStore, Reservation } from './types';
import { withTimeout } from './with-timeout';
import { MAX_TIMER_MS } from '../timers';
import { requireOptional } from '../optional-package';
import { onlyKnownKeys, shown, type Same } from '../validations';
import { ConfigError } from '../errors';

/**
 * KEYS[1] = bucket key; ARGV[1] = interval (µs), ARGV[2] = max wait (µs), ARGV[3] (optional) =
 * the rule's own max wait (µs).
 * The value is the bucket's TAT in µs since the epoch (Redis TIME). Returns {1, wait µs} when
 * admitted, {0, retry-after µs} when rejected. The key expires when the TAT passes (an idle bucket
 * carries no state), so Redis holds only buckets that still matter. With ARGV[3], a TAT past
 * now + ARGV[3] + interval was left by an earlier rule (a longer interval or wait): it is lowered
 * to that bound, and stored so even when the request is rejected (see reserveGcra).
 */
export const GCRA_LUA = `
if redis.replicate_commands then redis.replicate_commands() end
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
local interval = tonumber(ARGV[1])
local maxWait = tonumber(ARGV[2])
local tat = tonumber(redis.call('GET', KEYS[1]) or '0') or 0
if tat < now then tat = now end
local function save(v)
  local ttl = math.ceil((v - now) / 1000)
  if ttl < 1 then ttl = 1 end
  if ttl > 1e15 then ttl = 1e15 end
  redis.call('SET', KEYS[1], string.format('%.0f', v), 'PX', string.format('%.0f', ttl))
end
-- (an integer reply past 2^63 wraps to a negative number: keep replies exact in JavaScript too)
local function reply(us)
  if us > 9007199254740991 then return 9007199254740991 end
  return us
end
local ruleMaxWait = tonumber(ARGV[3])
local stale = false
if ruleMaxWait then
  if ruleMaxWait < maxWait then ruleMaxWait = maxWait end
  local bound = now + ruleMaxWait + interval
  if tat > bound then tat = bound; stale = true end
end
local wait = tat - now
if wait > maxWait then
  if stale then save(tat) end
  return {0, reply(math.ceil(wait - maxWait))}
end
save(tat + interval)
return {1, reply(math.floor(wait))}
`;

const GCRA_SHA = createHash('sha1').update(GCRA_LUA).digest('hex');

/**
 * The part of an ioredis client (`Redis` or `Cluster`) the store uses. Declared here rather than
 * imported, so TypeScript users who never use Redis need no `ioredis` types (ioredis is an optional
 * peer dependency); an ioredis `Redis` or `Cluster` fits it.
 */
export interface RedisClientLike {
  readonly status: string;
  evalsha(sha: string, numKeys: number, ...args: string[]): Promise<unknown>;
  eval(script: string, numKeys: number, ...args: string[]): Promise<unknown>;
  on(event: string, listener: (...args: any[]) => void): unknown;
  once(event: string, listener: (...args: any[]) => void): unknown;
  off(event: string, listener: (...args: any[]) => void): unknown;
  connect(): Promise<unknown>;
  quit(): Promise<unknown>;
  disconnect(): void;
}

type RedisCtor = new (url: string, options: Record<string, unknown>) => RedisClientLike;

/** Options of RedisRateLimitStore: `{ url }` (the store makes its client) or `{ client }` (yours), not both. */
export type RedisRateLimitStoreOptions = RedisRateLimitStoreUrlOptions | RedisRateLimitStoreClientOptions;

interface RedisRateLimitStoreCommonOptions {
  /** Prefix of every bucket key. Default `sapi:rl:`. */
  prefix?: string;
  /** A reserve() that takes longer than this rejects (the limiter then falls back), ms from 0 to 2147483647. Default 1000. */
  commandTimeoutMs?: number;
}

/** A store that creates, and on close() quits, its own ioredis client. */
export interface RedisRateLimitStoreUrlOptions extends RedisRateLimitStoreCommonOptions {
  /** A Redis URL (`redis://host:6379/0`); the store creates, and on close() quits, its client. */
  url: string;
  client?: undefined;
  /** Connection timeout of the client, ms from 0 to 2147483647. Default 1000. */
  connectTimeoutMs?: number;
  /** Further ioredis options (`RedisOptions`) for the client. */
  redisOptions?: Record<string, unknown>;
}

/** A store over an ioredis client of yours (its connection settings are yours too). */
export interface RedisRateLimitStoreClientOptions extends RedisRateLimitStoreCommonOptions {
  /** An ioredis client (Redis or Cluster) you own; the store never closes it. */
  client: RedisClientLike;
  url?: undefined;
  connectTimeoutMs?: undefined;
  redisOptions?: undefined;
}

/**
 * Refuses a url ioredis would misread (it parses any text, reading `http://cache:6379` as a host
 * named `http`) or throw on with a bare `Invalid URL`: the forms it takes are a redis:// or
 * rediss:// URL, `host:port` and a unix socket path. The URL is never echoed (it may hold a password).
 */
function checkRedisUrl(url: string): void {
  if (url.startsWith('/') && !url.startsWith('//')) return; // (a unix socket path)
  const scheme = /^([a-z][a-z0-9+.-]*):\/\//i.exec(url)?.[1];
  if (scheme && !/^rediss?$/i.test(scheme)) throw new ConfigError('url', `must use redis:// or rediss://, got ${scheme}://`);
  try {
    new URL(scheme ? url : `redis://${url.replace(/^\/\//, '')}`);
  } catch {
    throw new ConfigError('url', "is not a Redis URL (such as 'redis://host:6379')");
  }
}

/** The keys of RedisRateLimitStoreOptions (the build fails when one is added to the type and not here). */
const OPTION_KEYS = ['url', 'client', 'prefix', 'commandTimeoutMs', 'connectTimeoutMs', 'redisOptions'] as const;
const keysMatch: Same<keyof RedisRateLimitStoreOptions, (typeof OPTION_KEYS)[number]> = true;
void keysMatch;

export class RedisRateLimitStore implements RateLimitStore {
  readonly prefix: string;
  /** The ioredis client in use (created from `url`, or the one given). */
  readonly client: RedisClientLike;
  private readonly ownsClient: boolean;
  private readonly commandTimeoutMs: number;
  private closed = false;
  /** Set by the first close(): settles once the client's connection is closed. */
  private closing: Promise<void> | undefined;
  /** Whether the client has been ready once; before that, calls wait (bounded) for the first connection. */
  private everReady = false;
  private firstReady: Promise<void> | undefined;

  constructor(options: RedisRateLimitStoreOptions) {
    if (typeof options === 'object' && options !== null) onlyKnownKeys(options as unknown as Record<string, unknown>, OPTION_KEYS, '');
    if (!options || (!options.url && !options.client)) {
      throw new ConfigError('url', 'RedisRateLimitStore needs { url } or { client }');
    }
    // (ioredis reads a number as a port, an object as its options: each would connect somewhere unmeant)
    const url: unknown = options.url;
    if (url !== undefined && typeof url !== 'string') throw new ConfigError('url', `must be a Redis URL such as 'redis://host:6379', got ${typeof url === 'number' ? url : `a value of type ${typeof url}`}`); // (an object may hold a password)
    if (typeof options.url === 'string') checkRedisUrl(options.url);
    // (with a client of yours, the settings of a client made from url would be silently ignored)
    if (options.client !== undefined) {
      for (const k of ['url', 'connectTimeoutMs', 'redisOptions'] as const) {
        if (options[k] !== undefined) throw new ConfigError(k, `is for a client made from url: give either url or client (with its own settings), not both`);
      }
    }
    const c = options.client as unknown as Record<string, unknown> | undefined;
    if (c !== undefined && (typeof c !== 'object' || c === null || ['evalsha', 'eval', 'on', 'once', 'off'].some((m) => typeof c[m] !== 'function'))) {
      throw new ConfigError('client', 'must be an ioredis client (Redis or Cluster)');
    }
    const ro = options.redisOptions as unknown;
    if (ro !== undefined && (typeof ro !== 'object' || ro === null || Array.isArray(ro))) throw new ConfigError('redisOptions', 'must be an object of ioredis options');
    if (options.prefix !== undefined && typeof options.prefix !== 'string') {
      throw new ConfigError('prefix', `must be a string, got ${shown(options.prefix)}`);
    }
    checkTimeout(options.commandTimeoutMs, 'commandTimeoutMs');
    checkTimeout(options.connectTimeoutMs, 'connectTimeoutMs');
    this.prefix = options.prefix ?? 'sapi:rl:';
    this.commandTimeoutMs = options.commandTimeoutMs ?? 1000;
    if (options.client) {
      this.client = options.client;
      this.ownsClient = false;
    } else {
      const connectTimeout = options.connectTimeoutMs ?? 1000;
      // ioredis is an optional peer dependency: loaded only here, with a clear error when missing
      const mod = requireOptional<RedisCtor | { default: RedisCtor }>('ioredis', 'rateLimit.store');
      const Redis = typeof mod === 'function' ? mod : mod.default;
      const client = new Redis(options.url as string, {
        // A down Redis must never hold a request: fail commands at once instead of queueing them.
        enableOfflineQueue: false,
        connectTimeout,
        maxRetriesPerRequest: 1,
        // disconnect() on an already closed stream arms a timer of this length: keep close() brisk.
        disconnectTimeout: 200,
        // No ioredis `commandTimeout`: reserve() has its own timeout (ioredis would also arm its
        // timer for commands it rejects at once, keeping the process alive for nothing).
        // Keep reconnecting in the background, backing off up to 2 s.
        retryStrategy: (times: number) => Math.min(50 * 2 ** Math.min(times, 6), 2000),
        ...options.redisOptions,
      });
      // Errors surface through reserve() rejections; without a listener ioredis logs each one.
      client.on('error', () => {});
      this.client = client;
      this.ownsClient = true;
    }
    if (this.client.status === 'ready') this.everReady = true;
    else this.client.once('ready', () => (this.everReady = true));
  }

  reserve(key: string, intervalMs: number, maxWaitMs: number, ruleMaxWaitMs?: number): Promise<Reservation> {
    if (this.closed) return Promise.reject(new Error('RedisRateLimitStore is closed'));
    const fullKey = this.prefix + key;
    const intervalUs = String(Math.max(0, intervalMs * 1000));
    const us = (ms: number) => String(Number.isFinite(ms) && ms > 0 ? Math.round(ms * 1000) : 0);
    const waits = ruleMaxWaitMs === undefined ? [us(maxWaitMs)] : [us(maxWaitMs), us(ruleMaxWaitMs)];
    const status = this.client.status;
    const run =
      this.everReady || !(status === 'wait' || status === 'connecting' || status === 'connect')
        ? this.evalGcra(fullKey, intervalUs, waits)
        : this.whenFirstReady().then(() => this.evalGcra(fullKey, intervalUs, waits));
    return withTimeout(run.then(parseReply), this.commandTimeoutMs, `RedisRateLimitStore: no answer from Redis within ${this.commandTimeoutMs} ms`);
  }

  /** Quits the client it created (a call while one is under way resolves with it, once the connection is closed). */
  close(): Promise<void> {
    this.closed = true;
    return (this.closing ??= this.quit());
  }

  private async quit(): Promise<void> {
    if (!this.ownsClient) return;
    const client = this.client;
    if (client.status === 'end') return;
    if (client.status === 'reconnecting') {
      // Between reconnection attempts: disconnect() cancels the next one; no 'end' follows.
      client.disconnect();
      return;
    }
    // Resolves on 'end', or after the call timeout at the latest (a client between reconnection
    // attempts may never emit 'end' again).
    let timer: NodeJS.Timeout | undefined;
    const ended = new Promise<void>((resolve) => {
      client.once('end', () => resolve());
      timer = setTimeout(() => {
        client.disconnect();
        resolve();
      }, this.commandTimeoutMs > 0 ? this.commandTimeoutMs : 1000);
    });
    if (client.status === 'ready') client.quit().catch(() => client.disconnect());
    else client.disconnect();
    await ended;
    clearTimeout(timer);
  }

  /**
   * Without an offline queue, commands sent before the first connection completes would fail:
   * calls made while the client first connects wait for it (bounded by the call timeout). Once the
   * client has been ready, a lost connection fails calls at once.
   */
  private whenFirstReady(): Promise<void> {
    if (!this.firstReady) {
      const client = this.client;
      this.firstReady = new Promise<void>((resolve, reject) => {
        const onReady = () => {
          client.off('close', onEnd);
          client.off('end', onEnd);
          this.firstReady = undefined;
          resolve();
        };
        const onEnd = () => {
          client.off('ready', onReady);
          client.off('close', onEnd);
          client.off('end', onEnd);
          this.firstReady = undefined;
          reject(new Error('RedisRateLimitStore: the Redis connection was closed'));
        };
        client.once('ready', onReady);
        client.once('close', onEnd); // the first attempt failed (refused, reset, closed)
        client.once('end', onEnd); // (close() while it connects: ioredis ends it with no 'close')
        if (client.status === 'wait') client.connect().catch(() => {});
      });
      // The call timeout rejects the callers; this promise may settle later without anyone waiting.
      this.firstReady.catch(() => {});
    }
    return this.firstReady;
  }

  private evalGcra(key: string, intervalUs: string, waitsUs: string[]): Promise<unknown> {
    const client = this.client;
    return client.evalsha(GCRA_SHA, 1, key, intervalUs, ...waitsUs).catch((err: unknown) => {
      if (err instanceof Error && /NOSCRIPT/.test(err.message)) {
        return client.eval(GCRA_LUA, 1, key, intervalUs, ...waitsUs);
      }
      throw err;
    });
  }
}

/** A timeout option: a number of ms a Node.js timer can hold (past MAX_TIMER_MS it would fire after 1 ms). */
function checkTimeout(v: unknown, name: string): void {
  if (v !== undefined && (typeof v !== 'number' || !(v >= 0 && v <= MAX_TIMER_MS))) {
    throw new ConfigError(name, `must be a number of ms from 0 to ${MAX_TIMER_MS}, got ${shown(v)}`);
  }
}

function parseReply(reply: unknown): Reservation {
  if (!Array.isArray(reply) || reply.length !== 2) {
    throw new Error('RedisRateLimitStore: unexpected script reply');
  }
  const ms = Number(reply[1]) / 1000;
  return Number(reply[0]) === 1 ? { admitted: true, waitMs: ms } : { admitted: false, retryAfterMs: ms };
}
