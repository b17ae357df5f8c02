/*
 * scriptable-api sandbox adapter: prelude (the first module evaluated) and the adapter's contract.
 *
 * The adapter (these modules, bundled by scripts/build.js from entry.ts; read by
 * lib/runtime/adapter-source.ts) is the only code between a tenant script and the host. Its
 * source is ONE function expression, `(function (hostFn) { ... })`,
 * that each engine evaluates once per sandbox context, before the tenant's module, and calls
 * with the host bridge. It returns the entry object the engine drives (frozen); nothing of it
 * is ever put on the global object, so tenant code cannot reach it. Data shapes:
 * lib/runtime/protocol.ts (StageHead, RequestSnapshot, ResponseState, StageOutput, ...).
 *
 *   hostFn(stageId, op, argsJson, async)
 *     async false: runs the host operation and returns its reply JSON
 *       '{"ok":true,"value":...}' | '{"ok":false,"error":{name,message,code}}'
 *     async true: starts it and returns a call id (a number); the reply comes later through
 *       entry.reply(callId, replyJson).
 *
 *   entry.start(stageId, ns, fnName, headJson, requestJson, attributesJson, responseJson, valueJson, ctxJson, mapsJson, body, bodyJson, chunksJson)
 *     builds a fresh ctx and calls ns[fnName](ctx[, value]) for one stage; many stages may be in
 *     flight in one context at once, each with its own record. `ns` is the module namespace, or
 *     (a context of several modules) the namespaces by module, StageHead.module naming the
 *     stage's. headJson is the StageHead: its `next` lists the stages the adapter may run on to
 *     (chain.ts), each a function of a module of the context, in the same record's place (the
 *     stage id stays; host calls of the k-th stage run on to pass stageId + k). The
 *     RequestSnapshot, the attributes and the ResponseState, JSON texts, are parsed on first use
 *     (responseJson '': the response as it starts; requestJson '': the snapshot is asked of the
 *     host, hostFn(stageId, 'stage.request', 'null', false) -> its JSON, 'null' for none).
 *     valueJson is the second argument (after: the call's result, '' = undefined; onError: the
 *     API error). ctxJson holds the snapshot's CtxFields and mapsJson its CtxMaps ('' or absent:
 *     read from requestJson): a stage parses the maps only if it reads them, and the rest of the
 *     snapshot only if it uses the request API for it. body is the request body as it is, not
 *     JSON, or null: asked of the host when the script first reads ctx.body,
 *     hostFn(stageId, 'stage.body', 'null', false) -> the text as it is (the host then never
 *     holds a NUL in it: QuickJS ends a text at its first NUL); bodyJson, in its place, the body
 *     as a JSON string (a text the engine cannot take as it is); both absent: read from
 *     requestJson.
 *     chunksJson holds the response body's chunks (BodyChunk[]) when responseJson has none: they
 *     are parsed only when the stage writes to the body or clears it.
 *   entry.reply(callId, replyJson)   settles the promise of an async host call.
 *   entry.drain()                    after the engine ran the context's pending jobs: the
 *     StageOutputs of the stages that settled since the last drain, and how many async host
 *     calls the context still waits for: '{"waiting":N,"outputs":[{"id":..,"status":..},..]}';
 *     `"more":true` when stages went on to the next of their chain in it: drain again once the
 *     pending jobs ran.
 *   entry.cancel(stageId)            forgets a stage (its call timed out): its pending host calls
 *     are dropped and its ctx stops leading to it.
 *   entry.at(stageId)                where a stage in flight is in its chain, and the state the
 *     stages before it left: '{"at":N,"attributes":..,"response":..}' ('' for none in flight).
 *     Runs no script code (safe after an interrupt).
 *
 * It defines globalThis.platform (non-writable, deeply frozen) and globalThis.console.
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
 * The modules are bundled into the function's one closure scope and declare no globals (the
 * bundle has no helpers of its own: nothing is lowered, and only entry.ts is an entry point, its
 * exports dropped by the IIFE format). Their top-level statements run in import order, this module first: it
 * holds the captured builtins, the small safe helpers and the error constructors. `hostFn` is the
 * wrapper's parameter (globals.d.ts).
 */

if (typeof hostFn !== 'function') throw new Error('adapter: the host bridge is missing');
/** The global object, with the names the adapter defines on it (platform, console). */
export var G: typeof globalThis & { [name: string]: unknown } = globalThis;

// ---------------------------------------------------------------------------------------------
// Captured builtins
// ---------------------------------------------------------------------------------------------
var FnProto = Function.prototype;
/** uncurry(StrProto.slice)(s, 1, 2) is s.slice(1, 2), immune to later patching. */
var uncurry: <F extends (...args: any[]) => any>(fn: F) => (self: any, ...args: Parameters<F>) => ReturnType<F> = FnProto.bind.bind(FnProto.call);
export var fnApply: (fn: Function, self: unknown, args: ArrayLike<unknown>) => any = uncurry(FnProto.apply);
/** A descriptor with a null prototype (`__proto__: null`), so no inherited getter or setter can change it. */
export type Descriptor = PropertyDescriptor & { __proto__?: null };
var ObjectCtor = Object;
var ObjectProto = ObjectCtor.prototype;
export var defineProperty: (o: any, key: PropertyKey, descriptor: Descriptor) => any = ObjectCtor.defineProperty;
export var freeze = ObjectCtor.freeze;
export var isFrozen = ObjectCtor.isFrozen;
export var getOwnDescriptor: (o: any, key: PropertyKey) => PropertyDescriptor | undefined = ObjectCtor.getOwnPropertyDescriptor;
export var objectKeys = ObjectCtor.keys;
export var objectCreate = ObjectCtor.create;
export var setPrototypeOf = ObjectCtor.setPrototypeOf;
export var getPrototypeOf = ObjectCtor.getPrototypeOf;
export var hasOwn: (o: unknown, k: PropertyKey) => boolean = uncurry(ObjectProto.hasOwnProperty);
export var objToString: (o: unknown) => string = uncurry(ObjectProto.toString);
export var arrJoin: (a: unknown[], sep: string) => string = uncurry(Array.prototype.join);
export var isArray = Array.isArray;
export var jsonStringify = JSON.stringify;
export var jsonParse = JSON.parse;
export var Str = String;
export var Num = Number;
export var fromCharCode = Str.fromCharCode;
var StrProto = Str.prototype;
export var charCodeAt: (s: string, i: number) => number = uncurry(StrProto.charCodeAt);
export var indexOf: (s: string, search: string, from?: number) => number = uncurry(StrProto.indexOf);
export var strSlice: (s: string, start?: number, end?: number) => string = uncurry(StrProto.slice);
export var toLowerCase: (s: string) => string = uncurry(StrProto.toLowerCase);
export var toUpperCase: (s: string) => string = uncurry(StrProto.toUpperCase);
export var trim: (s: string) => string = uncurry(StrProto.trim);
export var toFixed: (n: number, digits?: number) => string = uncurry(Num.prototype.toFixed);
export var mathTrunc = Math.trunc;
export var mathMax = Math.max;
export var mathMin = Math.min;
export var ErrorCtor = Error;
export var DateCtor = Date;
var DateProto = Date.prototype;
export var getTime: (d: unknown) => number = uncurry(DateProto.getTime);
export var toISOString: (d: unknown) => string = uncurry(DateProto.toISOString);
export var getUTCDay: (d: Date) => number = uncurry(DateProto.getUTCDay);
export var getUTCDate: (d: Date) => number = uncurry(DateProto.getUTCDate);
export var getUTCMonth: (d: Date) => number = uncurry(DateProto.getUTCMonth);
export var getUTCFullYear: (d: Date) => number = uncurry(DateProto.getUTCFullYear);
export var getUTCHours: (d: Date) => number = uncurry(DateProto.getUTCHours);
export var getUTCMinutes: (d: Date) => number = uncurry(DateProto.getUTCMinutes);
export var getUTCSeconds: (d: Date) => number = uncurry(DateProto.getUTCSeconds);
export var PromiseCtor = Promise;
export var WeakMapCtor = WeakMap;
export var wmGet: <V>(wm: WeakMap<object, V>, key: object) => V | undefined = uncurry(WeakMapCtor.prototype.get);
export var wmSet: <V>(wm: WeakMap<object, V>, key: object, value: V) => unknown = uncurry(WeakMapCtor.prototype.set);
/** Only ever called on the adapter's own regex literals, which no script can reach. */
export var reExec: (re: RegExp, s: string) => RegExpExecArray | null = uncurry(RegExp.prototype.exec);
export var promiseThen: (p: unknown, onValue?: (v: any) => unknown, onError?: (e: unknown) => unknown) => Promise<unknown> = uncurry(PromiseCtor.prototype.then);
export var SymIterator = Symbol.iterator;
export var SymToPrimitive = Symbol.toPrimitive;
export var U8 = Uint8Array;
/** Getters of an ArrayBuffer's and a view's extent, captured: each throws for anything but its own kind (no look-alike passes). */
function getter(proto: object, key: string): (self: unknown) => any {
  return uncurry(getOwnDescriptor(proto, key)!.get!);
}
var TypedArrayProto: object = getPrototypeOf(U8.prototype);
var DataViewProto = DataView.prototype;
export var abByteLength = getter(ArrayBuffer.prototype, 'byteLength');
export var taBuffer = getter(TypedArrayProto, 'buffer');
export var taByteOffset = getter(TypedArrayProto, 'byteOffset');
export var taByteLength = getter(TypedArrayProto, 'byteLength');
export var taLength = getter(TypedArrayProto, 'length');
export var TypedArrayPrototype = TypedArrayProto as { [name: string]: unknown };
export var dvBuffer = getter(DataViewProto, 'buffer');
export var dvByteOffset = getter(DataViewProto, 'byteOffset');
export var dvByteLength = getter(DataViewProto, 'byteLength');

export var ABORT_CODE = 270001;
/** ERRORS.ABORTED's message (lib/errors.ts): an abort without a message, as an automation's abort step answers it. */
export var ABORT_MESSAGE = 'The call was aborted';
export var CONSOLE_CAP = 8192;
/** Most response headers a script may set (lib/response/framing.ts MAX_RESPONSE_HEADERS: the host refuses more). */
export var MAX_HEADERS = 1000;
/** Most characters of a script's response headers together: names, values, content type and charset (lib/response/framing.ts MAX_RESPONSE_HEAD_CHARS: the host refuses more). */
export var MAX_HEAD_CHARS = 65536;
/** Most pieces of a response body: each switch between text (the writer) and bytes (the stream) starts one (lib/response/framing.ts MAX_RESPONSE_CHUNKS: the host refuses more). */
export var MAX_CHUNKS = 10000;
/** Most headers of one platform.http.request (lib/outbound/client.ts MAX_REQUEST_HEADERS: the host refuses more). */
export var MAX_REQUEST_HEADERS = 100;
/** ERRORS.OUTBOUND_FAILED's code (lib/errors.ts), as the host answers a refused request. */
export var OUTBOUND_FAILED = 270501;
/** The ends of the IllegalStateException messages of an object used when its call is over, or without one. */
export var AFTER_END = ' is used after its call ended';
export var OUTSIDE_CALL = ' is used outside of a call';

// ---------------------------------------------------------------------------------------------
// Small safe helpers
// ---------------------------------------------------------------------------------------------
/**
 * The descriptor setOwn passes, reused: defineProperty reads it before anything else can run
 * (even a Proxy's trap gets a copy), and its value is cleared after, so it holds nothing. A new
 * descriptor literal per call was ~0.3 µs of every setOwn in QuickJS.
 */
var OWN_DESC: Descriptor = { __proto__: null, value: undefined, writable: true, enumerable: true, configurable: true };
/** Defines an own data property: no inherited setter can intercept it. */
export function setOwn<T extends object>(o: T, k: PropertyKey, v: unknown): T {
  OWN_DESC.value = v;
  try {
    defineProperty(o, k, OWN_DESC);
  } finally {
    OWN_DESC.value = undefined;
  }
  return o;
}
/** Defines a non-enumerable data property, writable and configurable unless `fixed` (then neither), as the built-ins' own. */
export function defineHidden(o: object, k: PropertyKey, v: unknown, fixed?: boolean): void {
  defineProperty(o, k, { __proto__: null, value: v, writable: !fixed, enumerable: false, configurable: !fixed });
}
export function push<T>(a: T[], v: T): void {
  setOwn(a, a.length, v);
}
/** Own property or undefined (never an inherited one such as 'toString'). */
export function getOwn(o: unknown, k: PropertyKey): unknown {
  return o !== null && o !== undefined && hasOwn(o, k) ? (o as Record<PropertyKey, unknown>)[k] : undefined;
}
export function isObj(v: unknown): v is Record<PropertyKey, unknown> {
  return v !== null && (typeof v === 'object' || typeof v === 'function');
}
export function isNil(v: unknown): v is null | undefined {
  return v === null || v === undefined;
}
export function copyArray<T>(a: ArrayLike<T>): T[] {
  var out: T[] = [];
  for (var i = 0; i < a.length; i++) push(out, a[i]);
  return out;
}
export function safeString(v: unknown): string {
  try {
    return Str(v);
  } catch (e) {
    return '[object]';
  }
}
/** Java-ish string conversion: null / undefined print as 'null'. */
export function jstr(v: unknown): string {
  return isNil(v) ? 'null' : Str(v);
}
/**
 * A cache of what make(name) returns, for the few names scripts use again and again (header and
 * attribute names): make runs once per name (a throw caches nothing), and the cache is emptied
 * when it holds `max` names. Any string is just a key of its null-prototype map.
 */
export function nameCache<V>(max: number, make: (name: string) => V): (name: string) => V {
  var map: { [name: string]: V } = objectCreate(null);
  var count = 0;
  return function (name: string): V {
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
export function lower(s: unknown): string {
  return toLowerCase(Str(s));
}
export function toInt(v: unknown): number {
  var n = Num(v);
  return n === n ? mathTrunc(n) : NaN;
}
/** Splits on a one-character separator (String.prototype.split would consult Symbol.split). */
export function splitOn(s: string, sep: string): string[] {
  var out: string[] = [];
  for (var from = 0; ; ) {
    var at = indexOf(s, sep, from);
    push(out, at < 0 ? strSlice(s, from) : strSlice(s, from, at));
    if (at < 0) return out;
    from = at + 1;
  }
}
/** Deep copy of JSON data (as JSON.parse made it) into ordinary objects and arrays. */
export function clonePlain(v: unknown): unknown {
  if (!isObj(v)) return v;
  var i;
  var out: any = isArray(v) ? [] : {};
  if (isArray(v)) for (i = 0; i < v.length; i++) push(out, clonePlain(v[i]));
  else for (var keys = objectKeys(v), j = 0; j < keys.length; j++) setOwn(out, keys[j], clonePlain(v[keys[j]]));
  return out;
}
/** The keys of `a`, then those of `b` that `a` has not, in order. */
export function unionKeys(a: object, b: object): string[] {
  var out = objectKeys(a);
  var seen: { [k: string]: boolean } = objectCreate(null);
  for (var i = 0; i < out.length; i++) seen[out[i]] = true;
  for (var keys = objectKeys(b), j = 0; j < keys.length; j++) if (seen[keys[j]] !== true) push(out, keys[j]);
  return out;
}
/**
 * The built-in error types by name: an error the adapter or the host reports as one of them is an
 * instance of it, so that a script's `e instanceof RangeError` holds, as the types say it throws one.
 */
var ERROR_TYPES: { readonly [name: string]: ErrorConstructor | undefined } = freeze({
  __proto__: null,
  TypeError: TypeError,
  RangeError: RangeError,
  SyntaxError: SyntaxError,
  ReferenceError: ReferenceError,
  URIError: URIError,
  EvalError: EvalError,
} as unknown as { [name: string]: ErrorConstructor | undefined });
/**
 * An Error `name: message` (of the built-in type of that name, if there is one). `at`: an Error
 * made earlier, taken instead (its stack is read where it was made): an async host call's failure
 * is made where the script called, not in the reply.
 */
export function makeError(name: string, message: string, code?: number, status?: number, at?: Error): Error {
  var type = ERROR_TYPES[name];
  var e = at;
  if (e === undefined) {
    e = new (type ?? ErrorCtor)(message);
  } else {
    if (type !== undefined) setPrototypeOf(e, type.prototype);
    defineHidden(e, 'message', message);
  }
  defineHidden(e, 'name', name);
  if (code !== undefined) setOwn(e, 'code', code);
  if (status !== undefined) setOwn(e, 'status', status);
  return e;
}
export function typeError(message: string): Error {
  return makeError('TypeError', message);
}
export function illegalState(message: string): Error {
  return makeError('IllegalStateException', message);
}
export function illegalArgument(message: string): Error {
  return makeError('IllegalArgumentException', message);
}
