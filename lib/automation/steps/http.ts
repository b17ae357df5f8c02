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
import { SHOWN_MAX } from '../errors';
import { clock } from '../../timers';

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
      const left = Math.max(1, rt.deadline - clock());
      return rt.executors.http({ url: u, method, headers: h, body: text, bytes, timeoutMs: timeoutMs === undefined ? left : Math.min(timeoutMs, left) });
    };
  },
};
