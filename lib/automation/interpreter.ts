/**
 * Runs a compiled automation: its steps in order, `state.steps.<id>` set after each step with an
 * id, until a `return`, an `abort`, a failed step or the end. The result is the `return` value or,
 * without one, the last step's result (undefined: no result). The deadline covers the whole run:
 * it is checked before every step and bounds each outbound request; a script step runs under it
 * in the sandbox. A run that only computes lets its thread's event loop turn every TURN_MS.
 */
import { ERRORS, thrownCode } from '../errors';
import { ExpressionError } from './cel';
import type { AutomationExecutors, CompiledAutomation, CompiledStep, Scope, StepRuntime } from './compiled';
import { ReturnSignal, StepFailure } from './errors';
import { celView, measure, setOwn, sizedJson, toJson } from './json';
import { Holdings } from './held';
import type { AutomationState } from './types';
import { clock } from '../timers';

export interface AutomationInput {
  /** The request as expressions and script steps see it (`ctx.query`, `ctx.headers`...). */
  ctx: Record<string, unknown>;
  /** The call's result, when the automation runs as the after hook. */
  result?: unknown;
}

/** An error from an executor as a step failure: its own message and code (SCRIPT_ERROR's when it has none). */
function asFailure(e: unknown): StepFailure | ReturnSignal {
  if (e instanceof StepFailure || e instanceof ReturnSignal) return e;
  const err = e as { message?: unknown; code?: unknown; status?: unknown; fatal?: unknown } | undefined;
  const code = thrownCode(err?.code);
  const status = typeof err?.status === 'number' ? err.status : ERRORS.SCRIPT_ERROR.status;
  const message = typeof err?.message === 'string' && err.message !== '' ? err.message : ERRORS.SCRIPT_ERROR.message;
  return new StepFailure(message, code, status, err?.fatal === true);
}

/**
 * Longest the run computes without letting its thread's event loop turn. Steps that only compute
 * (expressions) chain promise jobs, which never end the thread's turn: the worker's other calls,
 * and the calls sent to it meanwhile, would wait for the whole run.
 */
const TURN_MS = 10;
const nextTurn = (): Promise<void> => new Promise((resolve) => setImmediate(resolve));

/**
 * `v` as plain JSON (toJson) and its size (for the run's holdings); a value nested too deep or too
 * large is `fail`'s failure (naming where it was), not a bare RangeError.
 */
function jsonOf(v: unknown, fail: (message: string) => Error): { value: unknown; bytes: number } {
  try {
    return sizedJson(v);
  } catch (e) {
    if (e instanceof RangeError) throw fail(e.message);
    throw e;
  }
}

/**
 * Runs `automation`; resolves to its result (undefined when it has none), rejects with a
 * StepFailure (message, code, status, fatal) when a step fails or the deadline passes. `deadline`
 * is read when needed: the job's moves while a script step's script is prepared and loaded.
 */
export async function runAutomation(automation: CompiledAutomation, input: AutomationInput, executors: AutomationExecutors, deadline: () => number): Promise<unknown> {
  const name = `automation '${automation.id}'`;
  // (state holds what expressions read: celView; what leaves it, toJson turns back into plain JSON)
  const result0 = jsonOf(input.result, (m) => StepFailure.of('AUTOMATION_STEP_FAILED', `${name}: state.result: ${m}`));
  const state: AutomationState = { steps: {}, vars: {}, result: celView(result0.value) };
  let current: CompiledStep | undefined;
  let turnStarted = clock();
  const holdings = new Holdings();

  const rt: StepRuntime = {
    state,
    executors,
    get deadline() {
      return deadline();
    },
    value(v, scope, field, keepBytes) {
      if ('literal' in v) return v.literal;
      try {
        const evaluate = () => {
          const raw = v.expr.evaluate(scope);
          const json = toJson(raw); // (bytes too: the size limit holds)
          return keepBytes && raw instanceof Uint8Array ? raw : json;
        };
        return executors.compute ? executors.compute(evaluate) : evaluate();
      } catch (e) {
        if (e instanceof ExpressionError || e instanceof RangeError) throw rt.failure(`${field}: ${e.message}`);
        throw e;
      }
    },
    failure(message) {
      return StepFailure.of('AUTOMATION_STEP_FAILED', `${name} ${current?.label ?? ''}: ${message}`);
    },
    async checkpoint(before) {
      if (clock() - turnStarted >= TURN_MS) {
        await nextTurn();
        turnStarted = clock();
      }
      if (clock() >= deadline()) {
        throw StepFailure.of('SCRIPT_TIMEOUT', `${name} ran past the time limit (scriptTimeoutMs) ${before !== undefined ? `before ${before}` : `in ${current?.label ?? 'its steps'}`}`, true);
      }
    },
    hold(slot, bytes) {
      try {
        holdings.set(slot, bytes);
      } catch (e) {
        if (e instanceof RangeError) throw StepFailure.of('SCRIPT_OUT_OF_MEMORY', `${name} ${current?.label ?? ''}: ${e.message}`, true);
        throw e;
      }
    },
    async runSteps(steps, scope) {
      const outer = current;
      let last: unknown;
      try {
        for (const step of steps) {
          await rt.checkpoint(step.label);
          current = step;
          try {
            last = await step.run(rt, scope);
          } catch (e) {
            throw asFailure(e);
          }
          if (step.id !== undefined) {
            const { value, bytes } = jsonOf(last, (m) => rt.failure(`its result: ${m}`));
            rt.hold(`steps.${step.id}`, bytes);
            setOwn(state.steps, step.id, celView(value));
          }
          current = step;
        }
      } finally {
        current = outer;
      }
      return last;
    },
  };

  const scope: Scope = { ctx: input.ctx, state };
  let result: unknown;
  try {
    rt.hold('result', result0.bytes);
    result = await rt.runSteps(automation.steps, scope);
  } catch (e) {
    if (e instanceof ReturnSignal) return e.value;
    throw e;
  } finally {
    holdings.releaseAll();
  }
  // (the last step's result, a forEach's list of results, say, is serialized as one text next)
  try {
    measure(result);
  } catch (e) {
    if (e instanceof RangeError) throw StepFailure.of('AUTOMATION_STEP_FAILED', `${name}: its result: ${e.message}`);
    throw e;
  }
  return result;
}
