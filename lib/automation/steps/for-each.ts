/**
 * `{ "type": "forEach", "items": "ctx.json.lines", "as": "line", "steps": [...] }`: runs `steps`
 * once per item of the list, with the item (`item` unless `as` names it) and `index` in scope;
 * the result is the list of each round's last result.
 */
import type { StepKind } from '../compiled';
import { shown } from '../../definitions/names';
import { SHOWN_MAX } from '../errors';
import { variableProblem } from '../cel';
import { celView } from '../json';

export const forEachStep: StepKind = {
  type: 'forEach',
  compile(step, c) {
    const items = c.value(step.items, 'items');
    const as = typeof step.as === 'string' ? step.as : 'item';
    const problem = variableProblem(as);
    if (problem !== undefined) throw c.error('as', `cannot name the item: ${problem}`);
    const steps = c.steps(step.steps, 'steps', [as, 'index']);
    return async (rt, scope) => {
      const value = rt.value(items, scope, 'items');
      if (!Array.isArray(value)) throw rt.failure(`items must be a list, got ${shown(value, SHOWN_MAX)}`);
      const list = celView(value) as unknown[];
      const results: unknown[] = [];
      for (let i = 0; i < list.length; i++) {
        if (i > 0) await rt.checkpoint(); // (a round may have no steps to check before)
        const inner = { ...scope, [as]: list[i], index: i };
        const r = await rt.runSteps(steps, inner);
        results.push(r === undefined ? null : r);
      }
      return results;
    };
  },
};
