/**
 * Data shapes that cross the sandbox boundary. Everything here is plain JSON: the host builds a
 * RequestSnapshot, the sandbox adapter (lib/runtime/sandbox/*.js, joined by lib/runtime/adapter-source.ts) builds ctx from it, and
 * response effects and attributes come back in one batch (StageOutput).
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
  cookies: Record<string, string>;
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
 * The per-stage part of what the adapter's `invoke` receives (as a JSON string). It holds no
 * per-request data, so the adapter parses each distinct head once per context and reuses it;
 * the stage's argument (the call's result, the API error) travels in `StageCall.value`.
 */
export interface StageHead {
  stage: Stage;
  returnType: 'JSON' | 'Text' | 'File' | 'Redirect';
  /** Include `value` (the JSON copy of the return value) in the output. */
  wantValue: boolean;
}

/**
 * The arguments of one stage, as JSON texts. The adapter parses `request`, `attributes` and
 * `response` only when the script first uses them, so a stage that touches none of them costs
 * almost nothing; the request text is built once per job and shared by its stages.
 */
export interface StageCall {
  /** StageHead JSON. */
  head: string;
  /** RequestSnapshot JSON. */
  request: string;
  /** CarriedState.attributes JSON. */
  attributes: string;
  /** CarriedState.response (ResponseState) JSON. */
  response: string;
  /**
   * The stage's second argument as JSON, parsed afresh for every stage: for `after` the call's
   * result (a JSON copy; '' = undefined), for `onError` the ApiErrorInfo; '' for other stages.
   */
  value: string;
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

/** What the adapter's `collect` returns (as a JSON string). */
export interface StageOutput {
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
}

/**
 * Host operations a script can reach through the sandbox's one bridge function
 * `__host(op, argsJson) -> resultJson` (synchronous from the script's point of view).
 * Result JSON: `{"ok":true,"value":...}` or `{"ok":false,"error":{name,message,code}}`.
 */
export type HostOp =
  | 'app.abort' // { message, status? } — recorded outside the sandbox; the adapter then throws
  | 'console' // { level, message } — fire and forget
  | 'utils.stringToBytes' // { text, charset } -> number[]
  | 'system.getAccountByToken' // { token } -> Account | null
  | 'http.request' // { url, method, headers, body, timeoutMs } -> { id, status, headers, url }
  | 'http.body' // { id } -> string (the body as text)
  | 'http.saveBodyAsFile' // { id, path } -> { path, size }
  | 'part.save' // { id, path } -> { path, size }
  | 'part.saveStorage' // { id, path } -> { path, size }
  | 'part.saveAttachment'; // { id, tableId, fieldId } -> TableAttachment

export const DEFAULT_BUFFER_SIZE = 8192;

export function newResponseState(): ResponseState {
  return {
    status: 200,
    headers: [],
    contentType: null,
    characterEncoding: null,
    contentLength: null,
    bufferSize: DEFAULT_BUFFER_SIZE,
    chunks: [],
    written: false,
    committed: false,
    error: null,
    redirect: null,
  };
}

/** The response as it starts (nothing set): it need not cross a thread or the sandbox boundary. */
export function isPristineResponse(r: ResponseState): boolean {
  return (
    r.status === 200 &&
    r.headers.length === 0 &&
    r.chunks.length === 0 &&
    !r.written &&
    !r.committed &&
    r.error === null &&
    r.redirect === null &&
    r.contentType === null &&
    r.characterEncoding === null &&
    r.contentLength === null &&
    r.bufferSize === DEFAULT_BUFFER_SIZE
  );
}

/** No attributes and a pristine response: what every job starts with. */
export function isPristineState(state: CarriedState): boolean {
  for (const _ in state.attributes) return false;
  return isPristineResponse(state.response);
}

/**
 * What a job changed in its carried state, as the worker sends it back: the attributes when they
 * were replaced, and only the response fields that differ from the state the job started with
 * (a stage that sets one header sends that list, not the whole response).
 */
export interface StateDelta {
  attributes?: CarriedState['attributes'];
  response?: Partial<ResponseState>;
}

const RESPONSE_FIELDS = Object.keys(newResponseState()) as Array<keyof ResponseState>;

/** The delta from `from` to `to` (fields compared by identity: a stage's change replaces the field). */
export function stateDelta(from: CarriedState, to: CarriedState): StateDelta {
  const delta: StateDelta = {};
  if (to.attributes !== from.attributes) delta.attributes = to.attributes;
  if (to.response !== from.response) {
    const response: Partial<Record<keyof ResponseState, unknown>> = {};
    let changed = false;
    for (const k of RESPONSE_FIELDS) {
      if (to.response[k] !== from.response[k]) {
        response[k] = to.response[k];
        changed = true;
      }
    }
    if (changed) delta.response = response as Partial<ResponseState>;
  }
  return delta;
}

/** `from` with a delta laid over it (stateDelta's inverse). */
export function applyStateDelta(from: CarriedState, delta: StateDelta): CarriedState {
  if (delta.attributes === undefined && delta.response === undefined) return from;
  return {
    attributes: delta.attributes ?? from.attributes,
    response: delta.response === undefined ? from.response : { ...from.response, ...delta.response },
  };
}
