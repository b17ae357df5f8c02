/*
 * Sandbox adapter module: ctx.response (PlatformHttpResponse).
 *
 * Holds makeResponse(st): the servlet-like response API over st.res (the carried state),
 * with its Writer (getWriter) and OutputStream (getOutputStream).
 *
 * The API's methods are built once per context (buildResponseProto), over a variable `st` that
 * each method sets, on entry, to the stage record of the response object it is called on (see
 * apiRec in entry.ts; a method called detached from its object acts on the active stage). The Writer and
 * the OutputStream are made per stage, bound to it.
 */
import { MAX_CHUNKS, MAX_HEADERS, MAX_HEAD_CHARS, Num, Str, fnApply, freeze, fromCharCode, illegalArgument, illegalState, indexOf, isArray, isNil, jstr, lower, mathMax, nameCache, objectCreate, objectKeys, push, reExec, safeString, splitOn, strSlice, toInt, toLowerCase, trim, wmSet } from './prelude';
import { utf8Binary } from './encoding';
import { bufferedOf, chunkByteLength, chunksOf } from './response-state';
import { bytesOf, formatJava, httpDate } from './response-helpers';
import { apiRec, apiStage } from './entry';
import type { StageRecord } from './types';

/*
 * What a script sees (the types/api-context.d.ts PlatformHttpResponse, PrintWriter and
 * ServletOutputStream, with `unknown` for what a script passes). Object types rather than
 * interfaces, so that bindAll takes them as maps of methods.
 */
/** The Writer of getWriter(). */
export type ResponseWriter = {
  write(v: unknown, off?: unknown, len?: unknown): void;
  print(v: unknown): void;
  println(v?: unknown): void;
  append(v: unknown): ResponseWriter;
  printf(fmt: unknown, ...args: unknown[]): ResponseWriter;
  format(fmt: unknown, ...args: unknown[]): ResponseWriter;
  flush(): void;
  close(): void;
  checkError(): boolean;
};
/** The OutputStream of getOutputStream(). */
export type ResponseOutputStream = {
  write(b: unknown, off?: unknown, len?: unknown): void;
  print(v: unknown): void;
  println(v?: unknown): void;
  flush(): void;
  close(): void;
  isReady(): boolean;
};
/** encodeURL & co.: the url as a string, null / undefined as given. */
type UrlOf = (url: unknown) => string | null | undefined;
/** ctx.response: the methods of `api` in buildResponseProto (none takes more than two arguments). */
export type ResponseApi = {
  getCharacterEncoding(): string;
  getContentType(): string | null;
  getOutputStream(): ResponseOutputStream;
  getWriter(): ResponseWriter;
  setCharacterEncoding(enc: unknown): void;
  setContentLength(len: unknown): void;
  setContentLengthLong(len: unknown): void;
  setContentType(type: unknown): void;
  containsHeader(name: unknown): boolean;
  encodeURL: UrlOf;
  encodeRedirectURL: UrlOf;
  encodeUrl: UrlOf;
  encodeRedirectUrl: UrlOf;
  sendError(sc: unknown, msg?: unknown): void;
  sendRedirect(location: unknown): void;
  setHeader(name: unknown, value: unknown): void;
  addHeader(name: unknown, value: unknown): void;
  setDateHeader(name: unknown, date: unknown): void;
  addDateHeader(name: unknown, date: unknown): void;
  setIntHeader(name: unknown, value: unknown): void;
  addIntHeader(name: unknown, value: unknown): void;
  setStatus(sc: unknown): void;
  getStatus(): number;
  getHeader(name: unknown): string | null;
  getHeaders(name: unknown): string[];
  getHeaderNames(): string[];
  getBufferSize(): number;
  setBufferSize(size: unknown): void;
  flushBuffer(): void;
  reset(): void;
  resetBuffer(): void;
  isCommitted(): boolean;
};
/** A method of the Writer or the OutputStream (bindAll wraps each; it never calls one itself). */
type Method = (...args: never[]) => unknown;
/** A method of ResProto: sets `st` from `this`, then calls the method of `api` with (a, b). */
type ProtoMethod = (this: unknown, a: unknown, b: unknown) => unknown;

function buildResponseProto(): Readonly<{ [name: string]: ProtoMethod }> {
  // (null only outside the methods, which all set it first)
  var st: StageRecord = null as unknown as StageRecord;
  var r = () => st.res;
  /** fn, run with `st` set to `own` (a Writer's or OutputStream's stage), while that stage runs. */
  function bindTo(own: StageRecord, fn: Method): (this: unknown) => unknown {
    return function (this: unknown): unknown {
      if (own.done) throw illegalState('ctx.response is used after its call ended');
      var prev = st;
      st = own;
      try {
        return fnApply(fn, this, arguments);
      } finally {
        st = prev;
      }
    };
  }
  function bindAll<T extends { [name: string]: Method }>(obj: T, own: StageRecord): T {
    for (var keys = objectKeys(obj), i = 0; i < keys.length; i++) (obj as { [name: string]: Method })[keys[i]] = bindTo(own, obj[keys[i]]);
    return obj;
  }
  function statusCode(sc: unknown): number {
    var n = Num(sc);
    // (NaN % 1 and Infinity % 1 are NaN: an integer)
    if (!(n % 1 === 0 && n >= 100 && n <= 999)) throw illegalArgument('Invalid status code: ' + safeString(sc));
    return n;
  }
  function clearBuffer(): void {
    var res = st.res;
    if (res.chunks === null || res.chunks.length) res.chunksChanged = true; // (null: some came, not parsed)
    res.chunks = [];
    res.chunksJson = '';
    res.written = false;
    st.buffered = 0;
  }
  /** Appends text ('t') or bytes ('bin'), merged into a last chunk of the same kind. */
  function append(kind: 't' | 'bin', data: string): void {
    var res = st.res;
    if (res.error !== null || res.redirect !== null) return; // suspended by sendError / sendRedirect
    res.written = true;
    if (data.length === 0) return;
    // (the body so far, parsed now if it came from an earlier stage, before anything changes)
    var chunks = chunksOf(res);
    if (!res.committed) {
      // Once committed, what is buffered no longer matters. A text longer than the room left
      // commits without its bytes counted (it has at least one byte a UTF-16 unit): a big write is
      // never scanned in the sandbox's interpreter.
      var buffered = bufferedOf(st);
      var room = res.bufferSize - buffered;
      st.buffered = buffered + (kind === 't' && data.length > room ? data.length : chunkByteLength({ k: kind, v: data }, res.characterEncoding));
      if (st.buffered > res.bufferSize) res.committed = true; // the buffer overflowed: flushed
    }
    res.chunksChanged = true;
    var last = chunks.length ? chunks[chunks.length - 1] : null;
    if (last !== null && last.k === kind) last.v += data;
    else {
      // (the host turns each piece into a buffer on its event loop, which every app shares)
      if (chunks.length >= MAX_CHUNKS) throw illegalState('A response body may switch between text and bytes at most ' + (MAX_CHUNKS - 1) + ' times');
      push(chunks, { k: kind, v: data });
    }
  }
  function setContentLengthValue(v: unknown): void {
    var n = isNil(v) ? -1 : toInt(v);
    st.res.contentLength = n >= 0 ? n : null;
  }
  /** Content-Type and Content-Length are response properties, as in a servlet container. `ln`: the name in lower case. */
  function special(ln: string, value: unknown): boolean {
    if (ln === 'content-type') setContentType(value);
    else if (ln === 'content-length') setContentLengthValue(value);
    else return false;
    return true;
  }
  /** RFC 9110 token characters: visible ASCII except the separators "(),/:;<=>?@[\]{} (\w: A-Z a-z 0-9 _, without the u flag) */
  var TOKEN = /^[\w!#$%&'*+.^`|~-]+$/;
  /** Control characters except tab, DEL, and anything past Latin-1. */
  var BAD_VALUE = /[\x00-\x08\x0a-\x1f\x7f\u0100-\uffff]/;
  /** Names that passed -> in lower case (most scripts set a few, again and again). */
  var goodName = nameCache(64, function (n) {
    if (reExec(TOKEN, n) === null) throw illegalArgument('Invalid header name: ' + n);
    return toLowerCase(n);
  });
  /** Checks a header (its name must be an HTTP token, its value hold no CR, LF or other control character); returns its name in lower case. */
  function checkHeader(n: string, value: string | null | undefined): string {
    var ln = goodName(n);
    if (!isNil(value) && reExec(BAD_VALUE, value) !== null) throw illegalArgument('Invalid character in the value of header ' + n);
    return ln;
  }
  /** A header's value as text, converted once: what is checked is what is kept (a toString may answer differently each time). */
  function textOnce(value: unknown): string | null | undefined {
    return isNil(value) ? value : Str(value);
  }
  /** A header past MAX_HEADERS (each one costs the host's event loop, shared by every app). */
  function tooManyHeaders(): Error {
    return illegalState('A script may set at most ' + MAX_HEADERS + ' response headers');
  }
  /**
   * Throws when the response's headers would hold more than MAX_HEAD_CHARS characters in all
   * (names, values, content type and charset): the host checks and sets them on its event loop,
   * which every app shares, and no client reads such a head anyway. `extra`: characters about to be added.
   */
  function checkHeadRoom(headers: Array<[string, string]>, contentType: string | null, encoding: string | null, extra: number): void {
    var n = extra + (contentType === null ? 0 : contentType.length) + (encoding === null ? 0 : encoding.length);
    for (var i = 0; i < headers.length; i++) n += headers[i][0].length + headers[i][1].length;
    if (n > MAX_HEAD_CHARS) throw illegalState('The response headers may hold at most ' + MAX_HEAD_CHARS + ' characters in all');
  }
  /** setHeader keeps the position of the first entry of that name and drops the others. */
  function setHeader(name: unknown, value0: unknown): void {
    var res = st.res;
    if (res.committed || isNil(name)) return;
    var n = Str(name);
    if (n === '') return;
    var value = textOnce(value0);
    var ln = checkHeader(n, value);
    if (special(ln, value)) return;
    var h = res.headers;
    if (h.length === 0) {
      // (the usual case: no header yet)
      if (!isNil(value)) {
        checkHeadRoom(h, res.contentType, res.characterEncoding, n.length + value.length);
        res.headers = [[n, value]];
      }
      return;
    }
    var kept: Array<[string, string]> = [];
    var placed = isNil(value);
    for (var i = 0; i < h.length; i++) {
      if (lower(h[i][0]) !== ln) push(kept, h[i]);
      else if (!placed) (placed = true), push(kept, [n, value as string]);
    }
    if (!placed) {
      if (kept.length >= MAX_HEADERS) throw tooManyHeaders();
      push(kept, [n, value as string]);
    }
    checkHeadRoom(kept, res.contentType, res.characterEncoding, 0);
    res.headers = kept;
  }
  function addHeader(name: unknown, value0: unknown): void {
    var res = st.res;
    if (res.committed || isNil(name)) return;
    var n = Str(name);
    if (n === '') return;
    var value = textOnce(value0);
    if (special(checkHeader(n, value), value) || isNil(value)) return;
    if (res.headers.length >= MAX_HEADERS) throw tooManyHeaders();
    checkHeadRoom(res.headers, res.contentType, res.characterEncoding, n.length + value.length);
    push(res.headers, [n, value]);
  }
  /** set/addDateHeader, set/addIntHeader: `put` of the value as `conv` writes it; ignored (`conv` not called) once committed, as every header change. */
  function convHeader(put: (name: unknown, value: unknown) => void, conv: (value: unknown) => string): (name: unknown, value: unknown) => void {
    return (name, value) => void (r().committed || put(name, conv(value)));
  }
  function intText(value: unknown): string {
    var n = toInt(value);
    if (n !== n) throw illegalArgument('Invalid int header value: ' + safeString(value));
    return '' + n;
  }
  function getHeaders(name: unknown): string[] {
    var out: string[] = [];
    if (isNil(name)) return out;
    var ln = lower(name);
    var res = st.res;
    if (ln === 'content-type') {
      if (res.contentType !== null) push(out, getContentType() as string);
      return out;
    }
    if (ln === 'content-length' && res.contentLength !== null) return [('' + res.contentLength)];
    for (var i = 0; i < res.headers.length; i++) if (lower(res.headers[i][0]) === ln) push(out, res.headers[i][1]);
    if (out.length === 0 && ln === 'location' && res.redirect !== null) push(out, res.redirect);
    return out;
  }
  function getHeaderNames(): string[] {
    var res = st.res;
    var out: string[] = [];
    var seen: { [ln: string]: boolean } = objectCreate(null);
    if (res.contentType !== null) (seen['content-type'] = true), push(out, 'Content-Type');
    if (res.contentLength !== null) (seen['content-length'] = true), push(out, 'Content-Length');
    for (var i = 0; i < res.headers.length; i++) {
      var ln = lower(res.headers[i][0]);
      if (seen[ln] !== true) (seen[ln] = true), push(out, res.headers[i][0]);
    }
    if (res.redirect !== null && seen['location'] !== true) push(out, 'Location'); // (as getHeader answers it)
    return out;
  }
  function getWriter(): ResponseWriter {
    if (st.writer) return st.writer;
    var closed = false;
    var text = (s: string) => closed || append('t', s);
    // (its methods answer the writer as `st.writer`, set while they run: a closure holding the
    // writer itself would make a cycle, freed only by QuickJS's cycle collection)
    var printf = function (fmt: unknown): ResponseWriter {
      text(formatJava(fmt, arguments, 1));
      return st.writer!;
    };
    var writer: ResponseWriter = {
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
      append: (v) => (text(jstr(v)), st.writer!),
      printf: printf,
      format: printf,
      flush: () => void (closed || flushBuffer()),
      close: () => void (closed || flushBuffer(), (closed = true)),
      checkError: () => false,
    };
    st.writer = bindAll(writer, st);
    return writer;
  }
  function getOutputStream(): ResponseOutputStream {
    if (st.stream) return st.stream;
    var closed = false;
    var bytes = (bin: string) => closed || append('bin', bin);
    var stream: ResponseOutputStream = {
      /** write(int): one byte | write(bytes[, off, len]): array, typed array, ArrayBuffer | write(string): UTF-8 */
      write: (b, off, len) => void bytes(bytesOf(b, off, len)),
      print: (v) => void bytes(utf8Binary(jstr(v))),
      /** As ServletOutputStream.println: CRLF. */
      println: function (v) {
        bytes(utf8Binary((arguments.length === 0 ? '' : jstr(v)) + '\r\n'));
      },
      flush: () => void (closed || flushBuffer()),
      close: () => void (closed || flushBuffer(), (closed = true)),
      isReady: () => true,
    };
    st.stream = bindAll(stream, st);
    return stream;
  }
  /** Throws when the response is committed: `what` cannot be done then. */
  function uncommitted(what: string): void {
    if (r().committed) throw illegalState('Cannot ' + what + ' after the response has been committed');
  }
  /** The MIME type with ';charset=' when an encoding was set; null until a type is set. */
  function getContentType(): string | null {
    var res = r();
    if (res.contentType === null) return null;
    return res.characterEncoding === null ? res.contentType : res.contentType + ';charset=' + res.characterEncoding;
  }
  /** 'text/html; charset=ISO-8859-1' -> contentType 'text/html', characterEncoding 'ISO-8859-1'. */
  function setContentType(type: unknown): void {
    var res = r();
    if (res.committed) return;
    st.answered = true;
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
    checkHeadRoom(res.headers, base === '' ? null : base, charset || res.characterEncoding, 0);
    res.contentType = base === '' ? null : base;
    if (charset) res.characterEncoding = charset;
  }
  /** flushBuffer, and a Writer's or OutputStream's flush and close: commits the response. */
  function flushBuffer(): void {
    st.res.committed = true;
  }
  var sameUrl: UrlOf = (url) => (isNil(url) ? url : Str(url));
  var setLength = (len: unknown) => void (r().committed || setContentLengthValue(len));

  var api: ResponseApi = {
    getCharacterEncoding: () => r().characterEncoding ?? 'UTF-8', // (a string or null, never undefined)
    getContentType: getContentType,
    getOutputStream: getOutputStream,
    getWriter: getWriter,
    setCharacterEncoding: function (enc) {
      var res = r();
      if (res.committed) return;
      var e: string | null = isNil(enc) ? null : trim(Str(enc));
      if (e === '') e = null;
      checkHeadRoom(res.headers, res.contentType, e, 0);
      res.characterEncoding = e;
    },
    setContentLength: setLength,
    setContentLengthLong: setLength,
    setContentType: setContentType,
    containsHeader: (name) => getHeaders(name).length > 0,
    encodeURL: sameUrl,
    encodeRedirectURL: sameUrl,
    encodeUrl: sameUrl,
    encodeRedirectUrl: sameUrl,
    /** Clears the buffer, records the error page to send and commits. */
    sendError: function (sc, msg) {
      uncommitted('call sendError()');
      var code = statusCode(sc);
      clearBuffer();
      var res = r();
      res.status = code;
      res.error = { status: code, message: isNil(msg) ? null : Str(msg) };
      res.committed = true;
    },
    /** Clears the buffer, records a 302 to `location` and commits. */
    sendRedirect: function (location) {
      uncommitted('call sendRedirect()');
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
    setDateHeader: convHeader(setHeader, httpDate),
    addDateHeader: convHeader(addHeader, httpDate),
    setIntHeader: convHeader(setHeader, intText),
    addIntHeader: convHeader(addHeader, intText),
    setStatus: function (sc) {
      if (r().committed) return; // ignored once committed, as in a container
      r().status = statusCode(sc);
      st.answered = true;
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
      if (res.written || res.committed || bufferedOf(st) > 0) throw illegalState('Cannot set the buffer size after content has been written');
      var n = toInt(size);
      if (n !== n) throw illegalArgument('Invalid buffer size: ' + safeString(size));
      res.bufferSize = mathMax(0, n);
    },
    flushBuffer: flushBuffer,
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
      uncommitted('reset the buffer');
      clearBuffer();
    },
    isCommitted: () => r().committed,
  };
  var proto: { [name: string]: ProtoMethod } = {};
  for (var keys = objectKeys(api) as Array<keyof ResponseApi>, i = 0; i < keys.length; i++) {
    // (no method of `api` takes more than two arguments or reads `arguments`)
    proto[keys[i]] = (function (fn: (a: unknown, b: unknown) => unknown): ProtoMethod {
      return function (this: unknown, a: unknown, b: unknown): unknown {
        var prev = st;
        st = apiRec(this, 'ctx.response');
        try {
          return fn(a, b);
        } finally {
          st = prev;
        }
      };
    })(api[keys[i]]);
  }
  return freeze(proto);
}
var ResProto = buildResponseProto();
/** The response object of a stage (its st.responseApi). */
export function makeResponse(st: StageRecord): ResponseApi {
  var o: ResponseApi = objectCreate(ResProto);
  wmSet(apiStage, o, st);
  return o;
}
