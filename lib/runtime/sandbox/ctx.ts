/*
 * Sandbox adapter module: ctx (APIContext), the object passed to the tenant's function.
 *
 * Holds makeCtx(st): a plain object with the spec's fields, in this order: getParts, headers,
 * cookies, query, body, url, appId, path, method, request, response. Built fresh for every stage.
 * headers, cookies and query are the script's own objects (writable, deletable: they come from a
 * parse of the stage's CtxMaps of their own, so the request API, which reads its own parse, never
 * sees a change made to them). That parse happens when the script first reads one of them: the
 * three are accessors (enumerable, configurable) until then, and assigning one makes it a plain
 * data property; most scripts never read them, and a browser's headers and cookies are a
 * kilobyte or more of JSON. request and response are read-only and non-configurable.
 */
import { WeakMapCtor, copyArray, defineProperty, getOwn, getPrototypeOf, isArray, isObj, jsonParse, makeError, setOwn, wmGet, wmSet } from './prelude';
import { makeResponse } from './response';
import { makeRequest, partsOf } from './request';
import type { Fields, StageRecord } from './types';

/** A property descriptor with a null prototype (as prelude.ts's). */
type Descriptor = PropertyDescriptor & { __proto__?: null };

/** ctx's own maps: the JSON they come from until the first read, then the parse. */
interface OwnMaps {
  json: string;
  parsed: Fields | null;
}

/** A map field of the parsed maps: the script's own object, {} when absent. */
function map(v: unknown): { [key: string]: unknown } {
  return isObj(v) && !isArray(v) ? v : {};
}

/** A string field of the parsed fields, `dflt` when absent. */
function text(v: unknown, dflt: string): string {
  return typeof v === 'string' ? v : dflt;
}

/** Each ctx -> its own maps (an object that inherits from a ctx reads that ctx's). */
var ownMaps: WeakMap<object, OwnMaps> = new WeakMapCtor();

function mapOf(self: unknown, key: 'headers' | 'cookies' | 'query'): unknown {
  for (var o = self; isObj(o); o = getPrototypeOf(o)) {
    var m = wmGet(ownMaps, o);
    if (m === undefined) continue;
    if (m.parsed === null) {
      var v = m.json !== '' ? jsonParse(m.json) : null;
      // (own fields only: nothing a script put on Object.prototype is read)
      m.parsed = { __proto__: null, headers: map(getOwn(v, 'headers')), cookies: map(getOwn(v, 'cookies')), query: map(getOwn(v, 'query')) } as Fields;
      m.json = '';
    }
    return m.parsed[key];
  }
  return undefined;
}

/** The accessor of one map field, shared by every ctx of the context (they find theirs in ownMaps). */
function lazyMap(key: 'headers' | 'cookies' | 'query'): Descriptor {
  return {
    __proto__: null,
    get: function (this: unknown) {
      return mapOf(this, key);
    },
    // an assignment makes it a data property of the object assigned to, as for a plain field
    set: function (this: unknown, v: unknown) {
      if (!isObj(this)) throw makeError('TypeError', 'Cannot set ' + key + ' on a primitive');
      setOwn(this, key, v);
    },
    enumerable: true,
    configurable: true,
  };
}
var HEADERS = lazyMap('headers');
var COOKIES = lazyMap('cookies');
var QUERY = lazyMap('query');

/** One descriptor for ctx.request and ctx.response, its value set just before each use. */
var READ_ONLY: Descriptor = { __proto__: null, value: undefined, writable: false, enumerable: true, configurable: false };

/** The JSON ctx's maps are parsed from: the stage's CtxMaps, else its whole snapshot. */
function mapsJsonOf(st: StageRecord): string {
  if (typeof st.mapsJson === 'string' && st.mapsJson !== '') return st.mapsJson;
  if (typeof st.requestJson === 'string' && st.requestJson !== '') return st.requestJson;
  return ''; // (no texts at all: ctx's maps are empty)
}

export function makeCtx(st: StageRecord) {
  // (the scalar fields are strings: ctx and the request API share the stage's one parse)
  var r = st.fields;
  // (an object literal defines its own properties: no setter of Object.prototype is called)
  var ctx = {
    getParts: () => copyArray(partsOf(st)),
    headers: undefined as unknown,
    cookies: undefined as unknown,
    query: undefined as unknown,
    body: r.body === undefined ? '' : r.body,
    url: text(r.url, ''),
    appId: text(r.appId, ''),
    path: text(r.path, ''),
    method: text(r.method, 'GET'),
  };
  defineProperty(ctx, 'headers', HEADERS);
  defineProperty(ctx, 'cookies', COOKIES);
  defineProperty(ctx, 'query', QUERY);
  wmSet(ownMaps, ctx, { json: mapsJsonOf(st), parsed: null });
  st.requestApi = makeRequest(st);
  st.responseApi = makeResponse(st);
  READ_ONLY.value = st.requestApi;
  defineProperty(ctx, 'request', READ_ONLY);
  READ_ONLY.value = st.responseApi;
  defineProperty(ctx, 'response', READ_ONLY);
  READ_ONLY.value = undefined;
  return ctx;
}
