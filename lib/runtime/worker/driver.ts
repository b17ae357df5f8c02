/**
 * What an engine provides inside a worker: a sandbox context per (app, script version) holding
 * the adapter (lib/runtime/sandbox/) and the script's module, or per set of a job's scripts run
 * in one entry (StageChain: their modules), entered through the adapter's entry (start / reply /
 * drain / cancel / at). lib/runtime/worker/stages.ts drives the contexts,
 * lib/runtime/worker/pipeline.ts the stages of a job.
 */
import type { ErrorDetail } from '../../error-location';
import { ERRORS } from '../../errors';

/** A failure of the engine rather than of the script's own code. */
export class EngineError extends Error {
  constructor(
    readonly errorName: 'SCRIPT_COMPILE_ERROR' | 'FUNCTION_NOT_FOUND' | 'SCRIPT_TIMEOUT' | 'SCRIPT_OUT_OF_MEMORY' | 'SCRIPT_STALLED' | 'ENGINE_FAILURE',
    message: string,
    /** Where it failed, when the engine knows (a compile error's `script.js:line:column`). */
    readonly detail?: ErrorDetail,
  ) {
    super(message);
    this.name = 'EngineError';
  }
}

/**
 * ENGINE_FAILURE with the table's message: `reason` (the engine's or the worker's own message,
 * which may name its internals, a vendored source path say) goes to the log only (detail.cause).
 */
export function engineFailure(reason: unknown): EngineError {
  return new EngineError('ENGINE_FAILURE', ERRORS.ENGINE_FAILURE.message, { cause: (reason as Error)?.message ?? String(reason) });
}

/**
 * The host bridge a context's adapter calls: `(stageId, op, argsJson, async)` -> the reply JSON
 * (async false) or a call id (async true); see lib/runtime/sandbox/prelude.ts.
 */
export type HostFn = (stageId: number, op: string, argsJson: string, async: boolean) => string | number;

/** A script module of a context, in the form the engine runs. */
export interface ModuleCode {
  name: string;
  code: string;
}

/**
 * One sandbox context: the adapter and the script modules of one set of a job's stages (one, or
 * the scripts of an API's hooks and call: see StageHead.next). Entries throw EngineError.
 */
export interface EngineContext {
  /** Module `module` (its index in the context, 0 the first) exports a function of this name. */
  hasFunction(name: string, module?: number): boolean;
  /**
   * Starts a stage (adapter `start`; `ctx` and `maps`: the CtxFields and CtxMaps JSON, `body` the
   * request body (null: asked for on first read, 'stage.body'), each absent: read from `request`;
   * `chunks`: the response body's chunks as JSON, absent: none, or inside `response`).
   */
  start(stageId: number, fn: string, head: string, request: string, attributes: string, response: string, value: string, ctx?: string, maps?: string, body?: string | null, chunks?: string): void;
  /** Settles an async host call (adapter `reply`). */
  reply(callId: number, replyJson: string): void;
  /** Forgets a stage (adapter `cancel`). */
  cancel(stageId: number): void;
  /** Where a stage in flight is in its chain (adapter `at`). */
  at(stageId: number): string;
  /** The adapter's drain JSON: call it once the promise jobs the last entries queued have run. */
  drain(): string;
  dispose(): void;
  /** What the context is thought to hold, in bytes (for the cache's budget). */
  readonly bytes: number;
}

export interface SandboxDriver {
  /** True once the engine is unusable (a full heap): the worker must be replaced. */
  readonly poisoned: boolean;
  /**
   * True when the promise jobs of an entry (or of a module's top-level code) run only once the
   * worker's event loop turns (vm2: they are this thread's own microtasks); false when each entry
   * runs them itself (QuickJS).
   */
  readonly jobsRunLater: boolean;
  /**
   * Loads the adapter and the module `code` (already in the form the engine runs) in a new
   * context, then the modules of `more` in order (modules 1, 2...: start's `ns` is then their
   * namespaces by module). `moduleStarts` is called just before the scripts' own code is
   * evaluated: from then on the load runs under the worker's deadline (until then it is the
   * engine's own work).
   */
  open(name: string, code: string, host: HostFn, moduleStarts?: () => void, more?: readonly ModuleCode[]): Promise<EngineContext>;
}

export interface DriverOptions {
  memoryLimitMb: number;
  /** Memory the cached contexts may hold, MiB (QuickJS sizes its heap for it). */
  contextBudgetMb: number;
  adapterSource: string;
  /** Polled while script code runs (QuickJS): true stops it (the current entry's deadline passed). */
  interrupt: () => boolean;
  /**
   * Asked before the heap grows (QuickJS) by `bytes` for the entry running now; `pastBy`: how far
   * the heap would then be past one call's room (the cached contexts, one call's limit and the
   * allocator's slack), 0 or less when within it. True lets it grow (see Stages.heapGrowth).
   * Absent: it grows only within the room.
   */
  heapGrowth?: (bytes: number, pastBy: number) => boolean;
  /** The QuickJS WebAssembly module compiled by the pool (absent: loaded from its file). */
  wasmModule?: object;
}
