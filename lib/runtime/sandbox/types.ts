/*
 * Sandbox adapter module: the adapter's own records, as types (erased when the adapter is
 * bundled). The data crossing the sandbox boundary is typed in lib/runtime/protocol.ts.
 */
import type { ChainedHead, ResponseState, SerializedOutput, StageHead, ThrownError } from '../protocol';
import type { ResponseApi, ResponseOutputStream, ResponseWriter } from './response';
import type { Part } from './request';

/** A body chunk of the internal response: text, base64 from an earlier stage, or a binary string written in this stage. */
export interface Chunk {
  k: 't' | 'b' | 'bin';
  v: string;
}

/** The RES_FIELDS of a response (response-state.ts): what encResponse compares with the stage's input. */
export type ResFields = Pick<ResponseState, 'status' | 'contentType' | 'characterEncoding' | 'contentLength' | 'bufferSize' | 'written' | 'committed' | 'error' | 'redirect'>;

/** The response state inside a stage (response-state.ts: responseFromInput, encResponse). */
export interface ResState extends ResFields {
  headers: Array<[string, string]>;
  /** The body; null until first used (response-state.ts: chunksOf), parsed then from chunksJson. */
  chunks: Chunk[] | null;
  /** The body's chunks as the stage got them, JSON (BodyChunk[]), until they are parsed. */
  chunksJson: string;
  /** The fields as the stage got them. */
  base: ResFields;
  /** The header list as the stage got it, and its length then. */
  headers0: Array<[string, string]>;
  headerCount0: number;
  /** The body changed in this stage. */
  chunksChanged: boolean;
}

/** The snapshot fields a stage reads without a prototype (entry.ts: StageProto.fields / req). */
export type Fields = { [key: string]: unknown };

/** Attributes within a stage: a map without a prototype. */
export type Attributes = { [name: string]: unknown };

/**
 * One stage in flight (entry.ts: start). Its carried state is parsed on first use through the
 * getters of StageProto (req, fields, maps, attrs, res).
 */
export interface StageRecord {
  id: number;
  /** Its head (entry.ts: stageHead, shared by the stages of the same head): stage, returnType, wantValue, async; the chained stage's once it runs on (chain.ts). */
  head: Readonly<StageHead> | Readonly<ChainedHead>;
  /** The context's module namespace, or its namespaces by module (a context holding several). */
  ns: unknown;
  /** The stages it may run on to (StageHead.next; chain.ts), and how many of them it ran. */
  chain: ReadonlyArray<Readonly<ChainedHead>> | undefined;
  at: number;
  /** The StageOutput JSON of each stage it ran before the one running now, joined by commas. */
  chainOut: string;
  /** The state fields of a StageOutput (attributes, response) as the stage before it ran on left them ('' for none): what a stage it went on to that never settles leaves (chain.ts). */
  carried: string;
  /** The output its result was serialized to already (chain.ts), else null. */
  out: SerializedOutput | null;
  /** The RequestSnapshot JSON ('' : asked of the host on first use). */
  requestJson: string;
  /** The CtxFields JSON (absent or '': read them from the snapshot). */
  ctxJson: string | undefined;
  /** The CtxMaps JSON (absent or '': read them from the snapshot). */
  mapsJson: string | undefined;
  /** The request body; null: asked of the host on first read (ctx.ts); absent: the snapshot's. */
  body: string | null | undefined;
  attrsJson: string;
  responseJson: string;
  /** The response body's chunks, JSON ('': none, or inside responseJson). */
  chunksJson: string;
  status: 'pending' | 'value' | 'error';
  done: boolean;
  /** Async host calls of the stage in flight (host.ts). */
  waiting: number;
  fieldsObj: Fields | null;
  mapsObj: Fields | null;
  reqObj: Fields | null;
  attrsObj: Attributes | null;
  attrsChanged: boolean;
  resObj: ResState | null;
  /** Bytes in the response buffer; null until first used (response-state.ts: bufferedOf). */
  buffered: number | null;
  parts: Part[] | null;
  requestApi: object | null;
  responseApi: ResponseApi | null;
  /** getWriter() / getOutputStream() of the stage, made on first use. */
  writer: ResponseWriter | null;
  stream: ResponseOutputStream | null;
  value: unknown;
  error: ThrownError | null;
  /** Set by platform.app.abort: wins over the stage's own result. */
  abort: ThrownError | null;
  /** The stage set the status or the content type (setStatus, setContentType), whatever the value was before. */
  answered: boolean;
  /** Getters of StageProto. */
  readonly req: Fields;
  readonly fields: Fields;
  readonly maps: Fields;
  readonly attrs: Attributes;
  readonly res: ResState;
}

/** An async host call in flight (host.ts). */
export interface PendingCall {
  st: StageRecord;
  op: string;
  ok(value: unknown): void;
  fail(error: unknown): void;
  /** Made at the call: the error a failed reply throws, so its stack holds the script's frames. */
  at: Error;
}
