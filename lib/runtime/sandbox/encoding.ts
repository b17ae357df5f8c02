/*
 * Sandbox adapter module: JSON, UTF-8 and base64.
 *
 * Holds enc (the adapter's own JSON encoder, never calls toJSON), dateValue / stringifyUser
 * (JSON of script values, Dates as ms), and UTF-8 / base64 by hand: utf8Binary, utf8Length,
 * base64, base64ByteLength, isHigh / isLow. Bytes travel as "binary strings" (one char per
 * byte, 0..255).
 */
import { Num, U8, WeakMapCtor, abByteLength, arrJoin, charCodeAt, fnApply, fromCharCode, getOwnDescriptor, getTime, hasOwn, isArray, isNil, isObj, jsonStringify, makeError, mathMin, mathTrunc, nameCache, objToString, objectCreate, objectKeys, push, reExec, setOwn, strSlice, wmGet, wmSet, taBuffer, taByteLength, taByteOffset, dvBuffer, dvByteLength, dvByteOffset } from './prelude';

// ---------------------------------------------------------------------------------------------
// JSON: the adapter's own encoder (never calls toJSON) and script values (Dates -> ms)
// ---------------------------------------------------------------------------------------------
/** A character JSON.stringify writes escaped (a lone surrogate too: JSON.stringify is well-formed). */
var NEEDS_ESCAPE = /["\\\u0000-\u001f\ud800-\udfff]/;
/**
 * A string as JSON. QuickJS's JSON.stringify costs about 1.5 µs even for a short string: most
 * short strings need no escaping, which one regex scan tells. A long one goes to JSON.stringify
 * at once: QuickJS's regex engine scans two to four times slower than it writes.
 */
export function quote(s: string): string {
  return s.length <= 256 && reExec(NEEDS_ESCAPE, s) === null ? '"' + s + '"' : jsonStringify(s);
}
/** Object keys as JSON (adapter-built data has a few distinct keys). */
export var keyJson = nameCache(256, quote);
/** JSON text of adapter-built data: strings, numbers, booleans, null, arrays, plain objects. */
export function enc(v: unknown): string {
  if (isNil(v)) return 'null';
  var t = typeof v;
  if (t === 'string') return quote(v as string); // a primitive string: no toJSON lookup
  if (t === 'number') return (v as number) - (v as number) === 0 ? '' + v : 'null'; // (finite)
  if (t === 'boolean') return v ? 'true' : 'false';
  var s = '';
  var i;
  if (isArray(v)) {
    for (i = 0; i < v.length; i++) s += (i ? ',' : '') + enc(v[i]);
    return '[' + s + ']';
  }
  for (var keys = objectKeys(v as object), i2 = 0; i2 < keys.length; i2++) {
    var x = (v as Record<string, unknown>)[keys[i2]];
    if (x !== undefined && typeof x !== 'function') s += (s ? ',' : '') + keyJson(keys[i2]) + ':' + enc(x);
  }
  return '{' + s + '}';
}
/** Time value of a Date of any realm (null when invalid), undefined for anything else. */
export function dateValue(o: unknown): number | null | undefined {
  if (objToString(o) !== '[object Date]') return undefined;
  var t;
  try {
    t = getTime(o); // works across realms
  } catch (e) {
    return undefined; // a Symbol.toStringTag impostor
  }
  return t === t ? t : null;
}
/** What Date.prototype.toJSON (toISOString) writes. */
var DATE_JSON = /^(?:[+-]\d{6}|\d{4})-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/;
/**
 * Most levels of objects and arrays a script value written by stringifyUser may have inside the
 * outermost one (as an automation's values). QuickJS's JSON.stringify checks each object against
 * every object it is nested in, in one built-in call its interrupt handler never reaches: a value
 * 25,000 levels deep held a worker past any time limit.
 */
var MAX_JSON_DEPTH = 100;
/**
 * The objects the value being written is nested in, outermost first (`depth` of them): each call of
 * userReplacer drops those its holder is not nested in. No prototype: a script's setter on
 * Array.prototype never sees an entry. Each stringifyUser has its own (a toJSON may call another).
 */
var chain: { [depth: number]: unknown } = objectCreate(null);
var depth = 0;
/** What userReplacer handed back last: the value JSON.stringify failed on when a BigInt or a cycle stopped it. */
var lastOut: unknown;
/**
 * The errors stringifyUser threw because its value has no JSON form (a BigInt, a cycle, a value
 * too deep), as opposed to one a getter or toJSON of the value threw (the script's own error).
 */
var NO_JSON_FORM: WeakMap<object, boolean> = new WeakMapCtor();
/** Whether `e`, thrown by stringifyUser, says the value has no JSON form (not a script's getter or toJSON throwing). */
export function noJsonForm(e: unknown): boolean {
  return isObj(e) && wmGet(NO_JSON_FORM, e) === true;
}
/** Whether the last value userReplacer handed back is what JSON.stringify cannot write: a BigInt, or an object it is nested in (a cycle). */
function lastHasNoForm(): boolean {
  if (typeof lastOut === 'bigint') return true;
  if (lastOut === null || typeof lastOut !== 'object') return false;
  // (chain[depth - 1] is lastOut itself, pushed by userReplacer: the objects before it hold it)
  for (var i = 0; i < depth - 1; i++) if (chain[i] === lastOut) return true;
  return false;
}
/** What userReplacer writes for `v` (Dates of any realm as ms). */
function userValue(holder: Record<string, unknown>, key: string, v: unknown): unknown {
  var d;
  if (v !== null && typeof v === 'object') {
    d = dateValue(v);
    if (d !== undefined) return d;
  } else if (typeof v === 'string' && (v.length === 24 || v.length === 27) && reExec(DATE_JSON, v) !== null) {
    // A string in the form of a Date's JSON: a Date's toJSON may have made it. Look at the
    // holder's original value, from its descriptor, so that no getter runs twice (a getter runs
    // again only here, to tell the two apart). (null needs no look: an invalid Date's ms are null)
    var desc = getOwnDescriptor(holder, key);
    var o = desc === undefined ? undefined : hasOwn(desc, 'value') ? desc.value : holder[key];
    if (o !== v && o !== null && typeof o === 'object') {
      d = dateValue(o);
      if (d !== undefined) return d;
    }
  }
  return v;
}
function userReplacer(this: Record<string, unknown>, key: string, v: unknown): unknown {
  var out = userValue(this, key, v);
  lastOut = out;
  if (out !== null && typeof out === 'object') {
    // (the holder of what JSON.stringify writes inside it; only objects need the depth: the
    // entries of holders already done go when the next object is met)
    while (depth > 0 && chain[depth - 1] !== this) depth--;
    if (depth > MAX_JSON_DEPTH) {
      var tooDeep = makeError('RangeError', 'a value nested more than ' + MAX_JSON_DEPTH + ' levels deep');
      wmSet(NO_JSON_FORM, tooDeep, true);
      throw tooDeep;
    }
    chain[depth++] = out;
  }
  return out;
}
/** What V8's JSON.stringify says of a cycle (then the path to it, over lines). */
var V8_CYCLE = 'Converting circular structure to JSON';
/**
 * A cycle's TypeError with QuickJS's message, `circular reference`, on both engines: V8 writes
 * the path to the cycle over several lines, which reached the error body and log line of a vm2
 * call only. (The error keeps its stack: the script's line that asked for the JSON.)
 */
function sameCycleError(e: unknown): unknown {
  if (!isObj(e) || objToString(e) !== '[object Error]') return e;
  var d = getOwnDescriptor(e, 'message');
  var m: unknown = d === undefined ? undefined : d.value;
  return typeof m === 'string' && strSlice(m, 0, V8_CYCLE.length) === V8_CYCLE ? makeError('TypeError', 'circular reference', undefined, undefined, e as unknown as Error) : e;
}
/** JSON.stringify semantics for script values, every Date (top level too) as ms, at most MAX_JSON_DEPTH levels deep. May throw. */
export function stringifyUser(v: unknown): string | undefined {
  var outerChain = chain;
  var outerDepth = depth;
  var outerLast = lastOut;
  // (a call from inside another one, through a toJSON, counts apart; the first one reuses the chain)
  if (outerDepth > 0) chain = objectCreate(null);
  depth = 0;
  lastOut = undefined;
  try {
    return jsonStringify(v, userReplacer);
  } catch (e) {
    var x = sameCycleError(e);
    // (JSON.stringify throws at once on a BigInt or an object closing a cycle, right after
    // userReplacer handed it back; anything else came from a getter or toJSON of the value)
    if (isObj(x) && lastHasNoForm()) wmSet(NO_JSON_FORM, x, true);
    throw x;
  } finally {
    chain = outerChain;
    depth = outerDepth;
    lastOut = outerLast;
  }
}

// ---------------------------------------------------------------------------------------------
// UTF-8 and base64 by hand. Bytes travel as "binary strings" (one char per byte, 0..255).
// ---------------------------------------------------------------------------------------------
/**
 * Long texts are built in pieces of this many characters, joined once: appending one character
 * (or four) at a time to the whole text makes V8 keep a node per append (about 20 times the
 * text's size: an 8 MiB body runs out of a call's memory) and QuickJS copy the text as it grows.
 */
var PIECE = 8192;
var B64 = 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/';
export function isHigh(c: number): boolean {
  return c >= 0xd800 && c <= 0xdbff;
}
function isLow(c: number): boolean {
  return c >= 0xdc00 && c <= 0xdfff;
}
/** UTF-8 bytes of s as a binary string; lone surrogates become U+FFFD, as with TextEncoder. */
export function utf8Binary(s: string): string {
  var pieces: string[] = [];
  var out = '';
  var n = s.length;
  for (var i = 0; i < n; ) {
    if (out.length >= PIECE) {
      push(pieces, out);
      out = '';
    }
    var start = i;
    while (i < n && charCodeAt(s, i) < 0x80) i++;
    if (i > start) out += strSlice(s, start, i); // ASCII run
    if (i >= n) break;
    var c = charCodeAt(s, i++);
    if (c < 0x800) {
      out += fromCharCode(0xc0 | (c >> 6), 0x80 | (c & 63));
    } else if (isHigh(c) && i < n && isLow(charCodeAt(s, i))) {
      var cp = 0x10000 + ((c - 0xd800) << 10) + (charCodeAt(s, i++) - 0xdc00);
      out += fromCharCode(0xf0 | (cp >> 18), 0x80 | ((cp >> 12) & 63), 0x80 | ((cp >> 6) & 63), 0x80 | (cp & 63));
    } else {
      if (c >= 0xd800 && c <= 0xdfff) c = 0xfffd;
      out += fromCharCode(0xe0 | (c >> 12), 0x80 | ((c >> 6) & 63), 0x80 | (c & 63));
    }
  }
  push(pieces, out);
  return arrJoin(pieces, '');
}
/** A character past ASCII (one native scan tells that a text's UTF-8 length is its length). */
var NON_ASCII = /[^\u0000-\u007f]/;
export function utf8Length(s: string): number {
  if (reExec(NON_ASCII, s) === null) return s.length;
  var n = 0;
  for (var i = 0; i < s.length; i++) {
    var c = charCodeAt(s, i);
    if (c < 0x80) n += 1;
    else if (c < 0x800) n += 2;
    else if (isHigh(c) && i + 1 < s.length && isLow(charCodeAt(s, i + 1))) (n += 4), i++;
    else n += 3;
  }
  return n;
}
/**
 * The bytes of an ArrayBuffer, a typed array or a DataView (of any realm: as fetch takes a
 * BufferSource, a view gives the bytes it spans) as a binary string; undefined for anything else.
 */
export function bufferSourceBytes(v: unknown): string | undefined {
  if (!isObj(v)) return undefined;
  var u: Uint8Array;
  try {
    u = new U8(taBuffer(v), taByteOffset(v), taByteLength(v));
  } catch (e) {
    try {
      u = new U8(dvBuffer(v), dvByteOffset(v), dvByteLength(v));
    } catch (e2) {
      try {
        u = new U8(v as unknown as ArrayBuffer, 0, abByteLength(v));
      } catch (e3) {
        return undefined;
      }
    }
  }
  return binaryString(u, 0, taByteLength(u));
}
/** The binary string of `b[start..end)`, each element as a byte (ToNumber, low 8 bits). */
export function binaryString(b: ArrayLike<unknown>, start: number, end: number): string {
  var pieces: string[] = [];
  for (var i = start; i < end; ) {
    var m = mathMin(PIECE, end - i);
    var codes = new U8(m);
    // (its own length: fromCharCode's arguments are counted without the prototype's getter)
    setOwn(codes, 'length', m);
    for (var k = 0; k < m; k++) codes[k] = Num(b[i++]) & 255;
    push(pieces, fnApply(fromCharCode, null, codes) as string);
  }
  return arrJoin(pieces, '');
}
/** The character codes of B64, by digit. */
var B64_CODES: number[] = [];
for (var d = 0; d < 64; d++) push(B64_CODES, charCodeAt(B64, d));
/** Base64 of a binary string: each piece's digits are made as codes and turned into text at once. */
export function base64(bin: string): string {
  var pieces: string[] = [];
  var n = bin.length;
  var whole = n - (n % 3);
  var i = 0;
  var x;
  while (i < whole) {
    var m = mathMin((PIECE / 4) * 3, whole - i);
    var codes = new U8((m / 3) * 4);
    setOwn(codes, 'length', (m / 3) * 4); // (see binaryString)
    for (var k = 0, e = i + m; i < e; i += 3) {
      x = (charCodeAt(bin, i) << 16) | (charCodeAt(bin, i + 1) << 8) | charCodeAt(bin, i + 2);
      codes[k++] = B64_CODES[(x >> 18) & 63];
      codes[k++] = B64_CODES[(x >> 12) & 63];
      codes[k++] = B64_CODES[(x >> 6) & 63];
      codes[k++] = B64_CODES[x & 63];
    }
    push(pieces, fnApply(fromCharCode, null, codes) as string);
  }
  // (the last one or two bytes: 2 or 3 digits, then '=' to 4)
  var two = n - i > 1;
  if (n > i) {
    x = (charCodeAt(bin, i) << 16) | (two ? charCodeAt(bin, i + 1) << 8 : 0);
    push(pieces, B64[(x >> 18) & 63] + B64[(x >> 12) & 63] + (two ? B64[(x >> 6) & 63] : '=') + '=');
  }
  return arrJoin(pieces, '');
}
export function base64ByteLength(b64: string): number {
  var n = b64.length;
  var pad = n && b64[n - 1] === '=' ? (n > 1 && b64[n - 2] === '=' ? 2 : 1) : 0;
  return mathTrunc((n * 3) / 4) - pad;
}
