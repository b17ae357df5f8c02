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
 * and a browser's headers and cookies are a kilobyte or more of JSON. body, when the stage was not
 * handed it, is such an accessor too: its first read asks the worker for it (after the stage's
 * end it throws, as ctx.getParts does). request and response are read-only and non-configurable.
 */
import { AFTER_END, type Descriptor, Str, copyArray, defineProperty, getOwn, getOwnDescriptor, getPrototypeOf, illegalState, isArray, isFrozen, isObj, jsonParse, objectCreate, setOwn, typeError } from './prelude';
import { bridge } from './host';
import { makeResponse } from './response';
import { makeRequest, partsOf } from './request';
import { snapField } from './entry';
import type { Fields, StageRecord } from './types';

/** Fields of a ctx read on first use: the stage they come from, their values once read. */
interface Holder {
  st: StageRecord;
  values: Fields | null;
}

/**
 * A hidden field a ctx holds its Holder in: a private field put on the object (a class whose base
 * constructor returns the object it is given), so the holder lives and dies with its ctx. (A
 * WeakMap entry would do as much, but QuickJS keeps the value of an entry whose key died until its
 * next cycle collection: with it the stage record and all it holds, about 2.4 KB a stage, which
 * would make that collection run every few hundred calls, over every context of its runtime.)
 */
interface HolderSlot {
  /** Puts holder `h` on ctx `o` (once per ctx). */
  put(o: object, h: Holder): void;
  /** The holder put on `o`, or undefined (any value, a proxy or a primitive included). */
  of(o: unknown): Holder | undefined;
}
/** The base of a slot's class: `super(o)` makes `o` the object the private field goes on. */
var Base = function (o: object) {
  return o;
} as unknown as new (o: object) => object;
function holderSlot(): HolderSlot {
  class Slot extends Base {
    #h: Holder;
    constructor(o: object, h: Holder) {
      super(o);
      this.#h = h;
    }
    static of(o: unknown): Holder | undefined {
      return isObj(o) && #h in o ? (o as Slot).#h : undefined;
    }
  }
  return { put: (o, h) => void new Slot(o, h), of: Slot.of };
}

/**
 * A group of such fields, read together on the first read of any: ctx's maps (headers, cookies,
 * query: one parse), and its body (asked of the worker).
 */
interface LazyGroup {
  keys: string[];
  /** Each ctx's holder (an object that inherits from a ctx reads that ctx's). */
  own: HolderSlot;
  load(h: Holder): Fields;
  /** The accessor of each field, shared by every ctx of the context (they find theirs in `own`). */
  lazy: { [key: string]: Descriptor };
}

/** A map field of the parsed maps: the script's own object, {} when absent. */
function map(v: unknown): { [key: string]: unknown } {
  return isObj(v) && !isArray(v) ? v : {};
}

/** A string field of the parsed fields, `dflt` when absent. */
function text(v: unknown, dflt: string): string {
  return typeof v === 'string' ? v : dflt;
}

/** The values of a group's fields, read on first use. */
function valuesOf(g: LazyGroup, h: Holder): Fields {
  if (h.values === null) h.values = g.load(h);
  return h.values;
}

/** The ctx `self` is or inherits from (the object with the group's fields of its own), or null. */
function ownerOf(g: LazyGroup, self: unknown): object | null {
  for (var o = self; isObj(o); o = getPrototypeOf(o)) if (g.own.of(o) !== undefined) return o;
  return null;
}

/**
 * Once read, a group's fields become plain data properties of their ctx, so that sealing,
 * freezing, redefining or copying ctx by its descriptors acts on the values. A field the script
 * redefined before the first read (sealed, frozen, made non-enumerable) stays an accessor; on a
 * sealed ctx an assigned value is held in the ctx's holder.
 */
function settle(g: LazyGroup, o: object, values: Fields): void {
  for (var i = 0; i < g.keys.length; i++) {
    var k = g.keys[i];
    var d = getOwnDescriptor(o, k);
    if (d !== undefined && d.get === g.lazy[k].get && d.configurable === true && d.enumerable === true) setOwn(o, k, values[k]);
  }
}

function lazyField(g: LazyGroup, key: string): Descriptor {
  return {
    __proto__: null,
    get: function (this: unknown) {
      var o = ownerOf(g, this);
      if (o === null) return undefined;
      var values = valuesOf(g, g.own.of(o)!);
      settle(g, o, values);
      return values[key];
    },
    // an assignment acts as on a plain writable field: a data property of the object assigned to
    set: function (this: unknown, v: unknown) {
      if (!isObj(this)) throw typeError('Cannot set ' + key + ' on a primitive');
      var o = ownerOf(g, this);
      // (a ctx frozen before the first read: its fields are read-only, also for objects inheriting from it)
      if (o !== null && isFrozen(o)) throw typeError("Cannot assign to read only property '" + key + "'");
      var d = getOwnDescriptor(this, key);
      if (d !== undefined && d.configurable !== true) {
        // sealed before the first read: the accessor stays and holds the value
        if (o !== this) throw typeError('Cannot redefine property: ' + key);
        valuesOf(g, g.own.of(o)!)[key] = v;
        return;
      }
      setOwn(this, key, v);
    },
    enumerable: true,
    configurable: true,
  };
}

function lazyGroup(keys: string[], load: (h: Holder) => Fields): LazyGroup {
  var g: LazyGroup = { keys: keys, own: holderSlot(), load: load, lazy: objectCreate(null) };
  for (var i = 0; i < keys.length; i++) g.lazy[keys[i]] = lazyField(g, keys[i]);
  return g;
}

/** headers, cookies and query: one parse of the stage's CtxMaps (else of its snapshot; '' for neither: empty maps). */
var MAPS = lazyGroup(['headers', 'cookies', 'query'], function (h) {
  var json = h.st.mapsJson || h.st.requestJson;
  var v = json ? jsonParse(json) : null;
  // (own fields only: nothing a script put on Object.prototype is read)
  return { __proto__: null, headers: map(getOwn(v, 'headers')), cookies: map(getOwn(v, 'cookies')), query: map(getOwn(v, 'query')) } as Fields;
});

/** body, asked of the worker (a text as it is): a stage that never reads it is not handed it. */
var BODY = lazyGroup(['body'], function (h) {
  // (as ctx.getParts: an ended stage has no request to read it from)
  if (h.st.done) throw illegalState('ctx.body' + AFTER_END);
  return { __proto__: null, body: Str(bridge(h.st, 'stage.body', null, false)) } as Fields;
});

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
    body: typeof st.body === 'string' ? st.body : st.body === null ? undefined : snapField(st, 'body', ''),
    url: text(r.url, ''),
    appId: text(r.appId, ''),
    path: text(r.path, ''),
    method: text(r.method, 'GET'),
  };
  defineProperty(ctx, 'headers', MAPS.lazy.headers);
  defineProperty(ctx, 'cookies', MAPS.lazy.cookies);
  defineProperty(ctx, 'query', MAPS.lazy.query);
  MAPS.own.put(ctx, { st: st, values: null });
  if (st.body === null) {
    defineProperty(ctx, 'body', BODY.lazy.body);
    BODY.own.put(ctx, { st: st, values: null });
  }
  st.requestApi = makeRequest(st);
  st.responseApi = makeResponse(st);
  READ_ONLY.value = st.requestApi;
  defineProperty(ctx, 'request', READ_ONLY);
  READ_ONLY.value = st.responseApi;
  defineProperty(ctx, 'response', READ_ONLY);
  READ_ONLY.value = undefined;
  return ctx;
}
