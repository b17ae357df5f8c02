/**
 * `{ "type": "script", "script": "orders.js", "function": "total" }`: calls
 * `export function total(ctx, state)` in the script sandbox, under the same limits as any script.
 * `state` is a copy: what the next steps need comes back as the return value (the step's result).
 */
import type { StepKind } from '../compiled';
import { ERRORS } from '../../errors';
import { StepFailure } from '../errors';
import { measure } from '../json';

export const scriptStep: StepKind = {
  type: 'script',
  compile(step, c) {
    const ref = { script: String(step.script), function: String(step.function) };
    c.useScript(ref.script);
    return (rt, scope) => {
      // (the state goes to the sandbox as one JSON text: its values together, not only each, must fit)
      try {
        measure(rt.state);
      } catch (e) {
        if (e instanceof RangeError) throw rt.failure(`state: ${e.message}`);
        throw e;
      }
      return rt.executors.runScript(ref, scope, rt.state).catch((e: unknown) => {
        // (a result with no JSON form, one nested too deep too: the step's result failed, as any step's)
        if (e instanceof StepFailure && e.code === ERRORS.INVALID_RESULT.code) throw rt.failure(`its result: ${e.message}`);
        throw e;
      });
    };
  },
};
