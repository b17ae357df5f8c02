/**
 * `{ "type": "set", "vars": { "total": "state.vars.price * 2", "currency": "'EUR'" } }`: assigns
 * `state.vars.<name>` in order (a later entry sees the earlier ones); the result is the object of
 * assigned values.
 */
import type { StepKind } from '../compiled';
import { byteSize, celView, setOwn } from '../json';

export const setStep: StepKind = {
  type: 'set',
  compile(step, c) {
    const vars = step.vars as Record<string, unknown>;
    const entries = Object.keys(vars).map((name) => [name, c.value(vars[name], `vars.${name}`)] as const);
    return async (rt, scope) => {
      const assigned: Record<string, unknown> = {};
      for (const [name, v] of entries) {
        const value = rt.value(v, scope, `vars.${name}`);
        rt.hold(`vars.${name}`, byteSize(value));
        setOwn(rt.state.vars, name, celView(value));
        setOwn(assigned, name, value);
      }
      return assigned;
    };
  },
};
