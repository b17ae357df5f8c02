/*
 * Sandbox adapter fragment: the carried response state.
 *
 * Holds responseFromInput (a carried ResponseState -> internal state), chunkByteLength
 * and encResponse (internal state -> ResponseState JSON for the StageOutput). Internal chunks:
 * {k:'t', v:text} | {k:'b', v:base64 from an earlier stage} | {k:'bin', v:binary string written
 * in this stage}.
 *
 * Expects from prelude.js: getOwn, isArray, isObj, push, Str, lower; from encoding.js: base64,
 * base64ByteLength, utf8Length.
 */
function responseFromInput(r) {
  if (r === null) {
    // the response as it starts (sent as '')
    return { status: 200, headers: [], contentType: null, characterEncoding: null, contentLength: null, bufferSize: 8192, chunks: [], written: false, committed: false, error: null, redirect: null };
  }
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
/** A string or null as JSON. */
function encText(v) {
  return isNil(v) ? 'null' : jsonStringify(Str(v));
}
/** A finite number as JSON, else null (what JSON.stringify writes). */
function encNumber(v) {
  return typeof v === 'number' && v === v && v !== 1 / 0 && v !== -1 / 0 ? '' + v : 'null';
}
/**
 * The internal state as ResponseState JSON, written field by field (the generic `enc` walk was
 * most of an after hook's cost in QuickJS). Binary chunks written in this stage go as base64.
 */
function encResponse(r) {
  var headers = '';
  var i;
  for (i = 0; i < r.headers.length; i++) {
    headers += (i ? ',[' : '[') + encText(r.headers[i][0]) + ',' + encText(r.headers[i][1]) + ']';
  }
  var chunks = '';
  for (i = 0; i < r.chunks.length; i++) {
    var ch = r.chunks[i];
    chunks += (i ? ',' : '') + (ch.k === 't' ? '{"t":' + encText(ch.v) : '{"b":' + encText(ch.k === 'b' ? ch.v : base64(ch.v))) + '}';
  }
  var e = r.error;
  return (
    '{"status":' + encNumber(r.status) +
    ',"headers":[' + headers +
    '],"contentType":' + encText(r.contentType) +
    ',"characterEncoding":' + encText(r.characterEncoding) +
    ',"contentLength":' + encNumber(r.contentLength) +
    ',"bufferSize":' + encNumber(r.bufferSize) +
    ',"chunks":[' + chunks +
    '],"written":' + (r.written === true ? 'true' : 'false') +
    ',"committed":' + (r.committed === true ? 'true' : 'false') +
    ',"error":' + (isObj(e) ? '{"status":' + encNumber(e.status) + ',"message":' + encText(e.message) + '}' : 'null') +
    ',"redirect":' + encText(r.redirect) +
    '}'
  );
}
