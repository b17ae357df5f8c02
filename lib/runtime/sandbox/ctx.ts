/*
 * Sandbox adapter module: ctx (APIContext), the object passed to the tenant's function.
 *
 * Holds makeCtx(st): a plain object with the spec's fields, in this order: getParts, headers,
 * cookies, query, body, url, appId, path, method, request, response. headers, cookies and query
 * are the script's own objects (writable, deletable: they come from a parse of the request
 * snapshot of their own, so the request API, which reads the snapshot, never sees a change made
 * to them); request and response are read-only and non-configurable. Built fresh for every stage.
 */
import { copyArray, defineProperty, isArray, isObj, jsonParse, setPrototypeOf } from './prelude';
import { makeResponse } from './response';
import { makeRequest, partsOf } from './request';
import type { Fields, StageRecord } from './types';

/** A property descriptor with a null prototype (as prelude.ts's). */
type Descriptor = PropertyDescriptor & { __proto__?: null };

/** A map field of the parsed fields: the script's own object, {} when absent. */
function map(v: unknown): { [key: string]: unknown } {
  return isObj(v) && !isArray(v) ? v : {};
}

/** A string field of the parsed fields, `dflt` when absent. */
function text(v: unknown, dflt: string): string {
  return typeof v === 'string' ? v : dflt;
}

/** One descriptor for ctx.request and ctx.response, its value set just before each use. */
var READ_ONLY: Descriptor = { __proto__: null, value: undefined, writable: false, enumerable: true, configurable: false };

/** `fieldsJson`: the ctx fields (or the whole request snapshot) as JSON. */
export function makeCtx(st: StageRecord, fieldsJson: string) {
  var r: Fields | null = typeof fieldsJson === 'string' && fieldsJson !== '' ? jsonParse(fieldsJson) : null;
  // the parsed record itself loses its prototype: a field it lacks reads as undefined, never as
  // something a script put on Object.prototype (cheaper than a hasOwnProperty per field)
  if (isObj(r) && !isArray(r)) setPrototypeOf(r, null);
  else r = { __proto__: null };
  // (an object literal defines its own properties: no setter of Object.prototype is called)
  var ctx = {
    getParts: () => copyArray(partsOf(st)),
    headers: map(r.headers),
    cookies: map(r.cookies),
    query: map(r.query),
    body: r.body === undefined ? '' : r.body,
    url: text(r.url, ''),
    appId: text(r.appId, ''),
    path: text(r.path, ''),
    method: text(r.method, 'GET'),
  };
  st.requestApi = makeRequest(st);
  st.responseApi = makeResponse(st);
  READ_ONLY.value = st.requestApi;
  defineProperty(ctx, 'request', READ_ONLY);
  READ_ONLY.value = st.responseApi;
  defineProperty(ctx, 'response', READ_ONLY);
  READ_ONLY.value = undefined;
  return ctx;
}
