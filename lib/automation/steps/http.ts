/**
 * `{ "type": "http", "method": "POST", "url": "'https://api.example.com/orders/' + ctx.query.id",
 *    "headers": { "authorization": "'Bearer ' + state.vars.token" }, "body": "{'qty': 2}" }`:
 * an outbound request through the router's guarded client (the rules of `platform.http.request`:
 * private networks refused unless allowed, size and time limits). The result is
 * `{ status, headers, url, body }`, `body` parsed when the response is JSON. A body that is bytes
 * (CEL `bytes`) is sent as those bytes, a string as it is, anything else as JSON. A 4xx or 5xx answer
 * is a result like any other: test `state.steps.<id>.status` and `abort` if need be.
 */
import type { StepKind } from '../compiled';
import { shown } from '../../definitions/names';
import { SHOWN_MAX, StepFailure } from '../errors';
import { clock } from '../../timers';

/**
 * How far past the run's deadline the host may wait for a request the run's time bounds. The run
 * ends at its deadline (SCRIPT_TIMEOUT, without onError, the request cancelled), as a script
 * waiting on `platform.http.request` does: the request's own timer, started on another thread,
 * must not race it (it won, now and then, and the call failed with OUTBOUND_FAILED and ran onError
 * past the time limit). This bound is only a backstop for a thread too busy to see its deadline.
 */
const PAST_DEADLINE_MS = 1000;

export const httpStep: StepKind = {
  type: 'http',
  compile(step, c) {
    const url = c.value(step.url, 'url');
    const method = typeof step.method === 'string' ? step.method.toUpperCase() : 'GET';
    const headerSpec = (step.headers ?? {}) as Record<string, unknown>;
    const headers = Object.keys(headerSpec).map((name) => [name, c.value(headerSpec[name], `headers.${name}`)] as const);
    const body = step.body === undefined ? undefined : c.value(step.body, 'body');
    const timeoutMs = typeof step.timeoutMs === 'number' ? step.timeoutMs : undefined;
    return async (rt, scope) => {
      const u = rt.value(url, scope, 'url');
      if (typeof u !== 'string' || u === '') throw rt.failure(`url must be a non-empty string, got ${shown(u, SHOWN_MAX)}`);
      // (no prototype: a header named `__proto__` or `constructor` is an ordinary name)
      const h: Record<string, string> = Object.create(null);
      for (const [name, v] of headers) {
        const value = rt.value(v, scope, `headers.${name}`);
        if (value !== null) h[name.toLowerCase()] = typeof value === 'string' ? value : String(value);
      }
      let text: string | undefined;
      let bytes: string | undefined;
      if (body !== undefined) {
        const b = rt.value(body, scope, 'body', true);
        if (typeof b === 'string') text = b;
        else if (b instanceof Uint8Array) bytes = Buffer.from(b.buffer, b.byteOffset, b.byteLength).toString('base64');
        else {
          text = JSON.stringify(b);
          h['content-type'] ??= 'application/json';
        }
      }
      const until = rt.deadline;
      const left = Math.max(1, until - clock());
      // (a step's own shorter limit is the request's: its failure is the step's, OUTBOUND_FAILED)
      const own = timeoutMs !== undefined && timeoutMs < left;
      try {
        return await rt.executors.http({ url: u, method, headers: h, body: text, bytes, timeoutMs: own ? timeoutMs : left + PAST_DEADLINE_MS });
      } catch (e) {
        if (!own && clock() >= until) throw StepFailure.of('SCRIPT_TIMEOUT', 'The automation timed out while waiting for an http step', true);
        throw e;
      }
    };
  },
};
