/*
 * Sandbox adapter module: ctx (APIContext), the object passed to the tenant's function.
 *
 * Holds makeCtx(st): a plain object with the spec's fields, in this order: getParts, headers,
 * cookies, query, body, url, appId, path, method, request, response. Built fresh for every stage.
 * headers, cookies and query are the script's own objects (writable, deletable: they come from a
 * parse of the stage's CtxMaps of their own, so the request API, which reads its own parse, never
 * sees a change made to them). That parse happens when the script first reads one of them: the
 * three are accessors (enumerable, configurable) until then; the first read makes all three, and
 * an assignment makes that one, plain data properties (see settle); most scripts never read them,
 * and a browser's headers and cookies are a
 * kilobyte or more of JSON. request and response are read-only and non-configurable.
 */
import { AFTER_END, type Descriptor, WeakMapCtor, copyArray, defineProperty, getOwn, getOwnDescriptor, getPrototypeOf, illegalState, isArray, isFrozen, isObj, jsonParse, setOwn, typeError, wmGet, wmSet } from './prelude';
import { makeResponse } from './response';
import { makeRequest, partsOf } from './request';
import { snapField } from './entry';
import type { Fields, StageRecord } from './types';

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

/** The parse of a ctx's maps, made on first use. */
function parsedOf(m: OwnMaps): Fields {
  if (m.parsed === null) {
    var v = m.json !== '' ? jsonParse(m.json) : null;
    // (own fields only: nothing a script put on Object.prototype is read)
    m.parsed = { __proto__: null, headers: map(getOwn(v, 'headers')), cookies: map(getOwn(v, 'cookies')), query: map(getOwn(v, 'query')) } as Fields;
    m.json = '';
  }
  return m.parsed;
}

/** The ctx `self` is or inherits from (the object with maps of its own), or null. */
function ownerOf(self: unknown): object | null {
  for (var o = self; isObj(o); o = getPrototypeOf(o)) if (wmGet(ownMaps, o) !== undefined) return o;
  return null;
}

type MapKey = 'headers' | 'cookies' | 'query';
var MAP_KEYS: MapKey[] = ['headers', 'cookies', 'query'];
/** The accessor of each map field, shared by every ctx of the context (they find theirs in ownMaps). */
var LAZY: { [k in MapKey]: Descriptor } = { __proto__: null } as unknown as { [k in MapKey]: Descriptor };

/**
 * Once read, the three fields become plain data properties of their ctx, so that sealing,
 * freezing, redefining or copying ctx by its descriptors acts on the values. A field the script
 * redefined before the first read (sealed, frozen, made non-enumerable) stays an accessor; on a
 * sealed ctx an assigned value is held in the ctx's maps.
 */
function settle(o: object, fields: Fields): void {
  for (var i = 0; i < MAP_KEYS.length; i++) {
    var k = MAP_KEYS[i];
    var d = getOwnDescriptor(o, k);
    if (d !== undefined && d.get === LAZY[k].get && d.configurable === true && d.enumerable === true) setOwn(o, k, fields[k]);
  }
}

function lazyMap(key: MapKey): Descriptor {
  return {
    __proto__: null,
    get: function (this: unknown) {
      var o = ownerOf(this);
      if (o === null) return undefined;
      var fields = parsedOf(wmGet(ownMaps, o) as OwnMaps);
      settle(o, fields);
      return fields[key];
    },
    // an assignment acts as on a plain writable field: a data property of the object assigned to
    set: function (this: unknown, v: unknown) {
      if (!isObj(this)) throw typeError('Cannot set ' + key + ' on a primitive');
      var o = ownerOf(this);
      // (a ctx frozen before the first read: its fields are read-only, also for objects inheriting from it)
      if (o !== null && isFrozen(o)) throw typeError("Cannot assign to read only property '" + key + "'");
      var d = getOwnDescriptor(this, key);
      if (d !== undefined && d.configurable !== true) {
        // sealed before the first read: the accessor stays and holds the value
        if (o !== this) throw typeError('Cannot redefine property: ' + key);
        parsedOf(wmGet(ownMaps, o) as OwnMaps)[key] = v;
        return;
      }
      setOwn(this, key, v);
    },
    enumerable: true,
    configurable: true,
  };
}
for (var i = 0; i < MAP_KEYS.length; i++) LAZY[MAP_KEYS[i]] = lazyMap(MAP_KEYS[i]);

/** One descriptor for ctx.request and ctx.response, its value set just before each use. */
var READ_ONLY: Descriptor = { __proto__: null, value: undefined, writable: false, enumerable: true, configurable: false };

export function makeCtx(st: StageRecord) {
  // (the scalar fields are strings: ctx and the request API share the stage's one parse)
  var r = st.fields;
  // (an object literal defines its own properties: no setter of Object.prototype is called)
  var ctx = {
    getParts: () => {
      // (as ctx.request.getParts: an ended stage has no request to read them from)
      if (st.done) throw illegalState('ctx.getParts' + AFTER_END);
      return copyArray(partsOf(st));
    },
    headers: undefined as unknown,
    cookies: undefined as unknown,
    query: undefined as unknown,
    body: st.body !== undefined ? st.body : snapField(st, 'body', ''),
    url: text(r.url, ''),
    appId: text(r.appId, ''),
    path: text(r.path, ''),
    method: text(r.method, 'GET'),
  };
  defineProperty(ctx, 'headers', LAZY.headers);
  defineProperty(ctx, 'cookies', LAZY.cookies);
  defineProperty(ctx, 'query', LAZY.query);
  // (the JSON they are parsed from: the stage's CtxMaps, else its whole snapshot; '' for neither: empty maps)
  wmSet(ownMaps, ctx, { json: st.mapsJson || st.requestJson, parsed: null });
  st.requestApi = makeRequest(st);
  st.responseApi = makeResponse(st);
  READ_ONLY.value = st.requestApi;
  defineProperty(ctx, 'request', READ_ONLY);
  READ_ONLY.value = st.responseApi;
  defineProperty(ctx, 'response', READ_ONLY);
  READ_ONLY.value = undefined;
  return ctx;
}
