/**
 * `{ "type": "forEach", "items": "ctx.json.lines", "as": "line", "steps": [...] }`: runs `steps`
 * once per item of the list, with the item (`item` unless `as` names it) and `index` in scope;
 * the result is the list of each round's last result. The list is counted as it grows (MAX_VALUE_BYTES,
 * lib/automation/json.ts): it lives on the worker's own heap, so rounds of large results (http
 * bodies) end their own call instead of filling that heap for every call on the worker.
 */
import type { StepKind } from '../compiled';
import { shown } from '../../definitions/names';
import { SHOWN_MAX } from '../errors';
import { variableProblem } from '../cel';
import { MAX_VALUE_BYTES, celView, measure } from '../json';

export const forEachStep: StepKind = {
  type: 'forEach',
  compile(step, c) {
    const items = c.value(step.items, 'items');
    const as = typeof step.as === 'string' ? step.as : 'item';
    const problem = variableProblem(as);
    if (problem !== undefined) throw c.error('as', `cannot name the item: ${problem}`);
    const steps = c.steps(step.steps, 'steps', [as, 'index']);
    const listSlot = {}; // (what the list being built holds, this step's slot in the run's holdings)
    return async (rt, scope) => {
      const value = rt.value(items, scope, 'items');
      if (!Array.isArray(value)) throw rt.failure(`items must be a list, got ${shown(value, SHOWN_MAX)}`);
      const list = celView(value) as unknown[];
      const results: unknown[] = [];
      const room = { left: MAX_VALUE_BYTES };
      try {
        for (let i = 0; i < list.length; i++) {
          if (i > 0) await rt.checkpoint(); // (a round may have no steps to check before)
          const inner = { ...scope, [as]: list[i], index: i };
          const r = await rt.runSteps(steps, inner);
          try {
            measure([r], room); // (its slot in the list and its value)
          } catch (e) {
            if (e instanceof RangeError) throw rt.failure(`its result: ${e.message}`);
            throw e;
          }
          rt.hold(listSlot, MAX_VALUE_BYTES - room.left);
          results.push(r === undefined ? null : r);
        }
      } finally {
        rt.hold(listSlot, 0);
      }
      return results;
    };
  },
};
