/**
 * `{ "type": "abort", "message": "'order ' + ctx.query.id + ' not found'", "status": 404 }`: ends
 * the call exactly like `platform.app.abort(message, status)`: code 270001, the status when it is
 * one from 400 to 599 (500 otherwise); as the call, the API's onError runs.
 */
import type { StepKind } from '../compiled';
import { ERRORS } from '../../errors';
import { StepFailure } from '../errors';

export const abortStep: StepKind = {
  type: 'abort',
  compile(step, c) {
    const message = step.message === undefined ? undefined : c.value(step.message, 'message');
    const status = step.status === undefined ? undefined : c.value(step.status, 'status');
    return async (rt, scope) => {
      const m = message === undefined ? null : rt.value(message, scope, 'message');
      const s = status === undefined ? undefined : rt.value(status, scope, 'status');
      const code = typeof s === 'number' && Number.isInteger(s) && s >= 400 && s <= 599 ? s : ERRORS.ABORTED.status;
      throw new StepFailure(m == null ? ERRORS.ABORTED.message : String(m), ERRORS.ABORTED.code, code);
    };
  },
};
