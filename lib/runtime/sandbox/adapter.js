/*
 * scriptable-api sandbox adapter.
 *
 * A classic script (not a module, not TypeScript) that the engines (QuickJS through
 * quickjs-emscripten, V8 through vm2) evaluate once in each sandbox context, BEFORE the tenant's
 * script module. It is the only code between the tenant script and the host. Its contract is
 * lib/runtime/protocol.ts (StageInput, StageOutput, RequestSnapshot, ResponseState, CarriedState,
 * SerializedOutput, ThrownError, HostOp).
 *
 * It finds:
 *   globalThis.__host(op, argsJson) -> '{"ok":true,"value":...}' | '{"ok":false,"error":{name,message,code}}'
 *     The one synchronous bridge to the host. Captured here, then deleted from the global object
 *     so tenant code never sees it.
 *
 * It defines:
 *   globalThis.__sa = { invoke(fn, inputJson), collect() }    (non-writable/enumerable/configurable, frozen)
 *     invoke  parses a StageInput, builds a fresh ctx (APIContext) and calls fn(ctx) for
 *             'before' / 'call', fn(ctx, result) for 'after', fn(ctx, apiError) for 'onError'.
 *             A thenable result is followed with then-handlers. Returns nothing.
 *     collect (after the engine drained its job queue) returns the StageOutput JSON string:
 *             status pending | value | error, the value serialized for the API's return type
 *             (`output`), the ThrownError, and the carried state (attributes, response).
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
 * toJSON, and no array/string prototype method, iterator protocol, regex or split() is used.
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
 */
(function () {
  'use strict';

  var G = globalThis;

  // ---------------------------------------------------------------------------------------------
  // Captured builtins
  // ---------------------------------------------------------------------------------------------
  var FnProto = Function.prototype;
  /** uncurry(String.prototype.slice)(s, 1, 2) is s.slice(1, 2), immune to later patching. */
  var uncurry = FnProto.bind.bind(FnProto.call);
  var defineProperty = Object.defineProperty;
  var freeze = Object.freeze;
  var objectKeys = Object.keys;
  var objectCreate = Object.create;
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

  // ---------------------------------------------------------------------------------------------
  // Small safe helpers
  // ---------------------------------------------------------------------------------------------
  /** Defines an own data property: no inherited setter can intercept it. */
  function setOwn(o, k, v) {
    defineProperty(o, k, { __proto__: null, value: v, writable: true, enumerable: true, configurable: true });
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

  // ---------------------------------------------------------------------------------------------
  // JSON: the adapter's own encoder (never calls toJSON) and script values (Dates -> ms)
  // ---------------------------------------------------------------------------------------------
  /** JSON text of adapter-built data: strings, numbers, booleans, null, arrays, plain objects. */
  function enc(v) {
    if (isNil(v)) return 'null';
    var t = typeof v;
    if (t === 'string') return jsonStringify(v); // a primitive string: no toJSON lookup
    if (t === 'number') return v === v && v !== 1 / 0 && v !== -1 / 0 ? '' + v : 'null';
    if (t === 'boolean') return v ? 'true' : 'false';
    var s = '';
    var i;
    if (isArray(v)) {
      for (i = 0; i < v.length; i++) s += (i ? ',' : '') + enc(v[i]);
      return '[' + s + ']';
    }
    for (var keys = objectKeys(v), i2 = 0; i2 < keys.length; i2++) {
      var x = v[keys[i2]];
      if (x !== undefined && typeof x !== 'function') s += (s ? ',' : '') + jsonStringify(keys[i2]) + ':' + enc(x);
    }
    return '{' + s + '}';
  }
  /** Time value of a Date of any realm (null when invalid), undefined for anything else. */
  function dateValue(o) {
    if (objToString(o) !== '[object Date]') return undefined;
    var t;
    try {
      t = getTime(o); // works across realms
    } catch (e) {
      return undefined; // a Symbol.toStringTag impostor
    }
    return t === t ? t : null;
  }
  function userReplacer(key, v) {
    var d;
    if (v !== null && typeof v === 'object') {
      d = dateValue(v);
      if (d !== undefined) return d;
    } else if (typeof v === 'string' || v === null) {
      var o = this[key]; // a Date's toJSON already ran: look at the holder's original value
      if (o !== v && o !== null && typeof o === 'object') {
        d = dateValue(o);
        if (d !== undefined) return d;
      }
    }
    return v;
  }
  /** JSON.stringify semantics for script values, every Date (top level too) as ms. May throw. */
  function stringifyUser(v) {
    return jsonStringify(v, userReplacer);
  }

  // ---------------------------------------------------------------------------------------------
  // UTF-8 and base64 by hand. Bytes travel as "binary strings" (one char per byte, 0..255).
  // ---------------------------------------------------------------------------------------------
  var B64 = 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/';
  function isHigh(c) {
    return c >= 0xd800 && c <= 0xdbff;
  }
  function isLow(c) {
    return c >= 0xdc00 && c <= 0xdfff;
  }
  /** UTF-8 bytes of s as a binary string; lone surrogates become U+FFFD, as with TextEncoder. */
  function utf8Binary(s) {
    var out = '';
    var n = s.length;
    for (var i = 0; i < n; ) {
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
    return out;
  }
  function utf8Length(s) {
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
  function base64(bin) {
    var out = '';
    var n = bin.length;
    var i = 0;
    var x;
    for (; i + 2 < n; i += 3) {
      x = (charCodeAt(bin, i) << 16) | (charCodeAt(bin, i + 1) << 8) | charCodeAt(bin, i + 2);
      out += B64[(x >> 18) & 63] + B64[(x >> 12) & 63] + B64[(x >> 6) & 63] + B64[x & 63];
    }
    if (n - i === 1) {
      x = charCodeAt(bin, i) << 16;
      out += B64[(x >> 18) & 63] + B64[(x >> 12) & 63] + '==';
    } else if (n - i === 2) {
      x = (charCodeAt(bin, i) << 16) | (charCodeAt(bin, i + 1) << 8);
      out += B64[(x >> 18) & 63] + B64[(x >> 12) & 63] + B64[(x >> 6) & 63] + '=';
    }
    return out;
  }
  function base64ByteLength(b64) {
    var n = b64.length;
    var pad = n && b64[n - 1] === '=' ? (n > 1 && b64[n - 2] === '=' ? 2 : 1) : 0;
    return mathTrunc((n * 3) / 4) - pad;
  }

  // ---------------------------------------------------------------------------------------------
  // Host calls: return the host's value, or throw an Error with the host's name/message/code
  // ---------------------------------------------------------------------------------------------
  function hostCall(op, args) {
    var raw;
    var res;
    try {
      raw = hostFn(op, enc(args));
    } catch (e) {
      throw makeError('HostError', 'Host operation ' + op + ' failed: ' + safeString(isObj(e) ? e.message : e));
    }
    try {
      res = jsonParse(Str(raw));
    } catch (e) {
      throw makeError('HostError', 'Invalid host reply for ' + op);
    }
    if (getOwn(res, 'ok') === true) return getOwn(res, 'value');
    var err = getOwn(res, 'error');
    var name = getOwn(err, 'name');
    var message = getOwn(err, 'message');
    var code = getOwn(err, 'code');
    throw makeError(
      typeof name === 'string' && name ? name : 'Error',
      isNil(message) ? 'Host operation ' + op + ' failed' : Str(message),
      typeof code === 'number' ? code : undefined,
    );
  }

  // ---------------------------------------------------------------------------------------------
  // java.util.Enumeration, also iterable (for...of, spread); iteration consumes it
  // ---------------------------------------------------------------------------------------------
  function makeEnumeration(list) {
    var items = copyArray(list);
    var i = 0;
    function iterator() {
      return {
        next: () => (i < items.length ? { value: items[i++], done: false } : { value: undefined, done: true }),
        [SymIterator]: function () {
          return this;
        },
      };
    }
    return {
      hasMoreElements: () => i < items.length,
      nextElement: function () {
        if (i >= items.length) throw makeError('NoSuchElementException', 'No more elements');
        return items[i++];
      },
      asIterator: iterator,
      [SymIterator]: iterator,
    };
  }

  // ---------------------------------------------------------------------------------------------
  // Carried response state. Internal chunks: {k:'t', v:text} | {k:'b', v:base64 from an earlier
  // stage} | {k:'bin', v:binary string written in this stage}.
  // ---------------------------------------------------------------------------------------------
  function responseFromInput(r) {
    var headers = [];
    var chunks = [];
    var list = getOwn(r, 'headers');
    var i;
    if (isArray(list)) {
      for (i = 0; i < list.length; i++) if (isArray(list[i]) && list[i].length >= 2) push(headers, [Str(list[i][0]), Str(list[i][1])]);
    }
    var cl = getOwn(r, 'chunks');
    if (isArray(cl)) {
      for (i = 0; i < cl.length; i++) {
        var t = getOwn(cl[i], 't');
        var b = getOwn(cl[i], 'b');
        if (typeof t === 'string') push(chunks, { k: 't', v: t });
        else if (typeof b === 'string') push(chunks, { k: 'b', v: b });
      }
    }
    function pick(k, type, dflt) {
      var v = getOwn(r, k);
      return typeof v === type ? v : dflt;
    }
    var error = getOwn(r, 'error');
    return {
      status: pick('status', 'number', 200),
      headers: headers,
      contentType: pick('contentType', 'string', null),
      characterEncoding: pick('characterEncoding', 'string', null),
      contentLength: pick('contentLength', 'number', null),
      bufferSize: pick('bufferSize', 'number', 8192),
      chunks: chunks,
      written: getOwn(r, 'written') === true,
      committed: getOwn(r, 'committed') === true,
      error: isObj(error)
        ? {
            status: typeof getOwn(error, 'status') === 'number' ? getOwn(error, 'status') : 500,
            message: typeof getOwn(error, 'message') === 'string' ? getOwn(error, 'message') : null,
          }
        : null,
      redirect: pick('redirect', 'string', null),
    };
  }
  function chunkByteLength(ch, charset) {
    if (ch.k === 'b') return base64ByteLength(ch.v);
    if (ch.k === 'bin') return ch.v.length;
    var c = charset === null ? '' : lower(charset);
    return c === 'iso-8859-1' || c === 'latin1' || c === 'us-ascii' ? ch.v.length : utf8Length(ch.v);
  }
  function responseToPlain(r) {
    var chunks = [];
    for (var i = 0; i < r.chunks.length; i++) {
      var ch = r.chunks[i];
      push(chunks, ch.k === 't' ? { t: ch.v } : { b: ch.k === 'b' ? ch.v : base64(ch.v) });
    }
    return {
      status: r.status,
      headers: r.headers,
      contentType: r.contentType,
      characterEncoding: r.characterEncoding,
      contentLength: r.contentLength,
      bufferSize: r.bufferSize,
      chunks: chunks,
      written: r.written,
      committed: r.committed,
      error: r.error,
      redirect: r.redirect,
    };
  }

  // ---------------------------------------------------------------------------------------------
  // ctx.response (PlatformHttpResponse)
  // ---------------------------------------------------------------------------------------------
  var DAYS = ['Sun', 'Mon', 'Tue', 'Wed', 'Thu', 'Fri', 'Sat'];
  var MONTHS = ['Jan', 'Feb', 'Mar', 'Apr', 'May', 'Jun', 'Jul', 'Aug', 'Sep', 'Oct', 'Nov', 'Dec'];
  function pad(n, w) {
    var s = '' + n;
    while (s.length < w) s = '0' + s;
    return s;
  }
  /** RFC 1123 date, the format of Date.prototype.toUTCString(), built by hand for both engines. */
  function httpDate(ms) {
    var d = new DateCtor(Num(ms));
    if (getTime(d) !== getTime(d)) throw illegalArgument('Invalid date: ' + safeString(ms));
    return (
      DAYS[getUTCDay(d)] + ', ' + pad(getUTCDate(d), 2) + ' ' + MONTHS[getUTCMonth(d)] + ' ' + pad(getUTCFullYear(d), 4) + ' ' +
      pad(getUTCHours(d), 2) + ':' + pad(getUTCMinutes(d), 2) + ':' + pad(getUTCSeconds(d), 2) + ' GMT'
    );
  }
  /** A small printf: %s %S %d %f %.Nf %n %%; other conversions are copied as written. */
  function formatJava(fmt, args, a) {
    var s = Str(fmt);
    var out = '';
    for (var i = 0; i < s.length; i++) {
      if (s[i] !== '%' || i + 1 >= s.length) {
        out += s[i];
        continue;
      }
      var j = i + 1;
      var prec = -1;
      if (s[j] === '.') {
        var k = j + 1;
        while (k < s.length && s[k] >= '0' && s[k] <= '9') k++;
        if (k > j + 1) (prec = Num(strSlice(s, j + 1, k))), (j = k);
      }
      var conv = s[j];
      var arg = a < args.length ? args[a] : undefined;
      if (conv === '%') out += '%';
      else if (conv === 'n') out += '\n';
      else if (conv === 's') (out += jstr(arg)), a++;
      else if (conv === 'S') (out += toUpperCase(jstr(arg))), a++;
      else if (conv === 'd') (out += '' + toInt(arg)), a++;
      else if (conv === 'f') (out += toFixed(Num(arg), prec < 0 ? 6 : mathMin(prec, 100))), a++;
      else out += strSlice(s, i, j + 1);
      i = j;
    }
    return out;
  }
  /** The bytes of an OutputStream.write argument, as a binary string. */
  function bytesOf(b, off, len) {
    if (typeof b === 'number') return fromCharCode(b & 255);
    if (typeof b === 'string') return utf8Binary(b);
    if (!isObj(b)) throw makeError('TypeError', 'write() needs bytes, got ' + (b === null ? 'null' : typeof b));
    if (U8 !== undefined && objToString(b) === '[object ArrayBuffer]') b = new U8(b);
    var n = b.length;
    if (typeof n !== 'number') throw makeError('TypeError', 'write() needs an array of bytes');
    var start = 0;
    var end = n;
    if (off !== undefined) {
      start = toInt(off);
      end = len === undefined ? n : start + toInt(len);
      if (!(start >= 0 && end >= start && end <= n)) throw makeError('IndexOutOfBoundsException', 'Invalid offset or length');
    }
    var out = '';
    for (var i = start; i < end; i++) out += fromCharCode(Num(b[i]) & 255);
    return out;
  }

  function makeResponse(st) {
    var api;
    var writer = null;
    var stream = null;
    var r = () => st.res;
    function statusCode(sc) {
      var n = Num(sc);
      if (!(n === n && n % 1 === 0 && n >= 100 && n <= 999)) throw illegalArgument('Invalid status code: ' + safeString(sc));
      return n;
    }
    function clearBuffer() {
      st.res.chunks = [];
      st.res.written = false;
      st.buffered = 0;
    }
    /** Appends text ('t') or bytes ('bin'), merged into a last chunk of the same kind. */
    function append(kind, data) {
      var res = st.res;
      if (res.error !== null || res.redirect !== null) return; // suspended by sendError / sendRedirect
      res.written = true;
      if (data.length === 0) return;
      var last = res.chunks.length ? res.chunks[res.chunks.length - 1] : null;
      var ch = { k: kind, v: data };
      if (last !== null && last.k === kind) last.v += data;
      else push(res.chunks, ch);
      st.buffered += chunkByteLength(ch, res.characterEncoding);
      if (st.buffered > res.bufferSize) res.committed = true; // the buffer overflowed: flushed
    }
    function setContentLengthValue(v) {
      var n = isNil(v) ? -1 : toInt(v);
      st.res.contentLength = n >= 0 ? n : null;
    }
    /** Content-Type and Content-Length are response properties, as in a servlet container. */
    function special(name, value) {
      var ln = lower(name);
      if (ln === 'content-type') api.setContentType(value);
      else if (ln === 'content-length') setContentLengthValue(value);
      else return false;
      return true;
    }
    function badName(name) {
      return st.res.committed || isNil(name) || Str(name) === '';
    }
    /** setHeader keeps the position of the first entry of that name and drops the others. */
    function setHeader(name, value) {
      if (badName(name) || special(name, value)) return;
      var ln = lower(name);
      var h = st.res.headers;
      var kept = [];
      var placed = isNil(value);
      for (var i = 0; i < h.length; i++) {
        if (lower(h[i][0]) !== ln) push(kept, h[i]);
        else if (!placed) (placed = true), push(kept, [Str(name), Str(value)]);
      }
      if (!placed) push(kept, [Str(name), Str(value)]);
      st.res.headers = kept;
    }
    function addHeader(name, value) {
      if (badName(name) || special(name, value) || isNil(value)) return;
      push(st.res.headers, [Str(name), Str(value)]);
    }
    function getHeaders(name) {
      var out = [];
      if (isNil(name)) return out;
      var ln = lower(name);
      var res = st.res;
      if (ln === 'content-type') {
        if (res.contentType !== null) push(out, api.getContentType());
        return out;
      }
      if (ln === 'content-length' && res.contentLength !== null) return [('' + res.contentLength)];
      for (var i = 0; i < res.headers.length; i++) if (lower(res.headers[i][0]) === ln) push(out, res.headers[i][1]);
      if (out.length === 0 && ln === 'location' && res.redirect !== null) push(out, res.redirect);
      return out;
    }
    function getHeaderNames() {
      var res = st.res;
      var out = [];
      var seen = objectCreate(null);
      if (res.contentType !== null) (seen['content-type'] = true), push(out, 'Content-Type');
      if (res.contentLength !== null) (seen['content-length'] = true), push(out, 'Content-Length');
      for (var i = 0; i < res.headers.length; i++) {
        var ln = lower(res.headers[i][0]);
        if (seen[ln] !== true) (seen[ln] = true), push(out, res.headers[i][0]);
      }
      return out;
    }
    function getWriter() {
      if (writer !== null) return writer;
      var closed = false;
      var text = (s) => closed || append('t', s);
      writer = {
        /** write(string[, off, len]) | write(int): one character | write(array of chars / codes) */
        write: function (v, off, len) {
          var s = '';
          if (typeof v === 'number') s = fromCharCode(v & 0xffff);
          else if (isArray(v)) for (var i = 0; i < v.length; i++) s += typeof v[i] === 'number' ? fromCharCode(v[i] & 0xffff) : Str(v[i]);
          else s = off === undefined ? jstr(v) : strSlice(jstr(v), toInt(off), len === undefined ? undefined : toInt(off) + toInt(len));
          text(s);
        },
        print: (v) => void text(jstr(v)),
        println: function (v) {
          text((arguments.length === 0 ? '' : jstr(v)) + '\n');
        },
        append: (v) => (text(jstr(v)), writer),
        printf: function (fmt) {
          text(formatJava(fmt, arguments, 1));
          return writer;
        },
        format: function (fmt) {
          text(formatJava(fmt, arguments, 1));
          return writer;
        },
        flush: () => void (closed || api.flushBuffer()),
        close: () => void (closed || api.flushBuffer(), (closed = true)),
        checkError: () => false,
      };
      return writer;
    }
    function getOutputStream() {
      if (stream !== null) return stream;
      var closed = false;
      var bytes = (bin) => closed || append('bin', bin);
      stream = {
        /** write(int): one byte | write(bytes[, off, len]): array, typed array, ArrayBuffer | write(string): UTF-8 */
        write: (b, off, len) => void bytes(bytesOf(b, off, len)),
        print: (v) => void bytes(utf8Binary(jstr(v))),
        /** As ServletOutputStream.println: CRLF. */
        println: function (v) {
          bytes(utf8Binary((arguments.length === 0 ? '' : jstr(v)) + '\r\n'));
        },
        flush: () => void (closed || api.flushBuffer()),
        close: () => void (closed || api.flushBuffer(), (closed = true)),
        isReady: () => true,
      };
      return stream;
    }
    var sameUrl = (url) => (isNil(url) ? url : Str(url));

    api = {
      getCharacterEncoding: () => (r().characterEncoding === null ? 'UTF-8' : r().characterEncoding),
      /** The MIME type with ';charset=' when an encoding was set; null until a type is set. */
      getContentType: function () {
        var res = r();
        if (res.contentType === null) return null;
        return res.characterEncoding === null ? res.contentType : res.contentType + ';charset=' + res.characterEncoding;
      },
      getOutputStream: getOutputStream,
      getWriter: getWriter,
      setCharacterEncoding: function (enc) {
        if (!r().committed) r().characterEncoding = isNil(enc) || trim(Str(enc)) === '' ? null : trim(Str(enc));
      },
      setContentLength: (len) => void (r().committed || setContentLengthValue(len)),
      setContentLengthLong: (len) => void (r().committed || setContentLengthValue(len)),
      /** 'text/html; charset=ISO-8859-1' -> contentType 'text/html', characterEncoding 'ISO-8859-1'. */
      setContentType: function (type) {
        var res = r();
        if (res.committed) return;
        if (isNil(type)) {
          res.contentType = null;
          return;
        }
        var parts = splitOn(Str(type), ';');
        var base = trim(parts[0]);
        var charset = null;
        for (var i = 1; i < parts.length; i++) {
          var p = trim(parts[i]);
          var eq = indexOf(p, '=');
          if (eq > 0 && lower(trim(strSlice(p, 0, eq))) === 'charset') {
            charset = trim(strSlice(p, eq + 1));
            if (charset.length >= 2 && charset[0] === '"' && charset[charset.length - 1] === '"') charset = strSlice(charset, 1, -1);
          } else if (p !== '') base += ';' + p;
        }
        res.contentType = base === '' ? null : base;
        if (charset) res.characterEncoding = charset;
      },
      containsHeader: (name) => getHeaders(name).length > 0,
      encodeURL: sameUrl,
      encodeRedirectURL: sameUrl,
      encodeUrl: sameUrl,
      encodeRedirectUrl: sameUrl,
      /** Clears the buffer, records the error page to send and commits. */
      sendError: function (sc, msg) {
        if (r().committed) throw illegalState('Cannot call sendError() after the response has been committed');
        var code = statusCode(sc);
        clearBuffer();
        var res = r();
        res.status = code;
        res.error = { status: code, message: isNil(msg) ? null : Str(msg) };
        res.committed = true;
      },
      /** Clears the buffer, records a 302 to `location` and commits. */
      sendRedirect: function (location) {
        if (r().committed) throw illegalState('Cannot call sendRedirect() after the response has been committed');
        if (isNil(location)) throw illegalArgument('sendRedirect() needs a location');
        var loc = Str(location);
        clearBuffer();
        var res = r();
        res.redirect = loc;
        res.status = 302;
        res.committed = true;
      },
      setHeader: setHeader,
      addHeader: addHeader,
      setDateHeader: (name, date) => void (r().committed || setHeader(name, httpDate(date))),
      addDateHeader: (name, date) => void (r().committed || addHeader(name, httpDate(date))),
      setIntHeader: function (name, value) {
        var n = toInt(value);
        if (n !== n) throw illegalArgument('Invalid int header value: ' + safeString(value));
        setHeader(name, '' + n);
      },
      addIntHeader: function (name, value) {
        var n = toInt(value);
        if (n !== n) throw illegalArgument('Invalid int header value: ' + safeString(value));
        addHeader(name, '' + n);
      },
      setStatus: function (sc) {
        if (!r().committed) r().status = statusCode(sc); // ignored once committed, as in a container
      },
      getStatus: () => r().status,
      getHeader: function (name) {
        var all = getHeaders(name);
        return all.length ? all[0] : null;
      },
      getHeaders: getHeaders,
      getHeaderNames: getHeaderNames,
      getBufferSize: () => r().bufferSize,
      setBufferSize: function (size) {
        var res = r();
        if (res.written || res.committed || st.buffered > 0) throw illegalState('Cannot set the buffer size after content has been written');
        var n = toInt(size);
        if (n !== n) throw illegalArgument('Invalid buffer size: ' + safeString(size));
        res.bufferSize = mathMax(0, n);
      },
      flushBuffer: () => void (r().committed = true),
      reset: function () {
        var res = r();
        if (res.committed) throw illegalState('Cannot reset the response after it has been committed');
        res.status = 200;
        res.headers = [];
        res.contentType = null;
        res.characterEncoding = null;
        res.contentLength = null;
        clearBuffer();
      },
      resetBuffer: function () {
        if (r().committed) throw illegalState('Cannot reset the buffer after the response has been committed');
        clearBuffer();
      },
      isCommitted: () => r().committed,
    };
    return api;
  }

  // ---------------------------------------------------------------------------------------------
  // Part, Cookie, ctx.request (PlatformHttpRequest), ctx (APIContext)
  // ---------------------------------------------------------------------------------------------
  function makePart(info) {
    var id = Str(getOwn(info, 'id'));
    var name = getOwn(info, 'name');
    var contentType = getOwn(info, 'contentType');
    var size = getOwn(info, 'size');
    var fileName = getOwn(info, 'submittedFileName');
    name = name === undefined ? null : name;
    contentType = contentType === undefined ? null : contentType;
    size = typeof size === 'number' ? size : 0;
    fileName = fileName === undefined ? null : fileName;
    var path = (p) => (p === undefined ? null : Str(p));
    return freeze({
      name: name,
      contentType: contentType,
      size: size,
      submittedFileName: fileName,
      getName: () => name,
      getContentType: () => contentType,
      getSize: () => size,
      getSubmittedFileName: () => fileName,
      save: (p) => hostCall('part.save', { id: id, path: path(p) }),
      saveStorage: (p) => hostCall('part.saveStorage', { id: id, path: path(p) }),
      saveAttachment: (tableId, fieldId) => hostCall('part.saveAttachment', { id: id, tableId: path(tableId), fieldId: path(fieldId) }),
    });
  }
  function makeCookie(name, value) {
    return { name: name, value: value, getName: () => name, getValue: () => value };
  }

  function makeRequest(st, snap, parts) {
    function field(k, dflt) {
      var v = getOwn(snap, k);
      return v === undefined ? dflt : v;
    }
    var query = field('query', {});
    var form = field('form', {});
    var headers = field('headers', {});
    var headerLists = field('headerLists', {});
    var cookies = field('cookies', {});
    var scheme = field('scheme', 'http');
    var serverName = field('serverName', '');
    var serverPort = field('serverPort', 0);
    var requestURI = field('requestURI', '');
    var get = (k, dflt) => () => field(k, dflt);

    /** Query values first, then the urlencoded / multipart form fields. */
    function parameterValues(name) {
      var out = [];
      var sources = [getOwn(query, name), getOwn(form, name)];
      for (var s = 0; s < 2; s++) {
        var v = sources[s];
        if (typeof v === 'string') push(out, v);
        else if (isArray(v)) for (var i = 0; i < v.length; i++) push(out, Str(v[i]));
      }
      return out;
    }
    function headerValues(name) {
      if (isNil(name)) return [];
      var ln = lower(name);
      var list = getOwn(headerLists, ln);
      if (isArray(list) && list.length) {
        var out = [];
        for (var i = 0; i < list.length; i++) push(out, Str(list[i]));
        return out;
      }
      var h = getOwn(headers, ln);
      return typeof h === 'string' ? [h] : [];
    }

    return {
      // Attributes: the live values within a stage, JSON copies from one stage to the next.
      getAttribute: (name) => (hasOwn(st.attrs, Str(name)) ? st.attrs[Str(name)] : null),
      getAttributeNames: () => makeEnumeration(objectKeys(st.attrs)),
      /** Setting null or undefined removes the attribute. */
      setAttribute: function (name, value) {
        if (isNil(value)) delete st.attrs[Str(name)];
        else setOwn(st.attrs, Str(name), value);
      },
      removeAttribute: (name) => void delete st.attrs[Str(name)],

      getParameter: function (name) {
        var v = parameterValues(Str(name));
        return v.length ? v[0] : null;
      },
      getParameterNames: () => makeEnumeration(unionKeys(query, form)),
      getParameterValues: function (name) {
        var v = parameterValues(Str(name));
        return v.length ? v : null;
      },
      getParameterMap: function () {
        var out = {};
        var names = unionKeys(query, form);
        for (var i = 0; i < names.length; i++) setOwn(out, names[i], parameterValues(names[i]));
        return out;
      },

      getCharacterEncoding: get('characterEncoding', null),
      getProtocol: get('protocol', 'HTTP/1.1'),
      getScheme: () => scheme,
      getServerName: () => serverName,
      getServerPort: () => serverPort,
      getRemoteAddr: get('remoteAddr', null),
      getRemoteHost: get('remoteHost', null),
      getRemotePort: get('remotePort', 0),
      isSecure: () => scheme === 'https',

      getContentType: get('contentType', null),
      getAuthType: get('authType', null),
      /** Cookie[], or null when the request has none (as HttpServletRequest.getCookies). */
      getCookies: function () {
        var keys = objectKeys(cookies);
        if (keys.length === 0) return null;
        var out = [];
        for (var i = 0; i < keys.length; i++) push(out, makeCookie(keys[i], Str(cookies[keys[i]])));
        return out;
      },
      /** The first value of the header, case-insensitive; null when absent. */
      getHeader: function (name) {
        var v = headerValues(name);
        return v.length ? v[0] : null;
      },
      getHeaders: (name) => makeEnumeration(headerValues(name)),
      getHeaderNames: () => makeEnumeration(unionKeys(headers, headerLists)),
      getMethod: get('method', 'GET'),
      getPathInfo: get('pathInfo', null),
      getContextPath: get('contextPath', ''),
      getQueryString: get('queryString', null),
      getRemoteUser: () => null,
      getUserPrincipal: () => null,
      getRequestURI: () => requestURI,
      /** scheme://serverName[:port]requestURI, without the port when it is the scheme's default. */
      getRequestURL: function () {
        var dflt = scheme === 'https' ? 443 : 80;
        return scheme + '://' + serverName + (serverPort && serverPort !== dflt ? ':' + serverPort : '') + requestURI;
      },
      getServletPath: get('servletPath', ''),
      getParts: () => copyArray(parts),
      getPart: function (name) {
        for (var i = 0; i < parts.length; i++) if (parts[i].name === Str(name)) return parts[i];
        return null;
      },
    };
  }

  function makeCtx(st, snap) {
    var parts = [];
    var infos = getOwn(snap, 'parts');
    if (isArray(infos)) for (var i = 0; i < infos.length; i++) push(parts, makePart(infos[i]));
    function field(k, dflt) {
      var v = getOwn(snap, k);
      return v === undefined ? dflt : v;
    }
    return {
      headers: clonePlain(field('headers', {})),
      cookies: clonePlain(field('cookies', {})),
      query: clonePlain(field('query', {})),
      body: field('body', ''),
      url: field('url', ''),
      appId: field('appId', ''),
      path: field('path', ''),
      method: field('method', 'GET'),
      getParts: () => copyArray(parts),
      request: makeRequest(st, snap, parts),
      response: makeResponse(st),
    };
  }

  // ---------------------------------------------------------------------------------------------
  // Results: thrown values (ThrownError), return-type serialization (SerializedOutput)
  // ---------------------------------------------------------------------------------------------
  function thrownInfo(e) {
    var name = 'Error';
    var message = '';
    var code;
    var status;
    var stack;
    try {
      if (isObj(e)) {
        var n = e.name;
        var m = e.message;
        var c = e.code;
        var s = e.status;
        var k = e.stack;
        if (typeof n === 'string' && n !== '') name = n;
        message = isNil(m) ? safeString(e) : safeString(m); // throw {code: 1} -> '[object Object]'
        if (typeof c === 'number' && c === c) code = c;
        if (typeof s === 'number' && s === s) status = s;
        if (typeof k === 'string') stack = k;
      } else {
        message = safeString(e); // throw 'text'
      }
    } catch (x) {
      if (message === '') message = 'The script threw a value that could not be read';
    }
    return { name: name, message: message, code: code, status: status, stack: stack };
  }
  function typeName(v) {
    return v === null ? 'null' : typeof v;
  }
  /** Throws for a JSON result with no JSON form (BigInt, cycle). */
  function serializeOutput(returnType, v) {
    if (returnType === 'Text') return { type: 'Text', text: isNil(v) ? '' : Str(v) };
    if (returnType === 'Redirect') {
      return typeof v === 'string' && v !== ''
        ? { type: 'Redirect', location: v }
        : { type: 'invalid', message: 'Redirect return type needs a URL string, got ' + typeName(v) };
    }
    if (returnType === 'File') {
      if (v === null || typeof v !== 'object') return { type: 'invalid', message: 'File return type needs a file result object, got ' + typeName(v) };
      var str = (x) => (typeof x === 'string' ? x : null);
      return { type: 'File', file: { path: str(v.path), storagePath: str(v.storagePath), name: str(v.name), contentDisposition: str(v.contentDisposition) } };
    }
    var json;
    try {
      json = v === undefined ? 'null' : stringifyUser(v);
    } catch (e) {
      throw makeError('TypeError', 'Result is not JSON-serializable: ' + thrownInfo(e).message);
    }
    return { type: 'JSON', json: json === undefined ? 'null' : json };
  }

  // ---------------------------------------------------------------------------------------------
  // invoke / collect
  // ---------------------------------------------------------------------------------------------
  var current = null; // the stage being run, or the last one
  var inInvoke = false;

  function settle(st, status, v) {
    if (st.status !== 'pending') return;
    st.status = status;
    if (status === 'error') st.error = thrownInfo(v);
    else st.value = v;
  }

  function invoke(fn, inputJson) {
    if (inInvoke) throw illegalState('__sa.invoke is not re-entrant');
    var input = jsonParse(Str(inputJson));
    var state = getOwn(input, 'state');
    var attrsIn = getOwn(state, 'attributes');
    var attrs = objectCreate(null);
    if (isObj(attrsIn)) for (var keys = objectKeys(attrsIn), i = 0; i < keys.length; i++) setOwn(attrs, keys[i], attrsIn[keys[i]]);
    var st = {
      returnType: getOwn(input, 'returnType'),
      wantValue: getOwn(input, 'wantValue') === true,
      attrs: attrs,
      res: responseFromInput(getOwn(state, 'response')),
      buffered: 0,
      status: 'pending',
      value: undefined,
      error: null,
      abort: null,
    };
    for (var j = 0; j < st.res.chunks.length; j++) st.buffered += chunkByteLength(st.res.chunks[j], st.res.characterEncoding);
    current = st;
    var ctx = makeCtx(st, getOwn(input, 'request'));
    var stage = getOwn(input, 'stage');
    var r;
    inInvoke = true;
    try {
      if (typeof fn !== 'function') throw makeError('TypeError', 'The exported value is not a function');
      if (stage === 'after') {
        r = fn(ctx, getOwn(input, 'hasResult') === true ? getOwn(input, 'result') : undefined);
      } else if (stage === 'onError') {
        var err = getOwn(input, 'error');
        r = fn(ctx, { requestId: getOwn(err, 'requestId'), message: getOwn(err, 'message'), code: getOwn(err, 'code') });
      } else {
        r = fn(ctx);
      }
    } catch (e) {
      inInvoke = false;
      settle(st, 'error', e);
      return;
    }
    inInvoke = false;
    var then;
    try {
      then = isObj(r) ? r.then : undefined;
    } catch (e) {
      settle(st, 'error', e);
      return;
    }
    if (typeof then !== 'function') {
      settle(st, 'value', r);
      return;
    }
    var onValue = (v) => settle(st, 'value', v);
    var onError = (e) => settle(st, 'error', e);
    try {
      promiseThen(r, onValue, onError); // a native promise, whatever Promise.prototype.then is now
    } catch (notAPromise) {
      try {
        promiseThen(new PromiseCtor((resolve) => resolve(r)), onValue, onError); // adopts any thenable
      } catch (e) {
        settle(st, 'error', e);
      }
    }
  }

  function collect() {
    var st = current;
    if (st === null) throw illegalState('__sa.collect() before __sa.invoke()');
    var status = st.status;
    var hasValue = false;
    var valueJson;
    var output;
    var error;
    if (st.abort !== null) {
      status = 'error'; // platform.app.abort wins, even when the script caught it
      error = st.abort;
    } else if (status === 'error') {
      error = st.error;
    } else if (status === 'value') {
      hasValue = st.value !== undefined;
      try {
        output = serializeOutput(st.returnType, st.value);
      } catch (e) {
        status = 'error';
        hasValue = false;
        error = thrownInfo(e);
      }
      if (status === 'value' && st.wantValue && hasValue) {
        try {
          valueJson = output.type === 'JSON' ? output.json : stringifyUser(st.value);
        } catch (e) {
          valueJson = undefined; // no JSON form: `value` is left out
        }
      }
    }
    // Attributes: JSON copies; a value with no JSON form (function, cycle, BigInt) is dropped.
    var attrs = '';
    for (var keys = objectKeys(st.attrs), i = 0; i < keys.length; i++) {
      var json;
      try {
        json = stringifyUser(st.attrs[keys[i]]);
      } catch (e) {
        json = undefined;
      }
      if (json !== undefined) attrs += (attrs ? ',' : '') + jsonStringify(keys[i]) + ':' + json;
    }
    var s = '{"status":' + jsonStringify(status) + ',"hasValue":' + (hasValue ? 'true' : 'false');
    if (valueJson !== undefined) s += ',"value":' + valueJson;
    if (output !== undefined && status === 'value') s += ',"output":' + enc(output);
    if (error !== undefined) s += ',"error":' + enc(error);
    return s + ',"state":{"attributes":{' + attrs + '},"response":' + enc(responseToPlain(st.res)) + '}}';
  }

  // ---------------------------------------------------------------------------------------------
  // platform
  // ---------------------------------------------------------------------------------------------
  function abort(message, status) {
    var msg = isNil(message) ? 'Aborted' : safeString(message);
    var sc = typeof status === 'number' && status === status ? mathTrunc(status) : undefined;
    try {
      hostCall('app.abort', { message: msg, status: sc });
    } catch (e) {
      /* recorded and thrown below all the same */
    }
    var err = makeError('AbortError', msg, ABORT_CODE, sc);
    var st = current;
    if (st !== null && st.abort === null) {
      var stack = err.stack;
      st.abort = { name: 'AbortError', message: msg, code: ABORT_CODE, status: sc, stack: typeof stack === 'string' ? stack : undefined };
    }
    throw err;
  }

  /** UTF-8 (the default; 'utf8' too) in the sandbox, other charsets through the host. */
  function stringToBytes(s, charset) {
    var out = [];
    var i;
    if (isNil(s)) return out;
    var cs = isNil(charset) || charset === '' ? 'utf-8' : lower(charset);
    if (cs !== 'utf-8' && cs !== 'utf8') {
      var v = hostCall('utils.stringToBytes', { text: Str(s), charset: Str(charset) });
      if (isArray(v)) for (i = 0; i < v.length; i++) push(out, Num(v[i]) & 255);
      return out;
    }
    var bin = utf8Binary(Str(s));
    for (i = 0; i < bin.length; i++) push(out, charCodeAt(bin, i));
    return out;
  }

  function httpRequest(opts) {
    if (typeof opts === 'string') opts = { url: opts };
    if (!isObj(opts) || isNil(opts.url) || Str(opts.url) === '') throw makeError('TypeError', 'platform.http.request needs a request object with a url');
    var method = isNil(opts.method) ? 'GET' : toUpperCase(Str(opts.method));
    var headers = {};
    var hasContentType = false;
    if (isObj(opts.headers)) {
      for (var hk = objectKeys(opts.headers), i = 0; i < hk.length; i++) {
        var hv = opts.headers[hk[i]];
        if (isNil(hv)) continue;
        setOwn(headers, hk[i], Str(hv));
        if (lower(hk[i]) === 'content-type') hasContentType = true;
      }
    }
    var body = isNil(opts.body) ? null : opts.body;
    if (body !== null && typeof body !== 'string') {
      body = stringifyUser(body); // an object body is sent as JSON
      if (body === undefined) body = null;
      else if (!hasContentType) setOwn(headers, 'content-type', 'application/json');
    }
    var timeoutMs = typeof opts.timeoutMs === 'number' && opts.timeoutMs === opts.timeoutMs ? opts.timeoutMs : undefined;
    var res = hostCall('http.request', { url: Str(opts.url), method: method, headers: headers, body: body, timeoutMs: timeoutMs });
    var id = getOwn(res, 'id');
    var loaded = false;
    var cached;
    function loadBody() {
      if (!loaded) (cached = hostCall('http.body', { id: id })), (loaded = true);
      return cached;
    }
    var response = {
      status: getOwn(res, 'status'),
      headers: clonePlain(getOwn(res, 'headers')),
      url: getOwn(res, 'url'),
      text: () => loadBody(),
      json: function () {
        var b = loadBody();
        return isNil(b) ? null : jsonParse(Str(b));
      },
      saveBodyAsFile: (p) => hostCall('http.saveBodyAsFile', { id: id, path: p === undefined ? null : Str(p) }),
    };
    defineProperty(response, 'body', { __proto__: null, get: loadBody, enumerable: true, configurable: false });
    return response;
  }

  function deepFreeze(o) {
    for (var keys = objectKeys(o), i = 0; i < keys.length; i++) if (isObj(o[keys[i]])) deepFreeze(o[keys[i]]);
    return freeze(o);
  }

  var platform = deepFreeze({
    app: {
      /** Ends the call with an error (code 270001); recorded, so catching it changes nothing. */
      abort: (message, status) => abort(message, status),
    },
    system: {
      getAccountByToken: function (token) {
        var v = hostCall('system.getAccountByToken', { token: isNil(token) ? null : Str(token) });
        return v === undefined ? null : v;
      },
    },
    utils: {
      toJSON: function (v) {
        var s = stringifyUser(v);
        return s === undefined ? 'null' : s;
      },
      stringToBytes: (s, charset) => stringToBytes(s, charset),
    },
    http: {
      request: (opts) => httpRequest(opts),
    },
  });
  defineProperty(G, 'platform', { __proto__: null, value: platform, writable: false, enumerable: false, configurable: false });

  // ---------------------------------------------------------------------------------------------
  // console: one host op per call; JSON-ish formatting, each message capped at 8 KiB
  // ---------------------------------------------------------------------------------------------
  function inspect(v, top, seen, budget) {
    var t = typeof v;
    if (t === 'string') return top ? v : jsonStringify(v);
    if (isNil(v) || t === 'number' || t === 'boolean') return '' + v;
    if (t === 'bigint') return '' + v + 'n';
    if (t === 'symbol') return safeString(v);
    if (t === 'function') return '[Function: ' + (typeof v.name === 'string' && v.name ? v.name : 'anonymous') + ']';
    var d = dateValue(v);
    if (d !== undefined) return d === null ? 'Invalid Date' : toISOString(v);
    if (objToString(v) === '[object Error]') {
      var info = thrownInfo(v);
      return top && info.stack !== undefined ? info.stack : info.name + ': ' + info.message;
    }
    for (var i = 0; i < seen.length; i++) if (seen[i] === v) return '[Circular]';
    var arr = isArray(v);
    if (seen.length >= 4) return arr ? '[Array]' : '[Object]';
    push(seen, v);
    var s = '';
    var keys = arr ? null : objectKeys(v);
    var n = arr ? v.length : keys.length;
    for (var j = 0; j < n; j++) {
      if (budget.left <= s.length) {
        s += (j ? ',' : '') + '…';
        break;
      }
      s += (j ? ',' : '') + (arr ? inspect(v[j], false, seen, budget) : jsonStringify(keys[j]) + ':' + inspect(v[keys[j]], false, seen, budget));
    }
    seen.length = seen.length - 1;
    budget.left -= s.length;
    return arr ? '[' + s + ']' : '{' + s + '}';
  }
  function formatArgs(args) {
    var out = '';
    var budget = { left: CONSOLE_CAP };
    for (var i = 0; i < args.length && out.length <= CONSOLE_CAP; i++) {
      var part;
      try {
        part = inspect(args[i], true, [], budget);
      } catch (e) {
        part = '[Uninspectable]';
      }
      out += (i ? ' ' : '') + part;
    }
    if (out.length > CONSOLE_CAP) {
      var cut = CONSOLE_CAP - 1;
      if (isHigh(charCodeAt(out, cut - 1))) cut--;
      out = strSlice(out, 0, cut) + '…';
    }
    return out;
  }
  function logger(level) {
    return function () {
      try {
        hostCall('console', { level: level, message: formatArgs(arguments) });
      } catch (e) {
        /* console output is best effort */
      }
    };
  }
  defineProperty(G, 'console', {
    __proto__: null,
    value: { log: logger('log'), info: logger('info'), warn: logger('warn'), error: logger('error'), debug: logger('debug') },
    writable: true,
    enumerable: false,
    configurable: true,
  });

  // ---------------------------------------------------------------------------------------------
  // __sa, for the engine
  // ---------------------------------------------------------------------------------------------
  defineProperty(G, '__sa', {
    __proto__: null,
    value: freeze({ invoke: freeze(invoke), collect: freeze(collect) }),
    writable: false,
    enumerable: false,
    configurable: false,
  });
})();
