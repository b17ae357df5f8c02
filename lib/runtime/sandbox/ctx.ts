/*
 * Sandbox adapter module: ctx (APIContext), the object passed to the tenant's function.
 *
 * Holds makeCtx(st): a plain object with the spec's fields, in this order: getParts, headers,
 * cookies, query, body, url, appId, path, method, request, response. headers, cookies and query
 * are the script's own objects (writable, deletable: they come from a parse of the request
 * snapshot of their own, so the request API, which reads the snapshot, never sees a change made
 * to them); request and response are read-only and non-configurable. Built fresh for every stage.
 */
import { copyArray, defineProperty, getOwn, isArray, isObj, jsonParse } from './prelude';
import { makeResponse } from './response';
import { makeRequest, partsOf } from './request';

function field(r, key, dflt) {
  var v = getOwn(r, key);
  return v === undefined ? dflt : v;
}

function map(r, key) {
  var v = getOwn(r, key);
  return isObj(v) && !isArray(v) ? v : {};
}

/** One descriptor for ctx.request and ctx.response, its value set just before each use. */
var READ_ONLY = { __proto__: null, value: undefined, writable: false, enumerable: true, configurable: false };

/** `fieldsJson`: the ctx fields (or the whole request snapshot) as JSON. */
export function makeCtx(st, fieldsJson) {
  var r = typeof fieldsJson === 'string' && fieldsJson !== '' ? jsonParse(fieldsJson) : null;
  // (an object literal defines its own properties: no setter of Object.prototype is called)
  var ctx = {
    getParts: () => copyArray(partsOf(st)),
    headers: map(r, 'headers'),
    cookies: map(r, 'cookies'),
    query: map(r, 'query'),
    body: field(r, 'body', ''),
    url: field(r, 'url', ''),
    appId: field(r, 'appId', ''),
    path: field(r, 'path', ''),
    method: field(r, 'method', 'GET'),
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
