/*
 * Sandbox adapter module: ctx (APIContext), the object passed to the tenant's function.
 *
 * Holds makeCtx(st): a plain object with the spec's fields, in this order: getParts, headers,
 * cookies, query, body, url, appId, path, method, request, response. headers, cookies and query
 * are the script's own copies (writable, deletable); request and response are read-only and
 * non-configurable. Built fresh for every stage.
 */
import { clonePlain, copyArray, defineProperty, setOwn } from './prelude';
import { makeResponse } from './response';
import { makeRequest, partsOf } from './request';
import { snapField } from './entry';

export function makeCtx(st) {
  var ctx = {};
  setOwn(ctx, 'getParts', () => copyArray(partsOf(st)));
  for (var maps = ['headers', 'cookies', 'query'], i = 0; i < maps.length; i++) {
    var map = snapField(st, maps[i], undefined);
    setOwn(ctx, maps[i], map === undefined ? {} : clonePlain(map));
  }
  setOwn(ctx, 'body', snapField(st, 'body', ''));
  setOwn(ctx, 'url', snapField(st, 'url', ''));
  setOwn(ctx, 'appId', snapField(st, 'appId', ''));
  setOwn(ctx, 'path', snapField(st, 'path', ''));
  setOwn(ctx, 'method', snapField(st, 'method', 'GET'));
  st.requestApi = makeRequest(st);
  st.responseApi = makeResponse(st);
  defineProperty(ctx, 'request', { __proto__: null, value: st.requestApi, writable: false, enumerable: true, configurable: false });
  defineProperty(ctx, 'response', { __proto__: null, value: st.responseApi, writable: false, enumerable: true, configurable: false });
  return ctx;
}
