/**
 * `{ "type": "script", "script": "orders.js", "function": "total" }`: calls
 * `export function total(ctx, state)` in the script sandbox, under the same limits as any script.
 * `state` is a copy: what the next steps need comes back as the return value (the step's result).
 */
import type { StepKind } from '../compiled';

export const scriptStep: StepKind = {
  type: 'script',
  compile(step, c) {
    const ref = { script: String(step.script), function: String(step.function) };
    c.useScript(ref.script);
    return (rt, scope) => rt.executors.runScript(ref, scope, rt.state);
  },
};
