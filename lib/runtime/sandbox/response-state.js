/*
 * Sandbox adapter fragment: the carried response state.
 *
 * Holds responseFromInput (a carried ResponseState -> internal state), chunkByteLength
 * and responseToPlain (internal state -> ResponseState for the StageOutput). Internal chunks:
 * {k:'t', v:text} | {k:'b', v:base64 from an earlier stage} | {k:'bin', v:binary string written
 * in this stage}.
 *
 * Expects from prelude.js: getOwn, isArray, isObj, push, Str, lower; from encoding.js: base64,
 * base64ByteLength, utf8Length.
 */
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
