/**
 * The ScriptEngine contract. The router hands an engine one job per request (or two when a rate
 * limit needs attributes set by the before script) and never knows which engine runs it.
 * The built-in engine (lib/runtime/pool.ts) runs jobs in a pool of worker threads with QuickJS or
 * vm2; docs/script-engine.md shows how to plug in another one.
 */
import type { AutomationRef, ReturnType, ScriptRef } from '../types';
import type { CarriedState, RequestSnapshot, SerializedOutput } from './protocol';
import type { ErrorDetail } from '../error-location';

export type { ErrorDetail } from '../error-location';

/** A script's source text, keyed by a hash of its name and text. */
export interface ScriptSource {
  name: string;
  /**
   * sha1 of name + NUL + source (preview stage: NUL `preview` NUL in front; an app whose registry
   * answers `appGeneration`: NUL `generation <g>` NUL in front too): compiled modules and contexts
   * are kept per (appId, hash), so an app created again under a deleted one's id gets contexts of its own.
   */
  hash: string;
  source: string;
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
  /**
   * How long the job's scripts may run, in ms. The clock starts when the job's first stage starts
   * running (time spent waiting for a worker does not count).
   */
  timeoutMs: number;
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
  /**
   * Attributes and response effects after the last stage. The router reads the attributes only
   * from a `before` phase (for the `rest` job, and a rate-limit identifier naming one): the
   * built-in engine sends `{}` for the others.
   */
  state: CarriedState;
  outcome: JobOutcome;
  /**
   * How long the job ran (ms), from its first stage's start, without the time it waited for a
   * worker; 0 when it never left the line (a queue timeout), absent when the engine does not
   * measure it. The router's metrics count it as script time and the rest of the wait for the
   * result as queue wait (without it, the whole wait as script time).
   */
  runMs?: number;
  /**
   * The call's failure an `onError` hook answered (the outcome is the hook's answer): the router's
   * log line names it when the host then refuses that answer (a framing header, a missing file).
   */
  handled?: ErrorDetail['callFailure'];
}

/**
 * Host services a running script reaches (accounts, outbound HTTP, uploaded parts, automations,
 * console): the operations of HostOps (lib/runtime/messages.ts). The router makes one per
 * request; engines route a script's host calls to it.
 */
export interface HostBridge {
  call(op: string, args: Record<string, unknown>): Promise<unknown>;
  /**
   * Whether the caller has gone (its client closed the connection): a job still waiting for a
   * worker may be dropped then, never started, resolving with a `CLIENT_GONE` error. A job that
   * started runs on. (The router's bridge has it; an engine may ignore it.)
   */
  gone?(): boolean;
}

/** What an engine is doing now (for metrics). */
export interface EngineStats {
  /** Worker threads running. */
  workers: number;
  /** Workers with at least one job in flight. */
  busy: number;
  /** Jobs waiting for a worker. */
  queued: number;
}

/** A pluggable script engine. */
export interface ScriptEngine {
  readonly name: string;
  /** Run a job. Resolve with a JobResult even when a script fails; reject only on engine faults. */
  run(job: ScriptJob, host: HostBridge): Promise<JobResult>;
  /**
   * Stop and free resources. By default the jobs already accepted finish first (new ones are
   * refused); `force` stops at once.
   */
  close(options?: { force?: boolean }): Promise<void>;
  /** Resolves when the engine can take work without a start-up delay (optional). */
  ready?(): Promise<void>;
  /** What the engine is doing now (optional). */
  stats?(): EngineStats;
}
