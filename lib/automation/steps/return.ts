/**
 * `{ "type": "return", "value": "{'total': state.vars.total}" }`: ends the automation with the
 * value as its result. Without `value` it ends with no result: as the after hook, the call's
 * result is then sent unchanged.
 */
import type { StepKind } from '../compiled';
import { ReturnSignal } from '../errors';

export const returnStep: StepKind = {
  type: 'return',
  compile(step, c) {
    const value = step.value === undefined ? undefined : c.value(step.value, 'value');
    return async (rt, scope) => {
      throw new ReturnSignal(value === undefined ? undefined : rt.value(value, scope, 'value'));
    };
  },
};
