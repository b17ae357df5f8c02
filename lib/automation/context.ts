/**
 * `ctx` as automation expressions see it: the request's data (no methods), read from the
 * request snapshot the scripts' ctx is built from. `attributes` is read when used (a script step
 * may set one), `json` is the body parsed as JSON on first use (null when it is not JSON).
 */
import type { RequestSnapshot } from '../runtime/protocol';

export function automationContext(request: RequestSnapshot, attributes: () => Record<string, unknown>): Record<string, unknown> {
  let json: unknown;
  let parsed = false;
  const ctx: Record<string, unknown> = {
    appId: request.appId,
    path: request.path,
    method: request.method,
    url: request.url,
    requestId: request.requestId,
    headers: request.headers,
    cookies: request.cookies,
    query: request.query,
    form: request.form,
    body: request.body,
    remoteAddr: request.remoteAddr,
  };
  Object.defineProperty(ctx, 'attributes', { enumerable: true, get: attributes });
  Object.defineProperty(ctx, 'json', {
    enumerable: true,
    get() {
      if (!parsed) {
        parsed = true;
        try {
          json = request.body === '' ? null : JSON.parse(request.body);
        } catch {
          json = null;
        }
      }
      return json;
    },
  });
  return ctx;
}
