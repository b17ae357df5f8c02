/**
 * `{ "type": "if", "condition": "ctx.query.express == 'yes'", "then": [...], "else": [...] }`:
 * the condition must be a boolean; the result is the last result of the branch that ran (none
 * when the branch is empty or absent).
 */
import type { StepKind } from '../compiled';
import { shown } from '../../definitions/names';
import { SHOWN_MAX } from '../errors';

export const ifStep: StepKind = {
  type: 'if',
  compile(step, c) {
    const condition = c.value(step.condition, 'condition');
    const then = c.steps(step.then, 'then');
    const otherwise = step.else === undefined ? [] : c.steps(step.else, 'else');
    return async (rt, scope) => {
      const v = rt.value(condition, scope, 'condition');
      if (typeof v !== 'boolean') throw rt.failure(`condition must be a boolean, got ${shown(v, SHOWN_MAX)}`);
      return rt.runSteps(v ? then : otherwise, scope);
    };
  },
};
