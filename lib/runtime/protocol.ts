/**
 * Data shapes that cross the sandbox boundary. Everything here is plain JSON: the host builds a
 * RequestSnapshot, the sandbox adapter (lib/runtime/sandbox/*.ts, bundled into one script at
 * build time) builds ctx from it, and each stage's response effects and
 * attributes come back with its result (StageOutput). Messages between threads:
 * lib/runtime/messages.ts.
 */

/** An uploaded file, as the sandbox sees it (its bytes stay on the host). */
export interface PartInfo {
  /** Host-side handle, used by save / saveStorage / saveAttachment host calls. */
  id: string;
  /** Form field name. */
  name: string;
  contentType: string;
  size: number;
  submittedFileName: string | null;
}

/** A copy of the request, made on the host, from which ctx is built inside the sandbox. */
export interface RequestSnapshot {
  requestId: string;
  appId: string;
  /** The configured API path, e.g. `orders/list`. */
  path: string;
  method: string;
  /** The original URL (`req.originalUrl`), with query string. */
  url: string;
  /** Lower-case names; repeated headers joined with `, ` (cookies with `; `). */
  headers: Record<string, string>;
  /** Every value, in arrival order, of the headers that arrived more than once (others: `headers`). */
  headerLists: Record<string, string[]>;
  /** The first value of each cookie name. */
  cookies: Record<string, string>;
  /** Every cookie, `[name, value]` in arrival order, when a name arrived more than once (else `cookies` holds them all). */
  cookieList?: Array<[string, string]>;
  /** String, or array of strings for a repeated key. */
  query: Record<string, string | string[]>;
  /** Raw query string without `?`, or null. */
  queryString: string | null;
  /** Raw body text, '' when none (and for multipart). */
  body: string;
  /** Fields of an urlencoded or multipart form body. */
  form: Record<string, string[]>;
  /** e.g. `HTTP/1.1`. */
  protocol: string;
  scheme: 'http' | 'https';
  serverName: string;
  serverPort: number;
  remoteAddr: string;
  remoteHost: string;
  remotePort: number;
  contentType: string | null;
  characterEncoding: string | null;
  /** Scheme of the Authorization header (`Bearer`, `Basic`), or null. */
  authType: string | null;
  /** Mount path of the router (`req.baseUrl`), e.g. `/web0/api`. */
  contextPath: string;
  /** `/<appId>`. */
  servletPath: string;
  /** `/<path>`. */
  pathInfo: string;
  /** Path part of the URL, without query string. */
  requestURI: string;
  parts: PartInfo[];
}

/** One chunk of buffered response body: text (`t`) or base64 bytes (`b`). */
export type BodyChunk = { t: string } | { b: string };

/** Response effects recorded by ctx.response, carried from stage to stage. */
export interface ResponseState {
  status: number;
  /** Header list in order; `setHeader` replaces every entry of that name (case-insensitive). */
  headers: Array<[string, string]>;
  contentType: string | null;
  characterEncoding: string | null;
  contentLength: number | null;
  bufferSize: number;
  chunks: BodyChunk[];
  /** The script wrote to the body: the response is what it wrote. */
  written: boolean;
  /** flushBuffer() was called, the buffer overflowed, or sendError / sendRedirect ran. */
  committed: boolean;
  /** Set by sendError(sc[, msg]). */
  error: { status: number; message: string | null } | null;
  /** Set by sendRedirect(location). */
  redirect: string | null;
}

/** State shared by the stages of one request. */
export interface CarriedState {
  /** Request attributes (JSON copies; Dates become ms timestamps). */
  attributes: Record<string, unknown>;
  response: ResponseState;
}

export type Stage = 'before' | 'call' | 'after' | 'onError';

/** The APIError of the spec, passed to onError. */
export interface ApiErrorInfo {
  requestId: string;
  message: string;
  code: number;
}

/**
 * The request snapshot's short scalar fields that ctx carries itself (in ctx's own key order):
 * what every stage parses (the adapter's `start` receives them as JSON). The body, of any size,
 * comes as a text of its own: never escaped into JSON and parsed again by the engine.
 */
export type CtxFields = Pick<RequestSnapshot, 'url' | 'appId' | 'path' | 'method'>;

/**
 * The snapshot's maps that ctx carries (headers, cookies, query), with headerLists: parsed only
 * when a stage reads one of them (from ctx or the request API); the rest of the snapshot only on
 * demand.
 */
export type CtxMaps = Pick<RequestSnapshot, 'headers' | 'cookies' | 'query' | 'headerLists'>;

export function ctxFields(r: RequestSnapshot): CtxFields {
  return { url: r.url, appId: r.appId, path: r.path, method: r.method };
}

export function ctxMaps(r: RequestSnapshot): CtxMaps {
  return { headers: r.headers, cookies: r.cookies, query: r.query, headerLists: r.headerLists };
}

/** The per-stage part of what the adapter's `start` receives (as a JSON string). */
export interface StageHead {
  stage: Stage;
  returnType: 'JSON' | 'Text' | 'File' | 'Redirect';
  /** Include `value` (the JSON copy of the return value) in the output. */
  wantValue: boolean;
  /** Async mode: the stage's I/O host calls return promises (see docs/script-engine.md). */
  async: boolean;
  /** The module of the context whose function the stage runs (a context may hold several: see `next`); absent: 0. */
  module?: number;
  /**
   * The stages the adapter runs on to in the same entry (each with a fresh ctx), while each one
   * before ends as the pipeline would go on from it (lib/runtime/sandbox/chain.ts): a before hook
   * that answered nothing, a call that succeeded with a fitting result and no redirect.
   */
  next?: ChainedHead[];
}

/** A stage the adapter may run on to (StageHead.next): its function too. */
export interface ChainedHead extends Omit<StageHead, 'next'> {
  fn: string;
}

/** The return value serialized for the API's return type, inside the sandbox. */
export type SerializedOutput =
  | { type: 'JSON'; json: string }
  | { type: 'Text'; text: string }
  | { type: 'Redirect'; location: string }
  | { type: 'File'; file: { path: string | null; storagePath: string | null; name: string | null; contentDisposition: string | null } }
  | { type: 'invalid'; message: string };

/** An error thrown by a script, as the adapter reports it. */
export interface ThrownError {
  name: string;
  message: string;
  /** Numeric `code` carried by the thrown value, if any. */
  code?: number;
  /** HTTP status (set for abort with a status). */
  status?: number;
  stack?: string;
}

/** One settled stage, as the adapter's `drain` reports it (JSON). */
export interface StageOutput {
  /** The stage id the engine gave `start`. */
  id?: number;
  /** `pending`: the stage can never settle (nothing it could wait for is in flight). */
  status: 'value' | 'error' | 'pending';
  /** The function returned something other than undefined. */
  hasValue: boolean;
  value?: unknown;
  output?: SerializedOutput;
  error?: ThrownError;
  /** The attributes after the stage; absent when the stage did not touch them (unchanged). */
  attributes?: Record<string, unknown>;
  /**
   * The fields of the response state the stage changed (the others keep the values it was
   * given); absent when it changed none.
   */
  response?: Partial<ResponseState>;
  /** The stage set the status or content type (even to the value it had): onError's answer without a body. */
  answered?: boolean;
  /**
   * The stages of StageHead.next run before this one, in order, each as it ended (value and
   * output, without state): this output is the last stage's, with the state all of them changed.
   */
  chain?: StageOutput[];
}

/**
 * The adapter's entry object, which an engine drives (lib/runtime/sandbox/entry.ts; the contract
 * in lib/runtime/sandbox/prelude.ts). Every text argument is JSON ('' where a part may be absent)
 * but `body`, the request body itself or null (asked of the host on first read), or in its place
 * `bodyJson`, the body as a JSON string.
 */
export interface AdapterEntry {
  /** Starts stage `stageId`: `ns[fnName](ctx[, value])`, `ns` being the script's module namespace. */
  start(stageId: number, ns: unknown, fnName: string, head: string, request: string, attributes: string, response: string, value: string, ctx?: string, maps?: string, body?: string | null, bodyJson?: string, chunks?: string): void;
  /** Settles an async host call with its reply (a HostReply). */
  reply(callId: number, replyJson: string): void;
  /** `{"waiting":N,"outputs":[StageOutput, ...]}`: the stages settled since the last drain. */
  drain(): string;
  /** Forgets a stage: its pending host calls are dropped. */
  cancel(stageId: number): void;
  /**
   * Where stage `stageId` is in its chain (StageHead.next): `{"at":N}`, N the stages it ran on to,
   * with the `attributes` and `response` fields of a StageOutput as it went on to the last ('' when
   * the stage is not in flight). Runs no script code.
   */
  at(stageId: number): string;
}

export function newResponseState(): ResponseState {
  return {
    status: 200,
    headers: [],
    contentType: null,
    characterEncoding: null,
    contentLength: null,
    bufferSize: 8192,
    chunks: [],
    written: false,
    committed: false,
    error: null,
    redirect: null,
  };
}

/**
 * The names the host-call rewrite uses so that, across a wait, a script's code goes on acting for
 * its own call (lib/runtime/sandbox/continuations.ts): each `await` of a script in async mode is
 * written `__resume(__current(), await x)`, and each `try` of an async function
 * `{const __callToken = __current(); try ... catch (e) {__resume(__callToken); ...} finally
 * {__resume(__callToken); ...}}` (lib/runtime/rewrite/edits.ts). `__current` and `__resume` are
 * global `const` bindings, not properties of the global object: the adapter hands them over as
 * `globalThis.__continuations`, and CONTINUATION_SCRIPT, evaluated as global code right after the
 * adapter, binds them and deletes it.
 */
export const CONTINUATION_GLOBALS = { current: '__current', resume: '__resume', handoff: '__continuations', token: '__callToken' } as const;

/** Global code an engine evaluates once in a context, right after calling the adapter (see CONTINUATION_GLOBALS). */
export const CONTINUATION_SCRIPT = ((g) => `const ${g.current} = ${g.handoff}.current, ${g.resume} = ${g.handoff}.resume; delete globalThis.${g.handoff};`)(CONTINUATION_GLOBALS);
