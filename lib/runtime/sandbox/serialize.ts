/*
 * Sandbox adapter module: results.
 *
 * Holds thrownInfo (a thrown value -> ThrownError) and serializeOutput (a result ->
 * SerializedOutput for the API's return type: Text, Redirect, File, JSON).
 */
import { ErrorCtor, G, Str, SymToPrimitive, fnApply, getOwnDescriptor, getPrototypeOf, indexOf, isNil, isObj, objToString, push, safeString, strSlice, trim, WeakMapCtor, wmGet, wmSet } from './prelude';
import { noJsonForm, stringifyUser } from './encoding';
import type { SerializedOutput, StageHead, ThrownError } from '../protocol';

/** The most of a thrown value's `stack` that leaves the sandbox. */
var MAX_STACK = 16384;

/** The prototypes of the built-in error types (-> true): where the classes of a script's error end. */
var BUILT_IN_ERRORS: WeakMap<object, boolean> = new WeakMapCtor();
(function () {
  var types = [ErrorCtor, TypeError, RangeError, SyntaxError, ReferenceError, URIError, EvalError, G.AggregateError, G.InternalError];
  for (var i = 0; i < types.length; i++) if (typeof types[i] === 'function') wmSet(BUILT_IN_ERRORS, (types[i] as ErrorConstructor).prototype, true);
})();
/** The names of the script's own classes an error is an instance of (those below the built-in type it extends). */
function ownClassNames(e: object): string[] {
  var names: string[] = [];
  var p: unknown = getPrototypeOf(e);
  for (var i = 0; i < 32 && isObj(p) && wmGet(BUILT_IN_ERRORS, p) !== true; i++) {
    var c = getOwnDescriptor(p, 'constructor');
    var f: unknown = c === undefined ? undefined : c.value;
    var n = typeof f === 'function' ? getOwnDescriptor(f, 'name') : undefined;
    if (n !== undefined && typeof n.value === 'string' && n.value !== '') push(names, n.value);
    p = getPrototypeOf(p);
  }
  return names;
}
/**
 * An error's stack without the frames of its own classes' constructors on top. QuickJS starts
 * the stack of `new NotFound(...)` (class NotFound extends Error) inside the constructors (`at
 * AppError (...)`, `at NotFound (...)`, then the line of the `new`), V8 at the `new`: the same
 * error was located at the class's line on one engine and the caller's on the other.
 */
function withoutConstructorFrames(e: object, stack: string): string {
  if (objToString(e) !== '[object Error]') return stack;
  var names = ownClassNames(e);
  if (names.length === 0) return stack;
  var at = 0;
  for (;;) {
    var nl = indexOf(stack, '\n', at);
    if (nl < 0) return stack; // (nothing but such frames: kept)
    var line = trim(strSlice(stack, at, nl));
    var own = false;
    for (var i = 0; i < names.length && !own; i++) own = strSlice(line, 0, names[i].length + 5) === 'at ' + names[i] + ' (';
    if (!own) return strSlice(stack, at);
    at = nl + 1;
  }
}
export function thrownInfo(e: unknown): ThrownError {
  var name = 'Error';
  var message = '';
  var code: number | undefined;
  var status: number | undefined;
  var stack: string | undefined;
  try {
    if (isObj(e)) {
      var n: unknown = e.name;
      var m: unknown = e.message;
      var c: unknown = e.code;
      var s: unknown = e.status;
      var k: unknown = e.stack;
      if (typeof k === 'string') k = withoutConstructorFrames(e, k);
      if (typeof n === 'string' && n !== '') name = n;
      message = isNil(m) ? safeString(e) : safeString(m); // throw {code: 1} -> '[object Object]'
      if (typeof c === 'number' && c - c === 0) code = c; // (finite)
      if (typeof s === 'number' && s - s === 0) status = s;
      if (typeof k === 'string') {
        // (V8 heads a stack with `name: message`: past the limit, what is kept is the frames after it)
        var head = name + (message === '' ? '' : ': ' + message);
        var frames: string = k.length > MAX_STACK && indexOf(k, head) === 0 ? strSlice(k, head.length) : k;
        stack = frames.length > MAX_STACK ? strSlice(frames, 0, MAX_STACK) : frames;
      }
    } else {
      message = safeString(e); // throw 'text'
    }
  } catch (x) {
    if (message === '') message = 'The script threw a value that could not be read';
  }
  return { name: name, message: message, code: code, status: status, stack: stack };
}
/** typeof v, 'null' for null. */
export function typeName(v: unknown): string {
  return v === null ? 'null' : typeof v;
}
/** A File result's field that is there (not null or undefined) but no string: the message saying so, else null. */
function notText(field: string, x: unknown): string | null {
  return isNil(x) || typeof x === 'string' ? null : "A File result's " + field + ' must be a string, got ' + typeName(x);
}
/**
 * Whether String(v) has a method to call: an object without toString, valueOf and
 * Symbol.toPrimitive (Object.create(null)) has no string form. (Reading them may run a getter.)
 */
function hasStringForm(v: unknown): boolean {
  if (!isObj(v)) return true;
  return typeof v[SymToPrimitive] === 'function' || typeof v.toString === 'function' || typeof v.valueOf === 'function';
}
/**
 * String(v) as the language computes it (ToPrimitive with the hint 'string': Symbol.toPrimitive,
 * else toString, then valueOf), or null when the object gives no primitive: String(v) would throw
 * the engine's TypeError ('toPrimitive' on QuickJS). A method that throws throws (the script's error).
 */
function textForm(v: unknown): string | null {
  if (!isObj(v)) return Str(v);
  var exotic = v[SymToPrimitive];
  if (!isNil(exotic)) {
    if (typeof exotic !== 'function') return Str(v); // (the language's TypeError)
    var p: unknown = fnApply(exotic, v, ['string']);
    return isObj(p) ? null : '' + (p as string); // ('' + a symbol throws, as String(v) does)
  }
  var methods = [v.toString, v.valueOf];
  for (var i = 0; i < 2; i++) {
    var m = methods[i];
    if (typeof m !== 'function') continue;
    var r: unknown = fnApply(m, v, []);
    if (!isObj(r)) return '' + (r as string);
  }
  return null;
}
/** The output of a result that does not fit its return type. */
function invalid(message: string): SerializedOutput {
  return { type: 'invalid', message: message };
}
/** What a Text result with no string form is said to need. */
var NO_TEXT = 'Text return type needs a value with a string form, got an object ';
/** A JSON result with no JSON form (BigInt, cycle) is `invalid`, as a Text result with no string form is; what a getter or toJSON of it throws is thrown (the script's error), as running out of memory is. */
export function serializeOutput(returnType: StageHead['returnType'], v: unknown): SerializedOutput {
  if (returnType === 'Text') {
    if (isNil(v)) return { type: 'Text', text: '' };
    if (!hasStringForm(v)) return invalid(NO_TEXT + 'without toString');
    var text = textForm(v);
    if (text === null) return invalid(NO_TEXT + 'whose toString and valueOf give no primitive');
    return { type: 'Text', text: text };
  }
  if (returnType === 'Redirect') {
    return typeof v === 'string' && v !== ''
      ? { type: 'Redirect', location: v }
      : invalid('Redirect return type needs a URL string, got ' + typeName(v));
  }
  if (returnType === 'File') {
    if (v === null || typeof v !== 'object') return invalid('File return type needs a file result object, got ' + typeName(v));
    // (each field read once: a getter runs once; each may be missing or not a string)
    var file = v as { [field: string]: unknown };
    var path = file.path;
    var storagePath = file.storagePath;
    var name = file.name;
    var disposition = file.contentDisposition;
    var bad = notText('path', path) || notText('storagePath', storagePath) || notText('name', name) || notText('contentDisposition', disposition);
    if (bad !== null) return invalid(bad);
    // (each is now a string, null or undefined)
    return { type: 'File', file: { path: (path as string | null) ?? null, storagePath: (storagePath as string | null) ?? null, name: (name as string | null) ?? null, contentDisposition: (disposition as string | null) ?? null } };
  }
  var json;
  try {
    json = v === undefined ? 'null' : stringifyUser(v);
  } catch (e) {
    var info = thrownInfo(e);
    // Out of memory while serializing stays an InternalError so the engine reports SCRIPT_OUT_OF_MEMORY.
    if (info.name === 'InternalError' && indexOf(info.message, 'out of memory') >= 0) throw e;
    // (a getter or toJSON of the result that threw: the script's own error, its code kept, as a
    // Text result's toString that throws)
    if (!noJsonForm(e)) throw e;
    // (a result with no JSON form does not fit the return type: INVALID_RESULT, not a script error)
    return invalid('Result is not JSON-serializable: ' + info.message);
  }
  return { type: 'JSON', json: json === undefined ? 'null' : json };
}
