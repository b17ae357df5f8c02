/*
 * Sandbox adapter module: the carried response state.
 *
 * Holds responseFromInput (a carried ResponseState -> internal state), chunkByteLength
 * and encResponse (internal state -> the changed fields, as partial ResponseState JSON for the
 * StageOutput). Internal chunks:
 * {k:'t', v:text} | {k:'b', v:base64 from an earlier stage} | {k:'bin', v:binary string written
 * in this stage}.
 */
import { Str, freeze, getOwn, isArray, isObj, lower, objectCreate, push, setOwn } from './prelude';
import { base64, base64ByteLength, enc, utf8Length } from './encoding';
import type { Chunk, Fields, ResFields, ResState } from './types';
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
var STARTING = freeze(responseFromInput({}).base);
/**
 * The internal state of a carried ResponseState (null: the response as it starts). `base` holds
 * the fields as the stage got them, `headers0` / `headerCount0` its header list, and
 * `chunksChanged` says the body changed: encResponse sends only what differs from them.
 */
export function responseFromInput(r: unknown): ResState {
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
      chunks: [],
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
  var chunks: Chunk[] = [];
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
  var res: ResState = {
    status: pick(r, 'status', 'number', 200),
    headers: headers,
    contentType: pick(r, 'contentType', 'string', null),
    characterEncoding: pick(r, 'characterEncoding', 'string', null),
    contentLength: pick(r, 'contentLength', 'number', null),
    bufferSize: pick(r, 'bufferSize', 'number', 8192),
    chunks: chunks,
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
    for (i = 0; i < r.chunks.length; i++) {
      var ch = r.chunks[i];
      push(chunks, ch.k === 't' ? { t: ch.v } : { b: ch.k === 'b' ? ch.v : base64(ch.v) });
    }
    setOwn(out, 'chunks', chunks);
    changed = true;
  }
  return changed ? prefix + enc(out) : '';
}
