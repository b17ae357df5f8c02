/**
 * The ScriptEngine contract. The router hands an engine one job per request (or two when a rate
 * limit needs attributes set by the before script) and never knows which engine runs it.
 * Built-in engines run jobs in a worker-thread pool (lib/runtime/pool.ts) with QuickJS or vm2.
 */
import type { AutomationRef, ReturnType, ScriptRef } from '../types';
import type { CarriedState, RequestSnapshot, SerializedOutput } from './protocol';
import type { ErrorDetail } from '../error-location';

export type { ErrorDetail } from '../error-location';

/** A script's source text, keyed by a hash of its name and text. */
export interface ScriptSource {
  name: string;
  /** sha1 of name + NUL + source; contexts are cached per (appId, hash). */
  hash: string;
  /** Omitted by the pool when the worker already holds this hash. */
  source?: string;
}

/** One request's script work: the hooks to run and the data they see. */
export interface ScriptJob {
  requestId: string;
  appId: string;
  apiPath: string;
  returnType: ReturnType;
  /** `all` runs every stage; `before` stops after the before script; `rest` runs the others. */
  phase: 'all' | 'before' | 'rest';
  before?: ScriptRef;
  call: ScriptRef | AutomationRef;
  after?: ScriptRef | AutomationRef;
  onError?: ScriptRef;
  /** Sources of every script the stages refer to, by script name. */
  scripts: Record<string, ScriptSource>;
  request: RequestSnapshot;
  state: CarriedState;
  /** Epoch ms by which the whole job must end (`Date.now() + scriptTimeoutMs` at arrival). */
  deadline: number;
  /**
   * [automation] The definitions (JSON text by id) of the automations `call` / `after` name, for
   * the built-in interpreter (lib/automation); an id the registry lacks is absent. Undefined when
   * the host's `automations` runner runs them (host call `automation.run`).
   */
  automations?: Record<string, string>;
}

/** How a job ended. */
export type JobOutcome =
  /** Phase `before` ran without producing a response: go on with phase `rest`. */
  | { kind: 'continue' }
  /** A script wrote the response itself (body, sendError or sendRedirect) — send `state.response`. */
  | { kind: 'written' }
  /** A return value, serialized for the API's return type. */
  | { kind: 'output'; output: SerializedOutput }
  /**
   * The default error response. `detail` (optional) says where it failed — stage, script,
   * `script.js:line:column`, the sandbox's stack — for the router's failure log; it never holds
   * host frames.
   */
  | { kind: 'error'; message: string; code: number; status: number; detail?: ErrorDetail };

export interface JobResult {
  state: CarriedState;
  outcome: JobOutcome;
  /**
   * Optional: how long the job ran on the engine (ms), without the time it waited for a worker.
   * The router's metrics count it as script time, and the rest of the wait for the result as
   * queue wait; without it, the whole wait counts as script time.
   */
  runMs?: number;
}

/** What an engine reports about its capacity, for the router's metrics (`ScriptEngine.stats`). */
export interface EngineStats {
  /** Workers (threads, processes...) running now. */
  workers: number;
  /** Workers running a job now. */
  busy: number;
  /** Jobs waiting for a worker. */
  queued: number;
}

/**
 * Host services a running script reaches (accounts, outbound HTTP, uploaded parts, automations,
 * console). The router makes one per request; engines route a script's host calls to it.
 */
export interface HostBridge {
  call(op: string, args: Record<string, unknown>): Promise<unknown>;
}

/** A pluggable script engine. */
export interface ScriptEngine {
  readonly name: string;
  /** Run a job. Resolve with a JobResult even when a script fails; reject only on engine faults. */
  run(job: ScriptJob, host: HostBridge): Promise<JobResult>;
  /** Stop workers and free resources. */
  close(): Promise<void>;
  /**
   * Optional: the engine's workers and queue now. The router's metrics read it when they are
   * scraped (the `workers`, `workers_busy` and `jobs_queued` gauges); an engine without it has none.
   */
  stats?(): EngineStats;
}
