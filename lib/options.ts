/** Validates router options and fills in the defaults. */
import type { ApiRouterOptions, Logger } from './types';
import { ConfigError } from './errors';
import { parseSize, validateOptions } from './validations';
import { cpuCount, defaultWorkersPerApp } from './runtime/pool-options';
import { adaptLogger, defaultLogger } from './logging';
import { resolveUploadOptions, type UploadLimits } from './context/upload-options';
import { LocalFileStorage } from './files/local-storage';
import type { FileStorage } from './files/storage';

export const DEFAULTS = {
  scriptTimeoutMs: 10_000,
  scriptMemoryLimitMb: 64,
  maxWorkers: 32,
  maxConcurrentPerApp: 1000,
  queueTimeoutMs: 5000,
  bodyLimit: 1024 * 1024,
  scriptSizeLimit: 1024 * 1024,
} as const;

export interface ResolvedOptions {
  raw: ApiRouterOptions;
  scriptTimeoutMs: number;
  scriptMemoryLimitMb: number;
  workers: number;
  maxWorkers: number;
  maxConcurrentPerApp: number;
  maxWorkersPerApp: number;
  queueTimeoutMs: number;
  bodyLimit: number;
  /** Largest script source, UTF-8 bytes. */
  scriptSizeLimit: number;
  allowUnderscoreHeaders: boolean;
  logger: Logger | undefined;
  upload: UploadLimits;
  /** Shared storage: `storage`, or a LocalFileStorage over `storageDir`. */
  storage: FileStorage | undefined;
  /** The apps' local sandboxes (`sandboxDir`). */
  sandbox: LocalFileStorage | undefined;
}


/** scriptSizeLimit in bytes: at least one (0 would refuse every script, at its first call). */
function scriptSize(v: unknown): number {
  const n = parseSize(v, 'scriptSizeLimit');
  if (n < 1) throw new ConfigError('scriptSizeLimit', `must be at least 1 byte, got ${JSON.stringify(v)}`);
  return n;
}

export function parseOptions(options: ApiRouterOptions): ResolvedOptions {
  validateOptions(options);
  // one core stays with the event loop, which serves every request
  // (the default never exceeds a maxWorkers given: it fits on any machine)
  const workers = options.workers ?? Math.min(Math.max(1, cpuCount() - 1), options.maxWorkers ?? Infinity);
  return {
    raw: options,
    scriptTimeoutMs: options.scriptTimeoutMs ?? DEFAULTS.scriptTimeoutMs,
    scriptMemoryLimitMb: options.scriptMemoryLimitMb ?? DEFAULTS.scriptMemoryLimitMb,
    workers,
    maxWorkers: options.maxWorkers ?? Math.max(workers, DEFAULTS.maxWorkers),
    maxConcurrentPerApp: options.maxConcurrentPerApp ?? DEFAULTS.maxConcurrentPerApp,
    maxWorkersPerApp: options.maxWorkersPerApp ?? defaultWorkersPerApp(),
    queueTimeoutMs: options.queueTimeoutMs ?? DEFAULTS.queueTimeoutMs,
    bodyLimit: options.bodyLimit === undefined ? DEFAULTS.bodyLimit : parseSize(options.bodyLimit, 'bodyLimit'),
    scriptSizeLimit: options.scriptSizeLimit === undefined ? DEFAULTS.scriptSizeLimit : scriptSize(options.scriptSizeLimit),
    allowUnderscoreHeaders: options.allowUnderscoreHeaders ?? false,
    // (every part of the router calls the logger `(message, meta)`: adaptLogger turns that into the logger's own shape)
    logger: options.logger === false ? undefined : options.logger ? adaptLogger(options.logger, options.loggerStyle) : defaultLogger(),
    upload: resolveUploadOptions(options.upload),
    storage: options.storage ?? (options.storageDir ? new LocalFileStorage({ root: options.storageDir }) : undefined),
    sandbox: options.sandboxDir ? new LocalFileStorage({ root: options.sandboxDir }) : undefined,
  };
}
