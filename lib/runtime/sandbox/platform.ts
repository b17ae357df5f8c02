/*
 * Sandbox adapter module: globalThis.platform.
 *
 * Holds platform.app.abort, platform.system.getAccountByToken, platform.utils (toJSON,
 * stringToBytes), platform.http.request, and defines globalThis.platform (non-writable,
 * non-configurable, deeply frozen).
 *
 * I/O operations go through hostIo: they return promises in an async-mode stage and values in a
 * blocking-mode one (see host.ts). They act for the active stage; a response's own operations
 * act for the stage that made the request. abort, stringToBytes and request are method
 * definitions (named as their key, no prototype, not constructors), getAccountByToken and toJSON
 * function expressions (a prototype each): scripts can tell them apart, so each stays as it is.
 */
import { ABORT_CODE, ABORT_MESSAGE, G, MAX_REQUEST_HEADERS, Num, OUTBOUND_FAILED, Str, charCodeAt, clonePlain, defineHidden, defineProperty, freeze, getOwn, isArray, isNil, isObj, jsonParse, lower, makeError, mathTrunc, objectKeys, push, safeString, setOwn, toUpperCase, typeError } from './prelude';
import { base64, bufferSourceBytes, stringifyUser, utf8Binary } from './encoding';
import { active, hostIo, hostSync } from './host';
import type { StageRecord } from './types';

function httpResponse(st: StageRecord | null, res: unknown) {
  var id = getOwn(res, 'id');
  // Bodies up to 1 MiB arrive with the response; a larger one is asked for on first read, and a
  // body the host could not read throws the reason then (too large, timed out, reset).
  var received = getOwn(res, 'body');
  function loadBody(): unknown {
    if (typeof received !== 'string') received = hostSync(st, 'http.body', { id: id });
    return received;
  }
  var response = {
    status: getOwn(res, 'status'),
    headers: clonePlain(getOwn(res, 'headers')),
    url: getOwn(res, 'url'),
    text: () => loadBody(),
    json: function (): unknown {
      var b = loadBody();
      return isNil(b) ? null : jsonParse(Str(b));
    },
    saveBodyAsFile: (p?: unknown) => hostIo(st, 'http.saveBodyAsFile', { id: id, path: p === undefined ? null : Str(p) }),
  };
  defineProperty(response, 'body', { __proto__: null, get: loadBody, enumerable: true, configurable: false });
  return response;
}

function deepFreeze<T extends { [key: string]: unknown }>(o: T): Readonly<T> {
  for (var keys = objectKeys(o), i = 0; i < keys.length; i++) if (isObj(o[keys[i]])) deepFreeze(o[keys[i]] as { [key: string]: unknown });
  return freeze(o);
}

export var platform = deepFreeze({
  app: {
    /** Ends the call with an error (code 270001); recorded, so catching it changes nothing. */
    abort(message?: unknown, status?: unknown): never {
      var msg = isNil(message) ? ABORT_MESSAGE : safeString(message);
      // (a whole status from 400 to 599, else the default 500: types/platform.d.ts; as the automation abort step)
      var sc = typeof status === 'number' && mathTrunc(status) === status && status >= 400 && status <= 599 ? status : undefined;
      var err = makeError('AbortError', msg, ABORT_CODE, sc);
      var st = active;
      if (st !== null && st.abort === null) {
        var stack = err.stack;
        st.abort = { name: 'AbortError', message: msg, code: ABORT_CODE, status: sc, stack: typeof stack === 'string' ? stack : undefined };
      }
      throw err;
    },
  },
  system: {
    getAccountByToken: function (token?: unknown) {
      return hostIo(active, 'system.getAccountByToken', { token: isNil(token) ? null : Str(token) }, (v: unknown) => (v === undefined ? null : v));
    },
  },
  utils: {
    toJSON: function (v?: unknown): string {
      var s = stringifyUser(v);
      return s === undefined ? 'null' : s;
    },
    /** UTF-8 (the default; 'utf8' too) in the sandbox, other charsets through the host. */
    stringToBytes(s?: unknown, charset?: unknown): number[] {
      var out: number[] = [];
      var i;
      if (isNil(s)) return out;
      var cs = isNil(charset) || charset === '' ? 'utf-8' : lower(charset);
      if (cs !== 'utf-8' && cs !== 'utf8') {
        var v = hostSync(active, 'utils.stringToBytes', { text: Str(s), charset: Str(charset) });
        if (isArray(v)) for (i = 0; i < v.length; i++) push(out, Num(v[i]) & 255);
        return out;
      }
      var bin = utf8Binary(Str(s));
      for (i = 0; i < bin.length; i++) push(out, charCodeAt(bin, i));
      return out;
    },
  },
  http: {
    request(opts?: unknown): unknown {
      if (typeof opts === 'string') opts = { url: opts };
      // (each option is read once: a getter or toString that answers differently each time sends what was checked)
      var url0 = isObj(opts) ? opts.url : undefined;
      var url = isNil(url0) ? '' : Str(url0);
      if (url === '' || !isObj(opts)) throw typeError('platform.http.request needs a request object with a url');
      var method0 = opts.method;
      var method = isNil(method0) ? 'GET' : toUpperCase(Str(method0));
      var headers: { [name: string]: string } = {};
      var hasContentType = false;
      var given = opts.headers;
      if (isObj(given)) {
        for (var hk = objectKeys(given), i = 0, n = 0; i < hk.length; i++) {
          var hv: unknown = given[hk[i]];
          if (isNil(hv)) continue;
          // (as the host refuses them: each header costs its event loop, which every app shares)
          if (++n > MAX_REQUEST_HEADERS) throw makeError('ApiError', 'too many request headers: at most ' + MAX_REQUEST_HEADERS, OUTBOUND_FAILED);
          setOwn(headers, hk[i], Str(hv));
          if (lower(hk[i]) === 'content-type') hasContentType = true;
        }
      }
      var body: unknown = opts.body;
      if (isNil(body)) body = null;
      // bytes (an ArrayBuffer, a typed array, a DataView) are sent as they are, as fetch sends them
      var bin = body === null ? undefined : bufferSourceBytes(body);
      if (bin !== undefined) body = null;
      else if (body !== null && typeof body !== 'string') {
        body = stringifyUser(body); // an object body is sent as JSON
        if (body === undefined) body = null;
        else if (!hasContentType) setOwn(headers, 'content-type', 'application/json');
      }
      var timeout0 = opts.timeoutMs;
      var timeoutMs = typeof timeout0 === 'number' && timeout0 === timeout0 ? timeout0 : undefined;
      var st = active;
      return hostIo(st, 'http.request', { url: url, method: method, headers: headers, body: body, bytes: bin === undefined ? undefined : base64(bin), timeoutMs: timeoutMs }, function (res: unknown) {
        return httpResponse(st, res);
      });
    },
  },
});
defineHidden(G, 'platform', platform, true);
