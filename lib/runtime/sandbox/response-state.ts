/*
 * Sandbox adapter module: the carried response state.
 *
 * Holds responseFromInput (a carried ResponseState -> internal state), chunksOf and bufferedOf
 * (the body and its size in bytes, read from their own text only when a stage uses them: a stage
 * setting a header after a body was written never parses the body), chunkByteLength and
 * encResponse (internal state -> the changed fields, as partial ResponseState JSON for the
 * StageOutput). Internal chunks:
 * {k:'t', v:text} | {k:'b', v:base64 from an earlier stage} | {k:'bin', v:binary string written
 * in this stage}.
 */
import { Str, freeze, getOwn, isArray, isObj, jsonParse, lower, objectCreate, push, setOwn } from './prelude';
import { base64, base64ByteLength, enc, utf8Length } from './encoding';
import type { Chunk, Fields, ResFields, ResState, StageRecord } from './types';
import type { BodyChunk, ResponseState } from '../protocol';

/** The values of the `typeof` names pick is given. */
interface TypeofValues {
  number: number;
  string: string;
  boolean: boolean;
}
/** Field `k` of a carried state `r` when it has type `type`, else `dflt`. */
function pick<T extends keyof TypeofValues, D>(r: unknown, k: string, type: T, dflt: D): TypeofValues[T] | D {
  var v = getOwn(r, k);
  return typeof v === type ? (v as TypeofValues[T]) : dflt;
}
/** The fields encResponse compares with the stage's input (headers and chunks are compared apart). */
var RES_FIELDS: Array<keyof ResFields> = ['status', 'contentType', 'characterEncoding', 'contentLength', 'bufferSize', 'written', 'committed', 'error', 'redirect'];
/**
 * RES_FIELDS of the response as it starts (newResponseState in lib/runtime/protocol.ts): only
 * ever compared. The `base` of a carried state with no field: each field's default.
 */
var STARTING = freeze(responseFromInput({}, '').base);
/**
 * The internal state of a carried ResponseState (null: the response as it starts). `base` holds
 * the fields as the stage got them, `headers0` / `headerCount0` its header list, and
 * `chunksChanged` says the body changed: encResponse sends only what differs from them.
 */
export function responseFromInput(r: unknown, chunksJson: string): ResState {
  if (r === null) {
    // (the common case, written out: reading each field of nothing costs as much as a stage's call)
    var h: Array<[string, string]> = [];
    return {
      status: 200,
      headers: h,
      contentType: null,
      characterEncoding: null,
      contentLength: null,
      bufferSize: 8192,
      chunks: chunksJson === '' ? [] : null,
      chunksJson: chunksJson,
      written: false,
      committed: false,
      error: null,
      redirect: null,
      base: STARTING,
      headers0: h,
      headerCount0: 0,
      chunksChanged: false,
    };
  }
  var headers: Array<[string, string]> = [];
  var list = getOwn(r, 'headers');
  var i;
  if (isArray(list)) {
    for (i = 0; i < list.length; i++) if (isArray(list[i]) && list[i].length >= 2) push(headers, [Str(list[i][0]), Str(list[i][1])]);
  }
  // (the chunks inside the state, as a host may send them, else their own text, parsed when used)
  var cl = getOwn(r, 'chunks');
  var error = getOwn(r, 'error');
  var res: ResState = {
    status: pick(r, 'status', 'number', 200),
    headers: headers,
    contentType: pick(r, 'contentType', 'string', null),
    characterEncoding: pick(r, 'characterEncoding', 'string', null),
    contentLength: pick(r, 'contentLength', 'number', null),
    bufferSize: pick(r, 'bufferSize', 'number', 8192),
    chunks: isArray(cl) ? chunksFrom(cl) : chunksJson === '' ? [] : null,
    chunksJson: isArray(cl) ? '' : chunksJson,
    written: getOwn(r, 'written') === true,
    committed: getOwn(r, 'committed') === true,
    error: isObj(error) ? { status: pick(error, 'status', 'number', 500), message: pick(error, 'message', 'string', null) } : null,
    redirect: pick(r, 'redirect', 'string', null),
    base: objectCreate(null),
    headers0: headers,
    headerCount0: headers.length,
    chunksChanged: false,
  };
  for (i = 0; i < RES_FIELDS.length; i++) (res.base as Fields)[RES_FIELDS[i]] = res[RES_FIELDS[i]];
  return res;
}
/** Carried BodyChunks as internal chunks. */
function chunksFrom(cl: unknown): Chunk[] {
  var chunks: Chunk[] = [];
  if (isArray(cl)) {
    for (var i = 0; i < cl.length; i++) {
      var t = getOwn(cl[i], 't');
      var b = getOwn(cl[i], 'b');
      if (typeof t === 'string') push(chunks, { k: 't', v: t });
      else if (typeof b === 'string') push(chunks, { k: 'b', v: b });
    }
  }
  return chunks;
}
/** The body of a stage's response, parsed on first use. */
export function chunksOf(r: ResState): Chunk[] {
  if (r.chunks === null) {
    r.chunks = chunksFrom(jsonParse(r.chunksJson));
    r.chunksJson = '';
  }
  return r.chunks;
}
/**
 * Bytes in a stage's response buffer, counted on first use: the chunks it got by the character
 * encoding they were written under (the one it got), those it wrote as it wrote them (append).
 */
export function bufferedOf(st: StageRecord): number {
  if (st.buffered === null) {
    var res = st.res;
    var chunks = chunksOf(res);
    var n = 0;
    for (var j = 0; j < chunks.length; j++) n += chunkByteLength(chunks[j], res.base.characterEncoding);
    st.buffered = n;
  }
  return st.buffered;
}
export function chunkByteLength(ch: Chunk, charset: string | null): number {
  if (ch.k === 'b') return base64ByteLength(ch.v);
  if (ch.k === 'bin') return ch.v.length;
  var c = charset === null ? '' : lower(charset);
  return c === 'iso-8859-1' || c === 'latin1' || c === 'us-ascii' ? ch.v.length : utf8Length(ch.v);
}
/**
 * The fields of the internal state that differ from what the stage got, as a partial
 * ResponseState JSON object after `prefix` ('' when nothing differs). Binary chunks written in
 * this stage go as base64. The host lays it over the state it sent.
 */
export function encResponse(r: ResState, prefix: string): string {
  var out: Partial<ResponseState> = {};
  var changed = false;
  var i;
  for (i = 0; i < RES_FIELDS.length; i++) {
    var k = RES_FIELDS[i];
    if (r[k] !== r.base[k]) (setOwn(out, k, r[k]), (changed = true));
  }
  if (r.headers !== r.headers0 || r.headers.length !== r.headerCount0) (setOwn(out, 'headers', r.headers), (changed = true));
  if (r.chunksChanged) {
    var chunks: BodyChunk[] = [];
    var own = chunksOf(r);
    for (i = 0; i < own.length; i++) {
      var ch = own[i];
      push(chunks, ch.k === 't' ? { t: ch.v } : { b: ch.k === 'b' ? ch.v : base64(ch.v) });
    }
    setOwn(out, 'chunks', chunks);
    changed = true;
  }
  return changed ? prefix + enc(out) : '';
}
