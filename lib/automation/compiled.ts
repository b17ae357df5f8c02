/**
 * The compiled form of an automation: every step a closure over its parsed expressions, made once
 * per definition version (lib/automation/compile.ts) and run many times (interpreter.ts).
 */
import type { Expression } from './cel';
import type { AutomationState } from './types';
import type { ScriptRef } from '../types';

/** A value field: a parsed expression, or a literal JSON value. */
export type CompiledValue = { readonly expr: Expression } | { readonly literal: unknown };

/** The variables an expression sees: `ctx`, `state` and the enclosing forEach's item and index. */
export type Scope = Readonly<Record<string, unknown>>;

/** An outbound request of an `http` step. */
export interface AutomationHttpRequest {
  url: string;
  method: string;
  headers: Record<string, string>;
  body?: string;
  /** A body of bytes (base64), sent as they are (instead of `body`). */
  bytes?: string;
  /** The step's own limit, or (the run's deadline bounding it) a backstop a little past that deadline: see steps/http.ts. */
  timeoutMs: number;
}

/** Its answer: `body` is parsed when the response is JSON, else text. */
export interface AutomationHttpResponse {
  status: number;
  headers: Record<string, string>;
  url: string;
  body: unknown;
}

/**
 * What runs the steps that leave the interpreter. A rejection carries `message`, and `code` /
 * `status` when it has them; `fatal: true` ends the run without onError.
 */
export interface AutomationExecutors {
  /** Calls the script's export with `(ctx, state)` in the sandbox; resolves to its JSON result (undefined: none). */
  runScript(ref: ScriptRef, ctx: Scope, state: AutomationState): Promise<unknown>;
  /** An outbound request through the router's guarded client. */
  http(request: AutomationHttpRequest): Promise<AutomationHttpResponse>;
  /**
   * Runs the synchronous work of an expression (optional): a worker marks it as the job's own
   * work, so that an expression running past the deadline is seen and its worker replaced.
   */
  compute?<T>(work: () => T): T;
}

/** What a running step reaches. */
export interface StepRuntime {
  readonly state: AutomationState;
  readonly executors: AutomationExecutors;
  /** Ms on the monotonic clock (lib/timers.ts) by which the whole run must end (now: preparing a script step's script moves it). */
  readonly deadline: number;
  /**
   * The field's value in `scope`, as plain JSON; a failed evaluation fails the step naming the
   * field. With `keepBytes`, a value that is bytes (CEL `bytes`) is returned as its Uint8Array.
   */
  value(v: CompiledValue, scope: Scope, field: string, keepBytes?: boolean): unknown;
  /** Runs a step list; resolves to its last step's result (undefined when none ran). */
  runSteps(steps: readonly CompiledStep[], scope: Scope): Promise<unknown>;
  /** The current step's failure (AUTOMATION_STEP_FAILED) with this message, to throw. */
  failure(message: string): Error;
  /**
   * Before each round of a loop (and each step): lets the thread's event loop turn when the run
   * has computed for a while, and rejects with SCRIPT_TIMEOUT once the deadline has passed
   * (naming `before`, else the current step).
   */
  checkpoint(before?: string): Promise<void>;
  /**
   * Counts `bytes` as what `slot` of this run holds now (a variable, a step's result, a list being
   * built; 0 gives it back), against the thread's budget for automations' values (held.ts); past
   * it, fails the run with SCRIPT_OUT_OF_MEMORY.
   */
  hold(slot: unknown, bytes: number): void;
}

export interface CompiledStep {
  readonly id: string | undefined;
  readonly type: string;
  /** `step 'fetch' (http)` or `steps[2].then[0] (http)`: how messages name it. */
  readonly label: string;
  run(rt: StepRuntime, scope: Scope): Promise<unknown>;
}

/** What a step kind's compile function gets. */
export interface StepCompiler {
  /** A value field of this step (a string is parsed as CEL); throws ConfigError naming it. */
  value(v: unknown, field: string): CompiledValue;
  /** A nested step list (`then`, `steps`), with extra loop variables in scope. */
  steps(list: unknown, field: string, loopVars?: readonly string[]): CompiledStep[];
  /** Records a script the automation calls (its source travels with the job). */
  useScript(name: string): void;
  /** ConfigError naming this step's field. */
  error(field: string, message: string): Error;
}

/** One step type: turns a step's JSON into what runs it. */
export interface StepKind {
  readonly type: string;
  compile(step: Readonly<Record<string, unknown>>, c: StepCompiler): (rt: StepRuntime, scope: Scope) => Promise<unknown>;
}

/** A validated, compiled automation. */
export interface CompiledAutomation {
  readonly id: string;
  readonly steps: readonly CompiledStep[];
  /** Names of the scripts its `script` steps call. */
  readonly scripts: readonly string[];
  /** About what its compiled form holds on the heap, in bytes (its steps and its expressions' syntax nodes). */
  readonly heldBytes: number;
}
