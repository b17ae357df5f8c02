/**
 * scriptable-api: turn an Express app into a scriptable HTTP API service.
 */
export { createApiRouter } from './router';
export { MemoryRegistry } from './registry/memory';
export type { MemoryAppConfig, MemoryStageOption } from './registry/memory';
export { DirectoryRegistry } from './registry/directory';
export type { DirectoryRegistryOptions, DirectoryReload, RegistryProblem } from './registry/directory';
export { ApiError, ConfigError, ERRORS } from './errors';
export type { ErrorBody, ErrorName } from './errors';
export { MemoryRateLimitStore, RedisRateLimitStore, reserveGcra } from './rate-limit';
export type { RateLimitStore, Reservation, MemoryRateLimitStoreOptions, RedisRateLimitStoreOptions } from './rate-limit';
export { WorkerPool } from './runtime/pool';
export type { PoolOptions } from './runtime/pool';
export type { ScriptEngine, ScriptJob, JobResult, JobOutcome, HostBridge, ScriptSource, EngineStats, ErrorDetail } from './runtime/engine';
export type * from './runtime/protocol';
export type { HostOps, HostOp } from './runtime/messages';
export { validateApiDefinition } from './validations';
export { validateAutomation } from './automation/compile';
export { LocalFileStorage } from './files/local-storage';
export type { LocalFileStorageOptions } from './files/local-storage';
export { S3FileStorage } from './files/s3-storage';
export type { S3FileStorageOptions, S3Credentials } from './files/s3-storage';
export type { FileStorage, StoredFile, StoredFileInfo, StoragePutInfo, StoragePutResult, StorageOptions, ByteRange } from './files/storage';
export type * from './types';
