/** Options of the built-in `WorkerPool`: defaults and checks, for pools made with `new WorkerPool(...)`. */
import * as os from 'node:os';
import type { Same } from '../validations';
import { ConfigError } from '../errors';
import { nearestName, shown } from '../definitions/names';
import { MAX_TIMER_MS } from '../timers';
import type { Logger } from '../types';
import { adaptLogger } from '../logging';
import { assertOptionalInstalled } from '../optional-package';
import { maxQuickJsMemoryLimitMb, QUICKJS_HEAP_NOTE } from './messages';

export interface PoolOptions {
  /** The sandbox each worker runs. Default `'quickjs'`. */
  engine?: 'quickjs' | 'vm2';
  /** Workers kept running (started with the pool). Default: the number of CPUs minus one (at least 1, at most `maxWorkers`). */
  size?: number;
  /**
   * Most workers, counting those started to stand in for workers held by a long slice of script
   * work or a blocking host call, and the one serving apps whose calls ended their worker lately
   * (docs/script-engine.md, Limits of a call). Default: the larger of `size` and 32.
   */
  maxWorkers?: number;
  /**
   * Memory limit of one script call, in MiB (at least 8). Default 64. On QuickJS, at most 2016
   * minus `contextBudgetMb` (a worker's heap holds at most 2048 MiB).
   */
  memoryLimitMb?: number;
  /** Memory the sandbox contexts one worker keeps between calls may hold, in MiB (8 to 1024). Default 384 (about 1,350 small apps). */
  contextBudgetMb?: number;
  /** Most calls of one app in flight at once (running or waiting on the host); more wait in line. Default 1000. */
  maxConcurrentPerApp?: number;
  /**
   * Most workers one app may hold at once: a worker is held while it runs a long slice of that
   * app's script work (past 25 ms without yielding) or is blocked in one of its blocking-mode host
   * calls. Default: half the CPUs, at least 1 (blocking host calls: half of maxWorkers at least).
   */
  maxWorkersPerApp?: number;
  /**
   * Longest a call may wait in line for a worker, in ms, counted while a worker is ready (not
   * while the workers start or are all replaced); then it fails with QUEUE_TIMEOUT. Default 5000.
   */
  queueTimeoutMs?: number;
  /** How long a worker beyond `size` may stay idle before it stops, in ms. Default 30000. */
  idleTimeoutMs?: number;
  /** Time (ms) a worker gets past a call's deadline to stop the script itself before it is terminated. Default 250. */
  graceMs?: number;
  /** Where worker failures go. Default: nowhere. */
  logger?: Logger;
}

export type ResolvedPoolOptions = Required<Omit<PoolOptions, 'logger'>> & { logger?: Logger };

/**
 * The most worker threads a pool may have: each is a thread with a heap of its own (tens of MiB),
 * started one after another (a pool of a million would never finish starting).
 */
export const MAX_WORKERS = 1024;

/** The keys of PoolOptions (the build fails when they and the interface drift apart). */
const POOL_KEYS = ['engine', 'size', 'maxWorkers', 'memoryLimitMb', 'contextBudgetMb', 'maxConcurrentPerApp', 'maxWorkersPerApp', 'queueTimeoutMs', 'idleTimeoutMs', 'graceMs', 'logger'] as const;
const keysMatch: Same<keyof PoolOptions, (typeof POOL_KEYS)[number]> = true;
void keysMatch;

export const POOL_DEFAULTS = {
  engine: 'quickjs',
  maxWorkers: 32,
  memoryLimitMb: 64,
  contextBudgetMb: 384,
  maxConcurrentPerApp: 1000,
  queueTimeoutMs: 5000,
  idleTimeoutMs: 30_000,
  graceMs: 250,
} as const;

export function cpuCount(): number {
  return os.availableParallelism();
}

/** The default of `maxWorkersPerApp`. */
export function defaultWorkersPerApp(): number {
  return Math.max(1, Math.floor(cpuCount() / 2));
}

function int(o: Record<string, unknown>, field: string, min: number, max = Number.MAX_SAFE_INTEGER): void {
  const v = o[field];
  if (v !== undefined && (typeof v !== 'number' || !Number.isInteger(v) || v < min)) {
    throw new ConfigError(field, `must be an integer >= ${min}, got ${shown(v)}`);
  }
  if (typeof v === 'number' && v > max) throw new ConfigError(field, `must be at most ${max}, got ${shown(v)}`);
}

/** Checks `new WorkerPool(options)` and fills in the defaults; a bad field throws a ConfigError naming it. */
export function resolvePoolOptions(options: PoolOptions | undefined): ResolvedPoolOptions {
  const o = (options ?? {}) as Record<string, unknown>;
  if (typeof o !== 'object' || o === null || Array.isArray(o)) throw new ConfigError('options', 'WorkerPool options must be an object');
  // (an unknown key is a typo: `memoryLimitMB` would silently keep the default)
  for (const k of Object.keys(o)) {
    if ((POOL_KEYS as readonly string[]).includes(k)) continue;
    const near = nearestName(k, POOL_KEYS);
    throw new ConfigError(k, `is not an option${near ? ` (did you mean '${near}'?)` : `; the options are ${POOL_KEYS.join(', ')}`}`);
  }
  if (o.engine !== undefined && o.engine !== 'quickjs' && o.engine !== 'vm2') {
    throw new ConfigError('engine', `must be 'quickjs' or 'vm2', got ${JSON.stringify(o.engine)}`);
  }
  if (o.engine === 'vm2') assertOptionalInstalled('vm2', 'engine'); // (an optional peer dependency: the workers load it)
  int(o, 'size', 1, MAX_WORKERS);
  int(o, 'maxWorkers', 1, MAX_WORKERS);
  int(o, 'memoryLimitMb', 8);
  int(o, 'contextBudgetMb', 8, 1024);
  int(o, 'maxConcurrentPerApp', 1);
  int(o, 'maxWorkersPerApp', 1);
  int(o, 'queueTimeoutMs', 1, MAX_TIMER_MS);
  int(o, 'idleTimeoutMs', 0, MAX_TIMER_MS);
  int(o, 'graceMs', 0, MAX_TIMER_MS);
  const logger = o.logger as Logger | undefined;
  if (logger !== undefined && (typeof logger !== 'object' || logger === null || (['info', 'warn', 'error'] as const).some((m) => typeof logger[m] !== 'function'))) {
    throw new ConfigError('logger', 'must be an object with info, warn and error methods');
  }
  const p = options ?? {};
  // (the default size is the CPUs less one, within a maxWorkers given)
  const size = p.size ?? Math.min(Math.max(1, cpuCount() - 1), p.maxWorkers ?? Infinity);
  if (p.maxWorkers !== undefined && p.maxWorkers < size) throw new ConfigError('maxWorkers', `must be >= size (${size})`);
  const memoryLimitMb = p.memoryLimitMb ?? POOL_DEFAULTS.memoryLimitMb;
  const contextBudgetMb = p.contextBudgetMb ?? POOL_DEFAULTS.contextBudgetMb;
  const quickjsLimit = maxQuickJsMemoryLimitMb(contextBudgetMb);
  if ((p.engine ?? POOL_DEFAULTS.engine) === 'quickjs' && memoryLimitMb > quickjsLimit) {
    throw new ConfigError('memoryLimitMb', `must be at most ${quickjsLimit} with contextBudgetMb ${contextBudgetMb}, got ${memoryLimitMb} (${QUICKJS_HEAP_NOTE})`);
  }
  return {
    engine: p.engine ?? POOL_DEFAULTS.engine,
    size,
    maxWorkers: p.maxWorkers ?? Math.max(size, POOL_DEFAULTS.maxWorkers),
    memoryLimitMb,
    contextBudgetMb,
    maxConcurrentPerApp: p.maxConcurrentPerApp ?? POOL_DEFAULTS.maxConcurrentPerApp,
    maxWorkersPerApp: p.maxWorkersPerApp ?? defaultWorkersPerApp(),
    queueTimeoutMs: p.queueTimeoutMs ?? POOL_DEFAULTS.queueTimeoutMs,
    idleTimeoutMs: p.idleTimeoutMs ?? POOL_DEFAULTS.idleTimeoutMs,
    graceMs: p.graceMs ?? POOL_DEFAULTS.graceMs,
    // (adapted as the router's is: pino's shape, and a logger that throws or rejects loses that
    // line; thrown from a worker's message, it would end the process)
    logger: logger === undefined ? undefined : adaptLogger(logger),
  };
}
