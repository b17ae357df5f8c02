/**
 * `ctx` as automation expressions see it: the request's data (no methods), read from the
 * request snapshot the scripts' ctx is built from. `attributes` is read when used (a script step
 * may set one), `json` is the body parsed as JSON on first use (null when it is not JSON). Each is
 * the data's celView (an object with a `constructor` key is a Map).
 */
import type { RequestSnapshot } from '../runtime/protocol';
import { celView } from './json';

export function automationContext(request: RequestSnapshot, attributes: () => Record<string, unknown>): Record<string, unknown> {
  let json: unknown;
  let parsed = false;
  const ctx: Record<string, unknown> = {
    appId: request.appId,
    path: request.path,
    method: request.method,
    url: request.url,
    requestId: request.requestId,
    headers: celView(request.headers),
    cookies: celView(request.cookies),
    query: celView(request.query),
    form: celView(request.form),
    body: request.body,
    remoteAddr: request.remoteAddr,
  };
  // (read again when a script step has changed them: the carried attributes are then a new object)
  let seen: Record<string, unknown> | undefined;
  let view: unknown;
  Object.defineProperty(ctx, 'attributes', {
    enumerable: true,
    get() {
      const now = attributes();
      if (now !== seen) [seen, view] = [now, celView(now)];
      return view;
    },
  });
  Object.defineProperty(ctx, 'json', {
    enumerable: true,
    get() {
      if (!parsed) {
        parsed = true;
        try {
          json = request.body === '' ? null : celView(JSON.parse(request.body));
        } catch {
          json = null;
        }
      }
      return json;
    },
  });
  return ctx;
}
