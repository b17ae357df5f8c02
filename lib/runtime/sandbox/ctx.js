/*
 * Sandbox adapter fragment: ctx (APIContext), the object passed to the tenant's function.
 *
 * Holds makeCtx(st) and endStage(st).
 *
 * ctx is a Proxy over a plain object, with one shared handler (CTX_TRAPS) and a small per-stage
 * record (`{ st, done, req, res }`, the handler the Proxy holds). Its fields (getParts, headers, cookies,
 * query, body, url, appId, path, method, request, response) are own, enumerable properties, as
 * in a plain object, but each is made when something first looks at it (read, write, `in`,
 * Object.keys, defineProperty, delete): a stage that never reads ctx.headers never parses or
 * copies them. Defining the eleven fields up front (as accessors) was ~3 µs of every stage in
 * QuickJS; a Proxy costs ~0.3 µs to make and ~0.2 µs per read.
 *
 * Once made, a field is an ordinary property of the target: headers, cookies and query are the
 * script's own copies; request and response are read-only and non-configurable. Object.keys(ctx)
 * lists the fields first, in the order above, then whatever the script added. Reading
 * ctx.request or ctx.response returns the stage's object without defining the field yet (a
 * defineProperty is ~0.25 µs in QuickJS); anything that looks at ctx's own properties defines it,
 * with that same object. After the stage ends, fields not made yet read as undefined, and
 * ctx.request / ctx.response read during the stage stay the objects they were.
 *
 * Expects from prelude.js: the captured builtins and helpers (setOwn, clonePlain, copyArray,
 * hasOwn, freeze, objectCreate, ProxyCtor, reflect*); from entry.js: snapField; from
 * request.js: makeRequest, partsOf; from response.js: makeResponse.
 */
var CTX_FIELDS = ['getParts', 'headers', 'cookies', 'query', 'body', 'url', 'appId', 'path', 'method', 'request', 'response'];
/** field name -> its bit in the record's `done` mask */
var CTX_BIT = objectCreate(null);
for (var ctxI = 0; ctxI < CTX_FIELDS.length; ctxI++) CTX_BIT[CTX_FIELDS[ctxI]] = 1 << ctxI;
var CTX_ALL = (1 << CTX_FIELDS.length) - 1;
/** The descriptor of ctx.request / ctx.response, reused as setOwn's is (see OWN_DESC). */
var CTX_API_DESC = { __proto__: null, value: undefined, writable: false, enumerable: true, configurable: false };

/** The value of a field for the stage `st` (null once the stage has ended: undefined). */
function ctxValue(st, k) {
  if (st === null) return undefined;
  switch (k) {
    case 'getParts':
      return () => copyArray(partsOf(st));
    case 'headers':
    case 'cookies':
    case 'query':
      var map = snapField(st, k, undefined);
      return map === undefined ? {} : clonePlain(map);
    case 'request':
      return st.requestApi || (st.requestApi = makeRequest(st));
    case 'response':
      return st.responseApi || (st.responseApi = makeResponse(st));
    case 'body':
    case 'url':
    case 'appId':
    case 'path':
      return snapField(st, k, '');
    case 'method':
      return snapField(st, k, 'GET');
  }
  return undefined;
}

/** Makes field `k` of the target `t` unless it was made (or deleted) already. */
function ctxFill(rec, t, k) {
  var b = typeof k === 'string' ? CTX_BIT[k] : undefined;
  if (b === undefined || (rec.done & b) !== 0) return;
  rec.done |= b;
  if (hasOwn(t, k)) return;
  var v = k === 'request' && rec.req !== null ? rec.req : k === 'response' && rec.res !== null ? rec.res : ctxValue(rec.st, k);
  if (k === 'request' || k === 'response') {
    CTX_API_DESC.value = v;
    defineProperty(t, k, CTX_API_DESC);
    CTX_API_DESC.value = undefined;
  } else {
    setOwn(t, k, v);
  }
}
function ctxFillAll(rec, t) {
  for (var i = 0; rec.done !== CTX_ALL && i < CTX_FIELDS.length; i++) ctxFill(rec, t, CTX_FIELDS[i]);
}

/** The traps. `this` is the ctx's record { st, done, req, res }; the Proxy's target holds the made fields. */
var CTX_TRAPS = freeze({
  __proto__: null,
  get: function (t, k, r) {
    if (this.done !== CTX_ALL) {
      // ctx.request / ctx.response, read and not made yet: the stage's object, without defining
      // it on the target (defineProperty is ~0.25 µs in QuickJS); anything that looks at the
      // target's own properties defines it first (ctxFill), with the same object
      if (k === 'request' || k === 'response') {
        var api = k === 'request' ? this.req : this.res;
        if (api !== null && (this.done & CTX_BIT[k]) === 0) return api;
        if (api === null && (this.done & CTX_BIT[k]) === 0 && this.st !== null) {
          api = ctxValue(this.st, k);
          if (k === 'request') this.req = api;
          else this.res = api;
          return api;
        }
      }
      ctxFill(this, t, k);
    }
    return reflectGet(t, k, r);
  },
  /** Writing a field the script has not read replaces it without making it first. */
  set: function (t, k, v, r) {
    var b = this.done !== CTX_ALL && typeof k === 'string' ? CTX_BIT[k] : undefined;
    if (b !== undefined && (this.done & b) === 0) {
      if (k === 'request' || k === 'response') ctxFill(this, t, k);
      else this.done |= b;
    }
    return reflectSet(t, k, v, r);
  },
  has: function (t, k) {
    var b = typeof k === 'string' ? CTX_BIT[k] : undefined;
    return (b !== undefined && (this.done & b) === 0) || reflectHas(t, k);
  },
  defineProperty: function (t, k, d) {
    ctxFill(this, t, k);
    return reflectDefineProperty(t, k, d);
  },
  deleteProperty: function (t, k) {
    ctxFill(this, t, k);
    return reflectDeleteProperty(t, k);
  },
  getOwnPropertyDescriptor: function (t, k) {
    ctxFill(this, t, k);
    return reflectGetOwnPropertyDescriptor(t, k);
  },
  /** The fields first, in their order, then the script's own keys. */
  ownKeys: function (t) {
    ctxFillAll(this, t);
    var keys = reflectOwnKeys(t);
    var out = [];
    var i;
    for (i = 0; i < CTX_FIELDS.length; i++) if (hasOwn(t, CTX_FIELDS[i])) push(out, CTX_FIELDS[i]);
    for (i = 0; i < keys.length; i++) if (typeof keys[i] !== 'string' || CTX_BIT[keys[i]] === undefined) push(out, keys[i]);
    return out;
  },
  preventExtensions: function (t) {
    ctxFillAll(this, t);
    return reflectPreventExtensions(t);
  },
});

/**
 * Where there is no Proxy (vm2 removes it from its sandboxes), ctx is a plain object whose
 * fields are accessors, defined from one shared table (CTX_PROPS), that make the field on first
 * use in the same way. ctxRecs maps such a ctx to its record.
 */
var ctxRecs = new WeakMapCtor();
function ctxAccessor(k) {
  var api = k === 'request' || k === 'response';
  return {
    __proto__: null,
    get: function () {
      var rec = wmGet(ctxRecs, this);
      if (rec === undefined) return undefined;
      // request / response: made once per stage, and kept, as under QuickJS (see CTX_TRAPS.get)
      var kept = k === 'request' ? rec.req : k === 'response' ? rec.res : null;
      if (kept !== null) return kept;
      if (rec.st === null) return undefined;
      var v = ctxValue(rec.st, k);
      if (k === 'request') rec.req = v;
      else if (k === 'response') rec.res = v;
      if (!api) {
        try {
          setOwn(this, k, v); // from now on a data property
        } catch (e) {
          // a frozen ctx keeps its accessors: each read makes the value again
        }
      }
      return v;
    },
    set: api
      ? undefined
      : function (v) {
          setOwn(this, k, v);
        },
    enumerable: true,
    configurable: !api,
  };
}
var CTX_PROPS = objectCreate(null);
for (ctxI = 1; ctxI < CTX_FIELDS.length; ctxI++) CTX_PROPS[CTX_FIELDS[ctxI]] = ctxAccessor(CTX_FIELDS[ctxI]);

function makeCtx(st) {
  // req / res: ctx.request / ctx.response once read through the get trap (see CTX_TRAPS.get)
  var rec = { __proto__: CTX_TRAPS, st: st, done: 0, req: null, res: null };
  st.ctx = rec;
  if (ProxyCtor !== undefined) return new ProxyCtor({}, rec);
  var ctx = {};
  ctxFill(rec, ctx, 'getParts');
  wmSet(ctxRecs, ctx, rec);
  defineProperties(ctx, CTX_PROPS);
  return ctx;
}
/** The stage is over: its ctx no longer leads to it (its request and response objects refuse to act: reqRec, resStage). */
function endStage(st) {
  if (st.ctx !== null) st.ctx.st = null;
}
