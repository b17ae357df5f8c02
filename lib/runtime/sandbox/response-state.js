/*
 * Sandbox adapter fragment: the carried response state.
 *
 * Holds responseFromInput (a carried ResponseState -> internal state), chunkByteLength
 * and encResponse (internal state -> the changed fields, as partial ResponseState JSON for the
 * StageOutput). Internal chunks:
 * {k:'t', v:text} | {k:'b', v:base64 from an earlier stage} | {k:'bin', v:binary string written
 * in this stage}.
 *
 * Expects from prelude.js: getOwn, isArray, isObj, push, Str, lower, objectKeys, IS_QUICKJS; from encoding.js: base64,
 * base64ByteLength, utf8Length.
 */
/** The response as it starts (sent as ''): the `base` of a state made from no input. */
var RES_PRISTINE = freeze({
  __proto__: null,
  status: 200,
  contentType: null,
  characterEncoding: null,
  contentLength: null,
  bufferSize: 8192,
  written: false,
  committed: false,
  error: null,
  redirect: null,
});
/** The chunks of a state that has none yet (frozen, shared): append() gives the state its own list. */
var NO_CHUNKS = freeze([]);
/**
 * Under QuickJS, a state made from no input reads its other fields from here until it writes its
 * own (see IS_QUICKJS in prelude.js). Not frozen: a write to a field must make an own one.
 */
var RES_FRESH = { __proto__: null, base: RES_PRISTINE, headerCount0: 0, chunksChanged: false, chunks: NO_CHUNKS };
for (var freshKeys = objectKeys(RES_PRISTINE), fk = 0; fk < freshKeys.length; fk++) RES_FRESH[freshKeys[fk]] = RES_PRISTINE[freshKeys[fk]];
/** Field `k` of a carried state `r` when it has type `type`, else `dflt`. (Not a closure inside
 * responseFromInput: QuickJS makes a function's inner functions on every call, even on the paths
 * that never use them.) */
function pick(r, k, type, dflt) {
  var v = getOwn(r, k);
  return typeof v === type ? v : dflt;
}
/**
 * The internal state. `base` holds the state's fields as the stage got them (RES_PRISTINE, or
 * the parsed input's), `headers0` / `headerCount0` its header list, and `chunksChanged` says the
 * body changed: encResponse sends only what differs from them.
 */
function responseFromInput(r) {
  var headers = [];
  if (r === null && IS_QUICKJS) return { __proto__: RES_FRESH, headers: headers, headers0: headers };
  if (r === null) {
    // (every field an own one from the start, as the stage record: see entry.js)
    return {
      status: 200,
      headers: headers,
      contentType: null,
      characterEncoding: null,
      contentLength: null,
      bufferSize: 8192,
      chunks: [],
      written: false,
      committed: false,
      error: null,
      redirect: null,
      base: RES_PRISTINE,
      headers0: headers,
      headerCount0: 0,
      chunksChanged: false,
    };
  }
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
  var error = getOwn(r, 'error');
  var res = {
    status: pick(r, 'status', 'number', 200),
    headers: headers,
    contentType: pick(r, 'contentType', 'string', null),
    characterEncoding: pick(r, 'characterEncoding', 'string', null),
    contentLength: pick(r, 'contentLength', 'number', null),
    bufferSize: pick(r, 'bufferSize', 'number', 8192),
    chunks: chunks,
    written: getOwn(r, 'written') === true,
    committed: getOwn(r, 'committed') === true,
    error: isObj(error)
      ? {
          status: typeof getOwn(error, 'status') === 'number' ? getOwn(error, 'status') : 500,
          message: typeof getOwn(error, 'message') === 'string' ? getOwn(error, 'message') : null,
        }
      : null,
    redirect: pick(r, 'redirect', 'string', null),
    base: null,
    headers0: headers,
    headerCount0: headers.length,
    chunksChanged: false,
  };
  res.base = {
    __proto__: null,
    status: res.status,
    contentType: res.contentType,
    characterEncoding: res.characterEncoding,
    contentLength: res.contentLength,
    bufferSize: res.bufferSize,
    written: res.written,
    committed: res.committed,
    error: res.error,
    redirect: res.redirect,
  };
  return res;
}
function chunkByteLength(ch, charset) {
  if (ch.k === 'b') return base64ByteLength(ch.v);
  if (ch.k === 'bin') return ch.v.length;
  var c = charset === null ? '' : lower(charset);
  return c === 'iso-8859-1' || c === 'latin1' || c === 'us-ascii' ? ch.v.length : utf8Length(ch.v);
}
/** A string or null as JSON. */
function encText(v) {
  return isNil(v) ? 'null' : jsonStringify(Str(v));
}
/** What a header name or value must not hold to be written between quotes as it is. */
var NEEDS_ESCAPE = /["\\\x00-\x1f\ud800-\udfff]/;
/** A finite number as JSON, else null (what JSON.stringify writes). */
function encNumber(v) {
  return typeof v === 'number' && v === v && v !== 1 / 0 && v !== -1 / 0 ? '' + v : 'null';
}
/**
 * A header [name, value] pair as JSON: one regex test for both, and quotes around them when plain.
 * (Both are strings: responseFromInput, setHeader and addHeader store them so.)
 */
function encHeaderPair(h) {
  var n = h[0];
  var v = h[1];
  return reExec(NEEDS_ESCAPE, n + v) === null ? '["' + n + '","' + v + '"]' : '[' + jsonStringify(n) + ',' + jsonStringify(v) + ']';
}
/**
 * The fields of the internal state that differ from what the stage got, as a partial
 * ResponseState JSON object after `prefix` ('' when nothing differs), written field by field
 * (the generic `enc` walk was most of an after hook's cost in QuickJS; each concatenation makes
 * a new string there, so the text is built with as few as it can). Binary chunks written in this
 * stage go as base64. The host lays it over the state it sent.
 */
function encResponse(r, prefix) {
  var o = r.base;
  var s = prefix + '{';
  var empty = s;
  var i;
  if (r.status !== o.status) s += '"status":' + encNumber(r.status);
  if (r.headers !== r.headers0 || r.headers.length !== r.headerCount0) {
    var headers = s === empty ? '"headers":[' : ',"headers":[';
    for (i = 0; i < r.headers.length; i++) headers += (i ? ',' : '') + encHeaderPair(r.headers[i]);
    s += headers + ']';
  }
  if (r.contentType !== o.contentType) s += (s === empty ? '"contentType":' : ',"contentType":') + encText(r.contentType);
  if (r.characterEncoding !== o.characterEncoding) s += (s === empty ? '"characterEncoding":' : ',"characterEncoding":') + encText(r.characterEncoding);
  if (r.contentLength !== o.contentLength) s += (s === empty ? '"contentLength":' : ',"contentLength":') + encNumber(r.contentLength);
  if (r.bufferSize !== o.bufferSize) s += (s === empty ? '"bufferSize":' : ',"bufferSize":') + encNumber(r.bufferSize);
  if (r.chunksChanged) {
    var chunks = s === empty ? '"chunks":[' : ',"chunks":[';
    for (i = 0; i < r.chunks.length; i++) {
      var ch = r.chunks[i];
      chunks += (i ? ',' : '') + (ch.k === 't' ? '{"t":' + encText(ch.v) : '{"b":' + encText(ch.k === 'b' ? ch.v : base64(ch.v))) + '}';
    }
    s += chunks + ']';
  }
  if (r.written !== o.written) s += (s === empty ? '"written":' : ',"written":') + (r.written === true ? 'true' : 'false');
  if (r.committed !== o.committed) s += (s === empty ? '"committed":' : ',"committed":') + (r.committed === true ? 'true' : 'false');
  var e = r.error;
  if (e !== o.error) s += (s === empty ? '"error":' : ',"error":') + (isObj(e) ? '{"status":' + encNumber(e.status) + ',"message":' + encText(e.message) + '}' : 'null');
  if (r.redirect !== o.redirect) s += (s === empty ? '"redirect":' : ',"redirect":') + encText(r.redirect);
  return s === empty ? '' : s + '}';
}
