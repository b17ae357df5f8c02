/**
 * scriptable-api: turn an Express app into a scriptable HTTP API service.
 */
export { createApiRouter } from './router';
export { MemoryRegistry } from './registry/memory';
export type { MemoryAppConfig } from './registry/memory';
export { ApiError, ConfigError, ERRORS } from './errors';
export type { ErrorBody, ErrorName } from './errors';
export { MemoryRateLimitStore, RedisRateLimitStore, reserveGcra } from './rate-limit';
export type { RateLimitStore, Reservation, MemoryRateLimitStoreOptions, RedisRateLimitStoreOptions } from './rate-limit';
export { WorkerPool } from './runtime/pool';
export type { PoolOptions } from './runtime/pool';
export type { ScriptEngine, ScriptJob, JobResult, JobOutcome, HostBridge, ScriptSource, EngineStats } from './runtime/engine';
export type * from './runtime/protocol';
export { validateApiDefinition } from './validations';
export type * from './types';
