/**
 * The one error table of scriptable-api: every error the router answers with has a numeric
 * `code` (the `code` field of the default error body), an HTTP status and a message.
 * The README's "Errors" section lists the same table.
 */
export const ERRORS = {
  /** A script threw an error without an integer `code`. */
  SCRIPT_ERROR: { code: 270000, status: 500, message: 'The script failed' },
  /** `platform.app.abort(message[, status])` ended the call. */
  ABORTED: { code: 270001, status: 500, message: 'The call was aborted' },
  /** No API is configured at `<appId>/<path>` (or the app is unknown). */
  API_NOT_FOUND: { code: 270100, status: 404, message: 'No API at this path' },
  /** The API does not accept this HTTP method (see `methods`). */
  METHOD_NOT_ALLOWED: { code: 270101, status: 405, message: 'Method not allowed for this API' },
  /** The request body is larger than the `bodyLimit` option. */
  BODY_TOO_LARGE: { code: 270102, status: 413, message: 'Request body too large' },
  /** The request could not be read (bad multipart data, aborted upload, malformed path encoding or request target). */
  BAD_REQUEST: { code: 270103, status: 400, message: 'Malformed request' },
  /** The request body declares a charset neither Node nor iconv-lite knows, or a name that is no charset (hex, base64, binary); a multipart form field one busboy does not decode. */
  UNSUPPORTED_CHARSET: { code: 270104, status: 415, message: 'Unsupported charset' },
  /** A preview path request that the `preview.authorize(req)` check refused. */
  PREVIEW_FORBIDDEN: { code: 270105, status: 403, message: 'Preview not allowed' },
  /** The request's headers are larger than the HTTP server accepts (the standalone server; Node.js's `maxHeaderSize`). */
  HEADERS_TOO_LARGE: { code: 270106, status: 431, message: 'Request header fields too large' },
  /** The request's headers or body did not arrive within the HTTP server's `headersTimeout` / `requestTimeout` (the standalone server). */
  REQUEST_TIMEOUT: { code: 270107, status: 408, message: 'The request did not arrive in time' },
  /** The request body has a `Content-Encoding` (or a transfer coding before chunked) other than gzip, deflate, br or identity (a multipart upload: any but identity). */
  UNSUPPORTED_ENCODING: { code: 270108, status: 415, message: 'Unsupported content encoding' },
  /** The request's `Expect` header asks for something other than `100-continue` (the standalone server; Node.js's `checkExpectation`). */
  EXPECTATION_FAILED: { code: 270109, status: 417, message: 'Expectation failed' },
  /** A multipart upload is over one of the `upload` limits (the message names it). */
  UPLOAD_TOO_LARGE: { code: 270110, status: 413, message: 'Upload over a limit' },
  /** The script ran past `scriptTimeoutMs`. */
  SCRIPT_TIMEOUT: { code: 270200, status: 500, message: 'The script timed out' },
  /** The script used more than `scriptMemoryLimitMb`. */
  SCRIPT_OUT_OF_MEMORY: { code: 270201, status: 500, message: 'The script ran out of memory' },
  /** The registry has no script of the name the API refers to. */
  SCRIPT_NOT_FOUND: { code: 270202, status: 500, message: 'Script not found' },
  /** The script module does not export the configured function. */
  FUNCTION_NOT_FOUND: { code: 270203, status: 500, message: 'Exported function not found' },
  /** The script source has a syntax error or failed while loading. */
  SCRIPT_COMPILE_ERROR: { code: 270204, status: 500, message: 'The script could not be compiled' },
  /** The worker running the script died (crash, resource limit) and the call could not finish. */
  ENGINE_FAILURE: { code: 270205, status: 500, message: 'The script engine failed' },
  /** The script's promise never settled. */
  SCRIPT_STALLED: { code: 270206, status: 500, message: 'The script returned a promise that never settled' },
  /** The call waited `queueTimeoutMs` for a worker (every worker busy): sent with `Retry-After`. */
  QUEUE_TIMEOUT: { code: 270207, status: 503, message: 'The server is busy; try again later' },
  /** The router is closing (`router.close()`): sent with `Retry-After`. */
  SHUTTING_DOWN: { code: 270208, status: 503, message: 'The server is shutting down' },
  /**
   * The client went away while the call waited for a worker: the call never started. Never sent
   * (no one is there to get it) nor logged as a failure; the metrics count the request as 499.
   */
  CLIENT_GONE: { code: 270209, status: 499, message: 'The client went away before the call started' },
  /** The result does not fit the return type (Redirect without a string, File without a path...). */
  INVALID_RESULT: { code: 270300, status: 500, message: 'The result does not fit the return type' },
  /**
   * The response a script set breaks the host's framing rules: a framing header
   * (`Transfer-Encoding`, `Connection`, `Keep-Alive`, `Upgrade`, `TE`, `Trailer`, `Proxy-*`;
   * a script's `Content-Length` is a servlet response property, never sent), a status outside
   * 200-599, or an invalid header name or value.
   */
  INVALID_RESPONSE: { code: 270304, status: 500, message: 'The script set a response the host does not send' },
  /** File return type: the path is empty or the file does not exist. */
  FILE_NOT_FOUND: { code: 270301, status: 404, message: 'File not found' },
  /** A path given by a script leaves its sandbox (`../`, absolute paths, links out). */
  PATH_OUTSIDE_SANDBOX: { code: 270302, status: 400, message: 'Path leaves the sandbox' },
  /** A file operation needs `sandboxDir` / `storageDir`, which the host did not configure. */
  FILES_NOT_CONFIGURED: { code: 270303, status: 500, message: 'File storage is not configured' },
  /** File return type: the `Range` asked for lies outside the file (answered with a `Content-Range` header giving the size). */
  RANGE_NOT_SATISFIABLE: { code: 270310, status: 416, message: 'Range not satisfiable' },
  /** File return type: an `If-Match` / `If-Unmodified-Since` precondition of the request failed. */
  PRECONDITION_FAILED: { code: 270311, status: 412, message: 'Precondition failed' },
  /** Rate limited: the wait for a slot would exceed the rule's `timeoutMs`. */
  RATE_LIMITED: { code: 270400, status: 429, message: 'Too many requests' },
  /** Rate limited: too many requests are already waiting across all rules. */
  RATE_LIMIT_QUEUE_FULL: { code: 270401, status: 429, message: 'Too many requests waiting' },
  /** `platform.http.request`: the destination is not allowed (private network, not in allowHosts). */
  OUTBOUND_BLOCKED: { code: 270500, status: 500, message: 'Outbound request blocked' },
  /** `platform.http.request`: the request failed (DNS, connection, timeout, body too large). */
  OUTBOUND_FAILED: { code: 270501, status: 500, message: 'Outbound request failed' },
  /** The API definition returned by the registry is invalid. */
  INVALID_API_DEFINITION: { code: 270600, status: 500, message: 'Invalid API definition' },
  /** The API calls an automation but the registry has no `getAutomation`. */
  AUTOMATION_UNAVAILABLE: { code: 270601, status: 501, message: 'Automation unavailable' },
  /** A host helper (`accounts`, the registry...) threw. */
  HOST_ERROR: { code: 270602, status: 500, message: 'A host service failed' },
  /** The registry has no automation of the id the API refers to. */
  AUTOMATION_NOT_FOUND: { code: 270603, status: 500, message: 'Automation not found' },
  /** The automation definition returned by the registry is invalid (interactive or unknown step, bad expression...). */
  INVALID_AUTOMATION: { code: 270604, status: 500, message: 'Invalid automation definition' },
  /** An automation step failed on its own terms (an expression that cannot be evaluated, a forEach over a non-list...). */
  AUTOMATION_STEP_FAILED: { code: 270605, status: 500, message: 'An automation step failed' },
} as const;

export type ErrorName = keyof typeof ERRORS;

/** An error that carries one of the table's codes. Thrown inside the library; safe to show. */
export class ApiError extends Error {
  readonly code: number;
  readonly status: number;
  readonly errorName: string;
  constructor(name: ErrorName, message?: string, options?: { status?: number; code?: number; cause?: unknown }) {
    const entry = ERRORS[name];
    super(message ?? entry.message, options?.cause === undefined ? undefined : { cause: options.cause });
    this.name = 'ApiError';
    this.errorName = name;
    this.code = options?.code ?? entry.code;
    this.status = options?.status ?? entry.status;
  }
}

/** A thrown value's `code` for the error body: kept when it is an integer (APIError.code), else SCRIPT_ERROR's. */
export function thrownCode(code: unknown): number {
  // (a safe integer: JSON writes larger ones as 1e+21, which integer readers refuse)
  return typeof code === 'number' && Number.isSafeInteger(code) ? code : ERRORS.SCRIPT_ERROR.code;
}

/**
 * The message of anything thrown, as text: its `message` when that is a string, else the thrown
 * value's (or that message's) String(), or '' when it has none (an object without a prototype).
 * Never throws, whatever host code threw.
 */
export function thrownText(e: unknown): string {
  try {
    const message = typeof e === 'object' && e !== null ? (e as { message?: unknown }).message : undefined;
    return typeof message === 'string' ? message : String(message ?? e);
  } catch {
    return '';
  }
}

/**
 * The stack of anything thrown, when it has one that can be read: undefined for none, and for a
 * value whose `stack` (or the `message` V8 formats it from) is a getter that throws, or a revoked
 * proxy. Never throws, whatever host code threw.
 */
export function thrownStack(e: unknown): string | undefined {
  try {
    const stack = (e as { stack?: unknown } | null | undefined)?.stack;
    return typeof stack === 'string' ? stack : undefined;
  } catch {
    return undefined;
  }
}

/** Whether `e` is an ApiError; false for a value that cannot be asked (a revoked proxy, a proxy whose traps throw). */
export function isApiError(e: unknown): e is ApiError {
  try {
    return e instanceof ApiError;
  } catch {
    return false;
  }
}

/**
 * Most characters of a script's error message an error body holds (a thrown error's, abort's,
 * sendError's): a longer one is cut, ending with `…`. The body is built on the host's event loop,
 * which every app shares: four calls throwing 24 MB messages at once held it for 0.4 s.
 */
export const ERROR_MESSAGE_MAX = 64 * 1024;

/** `text` cut to at most `max` characters, the last one `…` (never half a surrogate pair). */
export function clipText(text: string, max: number): string {
  if (text.length <= max) return text;
  let cut = max - 1;
  const last = text.charCodeAt(cut - 1);
  if (last >= 0xd800 && last <= 0xdbff) cut--;
  return `${text.slice(0, cut)}…`;
}

/** The default error body of the spec: `{ requestId, message, code }`. */
export interface ErrorBody {
  requestId: string;
  message: string;
  code: number;
}

/** Thrown at startup or registration for invalid options or API definitions. */
export class ConfigError extends TypeError {
  /** Dotted name of the offending field, e.g. `rateLimit.requestsPerSecond`. */
  readonly field: string;
  constructor(field: string, message: string) {
    super(`scriptable-api: invalid ${field}: ${message}`);
    this.name = 'ConfigError';
    this.field = field;
  }
}
