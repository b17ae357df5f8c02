/*
 * scriptable-api sandbox adapter: prelude (the first fragment) and the adapter contract.
 *
 * The adapter, put together by lib/runtime/adapter-source.ts, is a classic script (not a module,
 * not TypeScript) that the engines (QuickJS through quickjs-emscripten, V8 through vm2) evaluate
 * once in each sandbox context, BEFORE the tenant's script module. It is the only code between
 * the tenant script and the host. Its contract is lib/runtime/protocol.ts (StageHead, StageCall,
 * StageOutput, RequestSnapshot, ResponseState, CarriedState, SerializedOutput, ThrownError,
 * HostOp).
 *
 * It finds:
 *   globalThis.__host(op, argsJson) -> '{"ok":true,"value":...}' | '{"ok":false,"error":{name,message,code}}'
 *     The one synchronous bridge to the host. Captured in prelude.js, then deleted from the
 *     global object so tenant code never sees it.
 *   globalThis.__saEngine (optional): 'quickjs' when QuickJS runs the adapter, so its per-stage
 *     records are laid out for QuickJS's object model (see IS_QUICKJS). Deleted as __host is.
 *
 * It defines:
 *   globalThis.__sa = { invoke(fn, headJson, requestJson, attributesJson, responseJson, valueJson),
 *                       collect(), run(fn, headJson, requestJson, attributesJson, responseJson, valueJson) }
 *             (non-writable/enumerable/configurable, frozen)
 *     invoke  parses the StageHead, builds a fresh ctx (APIContext; the request, attributes and
 *             response JSON are parsed when first used) and calls fn(ctx) for 'before' /
 *             'call', fn(ctx, result) for 'after', fn(ctx, apiError) for 'onError' (result and
 *             apiError from valueJson, parsed afresh for each stage). A thenable
 *             result is followed with then-handlers. Returns true when the stage settled.
 *     collect (after the engine drained its job queue) returns the StageOutput JSON string:
 *             status pending | value | error, the value serialized for the API's return type
 *             (`output`), the ThrownError, and the attributes / response when the stage
 *             touched them (absent = unchanged).
 *     run     invoke, then collect when the stage settled synchronously: the StageOutput JSON,
 *             or '' when the stage waits on a promise (drain the job queue, then collect()).
 *             The engine may pass the same head and request texts again (a cached string):
 *             the adapter reuses what it parsed for them.
 *   globalThis.platform   (non-writable, deeply frozen)
 *     app.abort(message[, status])  system.getAccountByToken(token)  utils.toJSON(value)
 *     utils.stringToBytes(string[, charset])  http.request({url, method, headers, body, timeoutMs})
 *   globalThis.console = { log, info, warn, error, debug }  -> host op 'console'
 *
 * It must run on QuickJS (ES2023 but no TextEncoder/TextDecoder, Buffer, atob/btoa, setTimeout,
 * URL) and on V8: UTF-8 and base64 are done by hand and no host API is used.
 *
 * Hardening: tenant code runs in this realm after us, and a context serves later requests of the
 * same app. So every builtin used here is captured at load time (methods are "uncurried" through
 * a bound Function.prototype.call), internal objects are built as literals or with
 * defineProperty and null-prototype descriptors (no inherited setter can intercept them), input
 * objects are read through hasOwnProperty, adapter JSON is written by `enc`, which never calls
 * toJSON, and no array/string prototype method, iterator protocol or split() is used; regexes
 * only through the captured RegExp.prototype.exec, on the adapter's own regex literals.
 * A script that replaces JSON.stringify, Array.prototype.push, String.prototype.toLowerCase or
 * adds Object.prototype.toJSON breaks its own code, not the adapter.
 *
 * Servlet details worth knowing (the tests pin them):
 *   - the default response character encoding is UTF-8 (a servlet container says ISO-8859-1);
 *   - getWriter() and getOutputStream() may both be used; chunks keep their order;
 *   - Writer.write(int) writes one character and OutputStream.write(int) one byte (Java);
 *     OutputStream.write(string) / print / println write UTF-8 (println ends with CRLF);
 *   - setHeader/addHeader('Content-Type') go through setContentType, 'Content-Length' sets
 *     ResponseState.contentLength;
 *   - writes after sendError/sendRedirect are dropped (Tomcat suspends the response);
 *   - buffered text is counted as UTF-8 bytes (ISO-8859-1 / US-ASCII: one byte per char).
 *
 * The adapter is split into FRAGMENTS in this folder, concatenated in a fixed order
 * (ADAPTER_FILES in lib/runtime/adapter-source.ts) inside one strict-mode IIFE:
 *   prelude, encoding, host, enumeration, response-state, response-helpers, response,
 *   request-snapshot, request, ctx, serialize, platform, console, entry.
 * They share that one closure scope: a fragment is not a script of its own, and declares no
 * globals. Function declarations are hoisted across fragments; top-level statements run in
 * that order at load time.
 *
 * This fragment holds the captured builtins and constants, the capture (and removal) of
 * globalThis.__host as hostFn, the small safe helpers and the error constructors. It expects
 * nothing: it runs first, before any other adapter code and before any tenant code.
 */
var G = globalThis;

// ---------------------------------------------------------------------------------------------
// Captured builtins
// ---------------------------------------------------------------------------------------------
var FnProto = Function.prototype;
/** uncurry(String.prototype.slice)(s, 1, 2) is s.slice(1, 2), immune to later patching. */
var uncurry = FnProto.bind.bind(FnProto.call);
var fnApply = uncurry(FnProto.apply);
var defineProperty = Object.defineProperty;
var freeze = Object.freeze;
var objectKeys = Object.keys;
var objectCreate = Object.create;
var getPrototypeOf = Object.getPrototypeOf;
var setPrototypeOf = Object.setPrototypeOf;
var defineProperties = Object.defineProperties;
var hasOwn = uncurry(Object.prototype.hasOwnProperty);
var objToString = uncurry(Object.prototype.toString);
var isArray = Array.isArray;
var jsonStringify = JSON.stringify;
var jsonParse = JSON.parse;
var Str = String;
var Num = Number;
var fromCharCode = String.fromCharCode;
var charCodeAt = uncurry(String.prototype.charCodeAt);
var indexOf = uncurry(String.prototype.indexOf);
var strSlice = uncurry(String.prototype.slice);
var startsWith = uncurry(String.prototype.startsWith);
var toLowerCase = uncurry(String.prototype.toLowerCase);
var toUpperCase = uncurry(String.prototype.toUpperCase);
var trim = uncurry(String.prototype.trim);
var toFixed = uncurry(Number.prototype.toFixed);
var mathTrunc = Math.trunc;
var mathMax = Math.max;
var mathMin = Math.min;
var ErrorCtor = Error;
var DateCtor = Date;
var DateProto = Date.prototype;
var getTime = uncurry(DateProto.getTime);
var toISOString = uncurry(DateProto.toISOString);
var getUTCDay = uncurry(DateProto.getUTCDay);
var getUTCDate = uncurry(DateProto.getUTCDate);
var getUTCMonth = uncurry(DateProto.getUTCMonth);
var getUTCFullYear = uncurry(DateProto.getUTCFullYear);
var getUTCHours = uncurry(DateProto.getUTCHours);
var getUTCMinutes = uncurry(DateProto.getUTCMinutes);
var getUTCSeconds = uncurry(DateProto.getUTCSeconds);
var PromiseCtor = Promise;
var WeakMapCtor = WeakMap;
/** undefined under vm2, which removes Proxy from its sandboxes (ctx.js then uses accessors). */
var ProxyCtor = typeof Proxy === 'function' ? Proxy : undefined;
var reflectGet = Reflect.get;
var reflectSet = Reflect.set;
var reflectHas = Reflect.has;
var reflectDefineProperty = Reflect.defineProperty;
var reflectDeleteProperty = Reflect.deleteProperty;
var reflectGetOwnPropertyDescriptor = Reflect.getOwnPropertyDescriptor;
var reflectOwnKeys = Reflect.ownKeys;
var reflectPreventExtensions = Reflect.preventExtensions;
var wmGet = uncurry(WeakMap.prototype.get);
var wmSet = uncurry(WeakMap.prototype.set);
/** Only ever called on the adapter's own regex literals, which no script can reach. */
var reExec = uncurry(RegExp.prototype.exec);
var promiseThen = uncurry(Promise.prototype.then);
var SymIterator = Symbol.iterator;
var U8 = typeof Uint8Array === 'function' ? Uint8Array : undefined;

var ABORT_CODE = 270001;
var CONSOLE_CAP = 8192;

// ---------------------------------------------------------------------------------------------
// The host bridge: capture it, then remove it from the global object
// ---------------------------------------------------------------------------------------------
var hostFn = G.__host;
if (typeof hostFn !== 'function') throw new ErrorCtor('adapter: globalThis.__host is missing');
try {
  delete G.__host;
} catch (e) {
  /* checked just below */
}
if (hasOwn(G, '__host') || G.__host !== undefined) throw new ErrorCtor('adapter: could not hide globalThis.__host');
/**
 * QuickJS defines each field of an object literal one by one (~55 ns a field: a 22-field record
 * costs 1.2 µs, an array of 22 0.15), so its per-stage records hold only the fields every stage
 * sets and read the rest from a prototype of defaults. V8 is the other way round: a record whose
 * fields come from its prototype until written cost vm2 ~8 µs a stage, so there every field is
 * an own one from the start.
 */
var IS_QUICKJS = G.__saEngine === 'quickjs';
if (hasOwn(G, '__saEngine')) delete G.__saEngine;

// ---------------------------------------------------------------------------------------------
// Small safe helpers
// ---------------------------------------------------------------------------------------------
/**
 * The descriptor setOwn passes, reused: defineProperty reads it before anything else can run
 * (even a Proxy's trap gets a copy), and its value is cleared after, so it holds nothing. A new
 * descriptor literal per call was ~0.3 µs of every setOwn in QuickJS.
 */
var OWN_DESC = { __proto__: null, value: undefined, writable: true, enumerable: true, configurable: true };
/** Defines an own data property: no inherited setter can intercept it. */
function setOwn(o, k, v) {
  OWN_DESC.value = v;
  try {
    defineProperty(o, k, OWN_DESC);
  } finally {
    OWN_DESC.value = undefined;
  }
  return o;
}
function push(a, v) {
  setOwn(a, a.length, v);
}
/** Own property or undefined (never an inherited one such as 'toString'). */
function getOwn(o, k) {
  return o !== null && o !== undefined && hasOwn(o, k) ? o[k] : undefined;
}
function isObj(v) {
  return v !== null && (typeof v === 'object' || typeof v === 'function');
}
function isNil(v) {
  return v === null || v === undefined;
}
function copyArray(a) {
  var out = [];
  for (var i = 0; i < a.length; i++) push(out, a[i]);
  return out;
}
function safeString(v) {
  try {
    return Str(v);
  } catch (e) {
    return '[object]';
  }
}
/** Java-ish string conversion: null / undefined print as 'null'. */
function jstr(v) {
  return isNil(v) ? 'null' : Str(v);
}
/**
 * A cache of what make(name) returns, for the few names scripts use again and again (header and
 * attribute names): make runs once per name (a throw caches nothing), and the cache is emptied
 * when it holds `max` names. Any string is just a key of its null-prototype map.
 */
function nameCache(max, make) {
  var map = objectCreate(null);
  var count = 0;
  return function (name) {
    var v = map[name];
    if (v === undefined) {
      v = make(name);
      if (count >= max) {
        map = objectCreate(null);
        count = 0;
      }
      map[name] = v;
      count++;
    }
    return v;
  };
}
function lower(s) {
  return toLowerCase(Str(s));
}
function toInt(v) {
  var n = Num(v);
  return n === n ? mathTrunc(n) : NaN;
}
/** Splits on a one-character separator (String.prototype.split would consult Symbol.split). */
function splitOn(s, sep) {
  var out = [];
  for (var from = 0; ; ) {
    var at = indexOf(s, sep, from);
    push(out, at < 0 ? strSlice(s, from) : strSlice(s, from, at));
    if (at < 0) return out;
    from = at + 1;
  }
}
/** Deep copy of JSON data (as JSON.parse made it) into ordinary objects and arrays. */
function clonePlain(v) {
  if (!isObj(v)) return v;
  var i;
  var out = isArray(v) ? [] : {};
  if (isArray(v)) for (i = 0; i < v.length; i++) push(out, clonePlain(v[i]));
  else for (var keys = objectKeys(v), j = 0; j < keys.length; j++) setOwn(out, keys[j], clonePlain(v[keys[j]]));
  return out;
}
/** Distinct keys of several objects, in order. */
function unionKeys(a, b) {
  var out = [];
  var seen = objectCreate(null);
  var lists = [objectKeys(a), objectKeys(b)];
  for (var s = 0; s < 2; s++) {
    for (var i = 0; i < lists[s].length; i++) {
      var k = lists[s][i];
      if (seen[k] === true) continue;
      seen[k] = true;
      push(out, k);
    }
  }
  return out;
}
function makeError(name, message, code, status) {
  var e = new ErrorCtor(message);
  defineProperty(e, 'name', { __proto__: null, value: name, writable: true, enumerable: false, configurable: true });
  if (code !== undefined) setOwn(e, 'code', code);
  if (status !== undefined) setOwn(e, 'status', status);
  return e;
}
function illegalState(message) {
  return makeError('IllegalStateException', message);
}
function illegalArgument(message) {
  return makeError('IllegalArgumentException', message);
}
