/*
 * scriptable-api — types for SCRIPT AUTHORS: the `ctx` (APIContext) a script function receives,
 * the request/response objects hanging off it, uploaded Parts, APIError, the File result and the
 * hook signatures.
 *
 * These are ambient (global) declarations: a script writes `export function list(ctx: APIContext)`
 * with no import. They describe what exists inside the sandbox, not the host (Express) API.
 * Load them through `scriptable-api/types/index.d.ts` (see examples/scripts-tsconfig).
 *
 * The request and response objects follow the Java Servlet API (HttpServletRequest,
 * HttpServletResponse); where this sandbox differs from a servlet container it is said below.
 */

// -------------------------------------------------------------------------------------------------
// Small helper types
// -------------------------------------------------------------------------------------------------

/**
 * A `java.util.Enumeration`: walk it with `hasMoreElements()` / `nextElement()`, or use it as an
 * ordinary iterable (`for (const name of e)`, `[...e]`, `Array.from(e)`).
 *
 * It is a snapshot taken when it was created; both styles share one cursor.
 */
interface Enumeration<T> {
  /** True while `nextElement()` has an element left to return. */
  hasMoreElements(): boolean;
  /** Returns the next element; throws a `NoSuchElementException` error when there is none. */
  nextElement(): T;
  /** The remaining elements as an iterator (Java 9 `Enumeration.asIterator()`). */
  asIterator(): IterableIterator<T>;
  /** Iterates the remaining elements, so an Enumeration works with `for...of` and spread. */
  [Symbol.iterator](): IterableIterator<T>;
}

/** A request cookie, as `javax.servlet.http.Cookie` (name and value only). */
interface Cookie {
  /** Cookie name. */
  readonly name: string;
  /** Cookie value (already decoded). */
  readonly value: string;
  /** Returns the cookie name (servlet `Cookie.getName()`). */
  getName(): string;
  /** Returns the cookie value (servlet `Cookie.getValue()`). */
  getValue(): string;
}

/** A `java.security.Principal`: the authenticated user of a request. */
interface Principal {
  /** Name of the principal. */
  getName(): string;
}

/** A file written by a script into the app's local sandbox or shared storage. */
interface SavedFile {
  /** Path of the file relative to the app's root, `/`-separated (the requested path, normalized). */
  path: string;
  /** Size of the file in bytes. */
  size: number;
}

/**
 * The attachment record returned by `Part.saveAttachment(tableId, fieldId)`: these fields when the
 * router stores the file itself (in the app's shared storage); a host's own attachment service
 * may return a record of its own.
 */
interface TableAttachment {
  /** A new unique id. */
  id: string;
  /** The file name (the uploaded name, made safe). */
  name: string;
  /** Size in bytes. */
  size: number;
  /** MIME type of the upload. */
  contentType: string;
  tableId: string;
  fieldId: string;
  /** Path in the app's shared storage: return `{ storagePath: a.path, name: a.name }` from a File API to serve it. */
  path: string;
  /** When it was stored, ms since the epoch. */
  createTime: number;
  [field: string]: unknown;
}

// -------------------------------------------------------------------------------------------------
// Uploaded files
// -------------------------------------------------------------------------------------------------

/**
 * One uploaded file of a `multipart/form-data` request (servlet `javax.servlet.http.Part`).
 * The bytes stay on the host; a script stores them with `save`, `saveStorage` or `saveAttachment`.
 */
interface Part {
  /** Form field name the file was uploaded under. */
  readonly name: string;
  /** MIME type sent by the client for this file, e.g. `image/png`. */
  readonly contentType: string;
  /** File size in bytes. */
  readonly size: number;
  /** Original file name sent by the client, or null when the client sent none. */
  readonly submittedFileName: string | null;
  /** Returns the form field name (servlet `Part.getName()`). */
  getName(): string;
  /** Returns the file's MIME type (servlet `Part.getContentType()`). */
  getContentType(): string;
  /** Returns the file size in bytes (servlet `Part.getSize()`). */
  getSize(): number;
  /** Returns the original file name, or null (servlet `Part.getSubmittedFileName()`). */
  getSubmittedFileName(): string | null;
  /**
   * Saves the file into the app's LOCAL SANDBOX at `path` (relative to the app's sandbox root;
   * missing folders are created, an existing file is replaced). A path that leaves the sandbox
   * (`..`, absolute paths, links out) throws; so does a host without a sandbox directory.
   * The saved file can later be returned as a File result with `{ path }`. Works called
   * synchronously or with `await`.
   */
  save(path: string): SavedFile;
  /**
   * Saves the file into the app's SHARED STORAGE at `path`, with the same path rules as `save`.
   * The saved file can later be returned as a File result with `{ storagePath }`.
   */
  saveStorage(path: string): SavedFile;
  /**
   * Stores the file as an attachment in field `fieldId` of table `tableId` and returns the
   * attachment record: through the host's attachment service when it has one, otherwise in the
   * app's shared storage under `attachments/<tableId>/<fieldId>/`. Throws when the host has
   * neither (or when an id is not one plain path segment).
   */
  saveAttachment(tableId: string, fieldId: string): TableAttachment;
}

// -------------------------------------------------------------------------------------------------
// PlatformHttpRequest
// -------------------------------------------------------------------------------------------------

/**
 * The HTTP request, with the methods of `javax.servlet.http.HttpServletRequest`.
 * Everything is read-only except the request attributes.
 */
interface PlatformHttpRequest {
  // --- attributes ---------------------------------------------------------------------------

  /**
   * Returns the request attribute `name`, or null when it is not set. Attributes carry data from
   * the preprocessing script (Execute before calling) to the called script and the hooks after it.
   */
  getAttribute(name: string): any;
  /** Returns the names of all request attributes. */
  getAttributeNames(): Enumeration<string>;
  /**
   * Sets the request attribute `name`. Within one script the value is kept as is; the next script
   * of the same request (the call after the preprocessing hook, the post-processing hook...)
   * receives a JSON copy: Dates become ms timestamps, functions and values with no JSON form are
   * dropped. Setting `null` or `undefined` removes the attribute, as in a servlet container.
   */
  setAttribute(name: string, value: any): void;
  /** Removes the request attribute `name` (no-op when it is not set). */
  removeAttribute(name: string): void;

  // --- parameters ---------------------------------------------------------------------------

  /**
   * Returns the first value of request parameter `name`, or null. Parameters are the query string
   * parameters followed by the fields of an urlencoded or multipart form body.
   */
  getParameter(name: string): string | null;
  /** Returns the names of all request parameters (query string first, then form fields). */
  getParameterNames(): Enumeration<string>;
  /** Returns every value of request parameter `name` (query string first), or null when absent. */
  getParameterValues(name: string): string[] | null;
  /** Returns all request parameters as a plain object of name to values (servlet `Map<String, String[]>`). */
  getParameterMap(): Record<string, string[]>;

  // --- connection and server ----------------------------------------------------------------

  /** Returns the charset of the request body from its Content-Type, or null when none was given. */
  getCharacterEncoding(): string | null;
  /** Returns the protocol and version of the request, e.g. `HTTP/1.1`. */
  getProtocol(): string;
  /** Returns the scheme used for the request: `http` or `https`. */
  getScheme(): string;
  /**
   * Returns the host name the request was addressed to, without the port: from the Host header,
   * or behind a proxy the host's Express `trust proxy` setting trusts, from `X-Forwarded-Host`.
   */
  getServerName(): string;
  /**
   * Returns the port the request was sent to: the port in that same header; without one, the
   * scheme's (80, 443) behind a trusted proxy, else the port the connection was accepted on.
   */
  getServerPort(): number;
  /** Returns the IP address of the client (behind a proxy: as the host's Express `trust proxy` setting decides). */
  getRemoteAddr(): string;
  /** Returns the host name of the client; this is its IP address (no reverse DNS lookup is made). */
  getRemoteHost(): string;
  /** Returns the source port of the client connection. */
  getRemotePort(): number;
  /** Returns true when the request came over a secure protocol (scheme `https`). */
  isSecure(): boolean;

  // --- request data -------------------------------------------------------------------------

  /** Returns the Content-Type header of the request, or null when there is none. */
  getContentType(): string | null;
  /** Returns the scheme of the Authorization header (`Bearer`, `Basic`...), or null when there is none. */
  getAuthType(): string | null;
  /**
   * Returns every cookie of the request, in the order sent (a name sent twice, for two paths,
   * twice; `ctx.cookies` keeps its first value), or null when the request has none (as the servlet API does).
   */
  getCookies(): Cookie[] | null;
  /**
   * Returns the first value of request header `name` (case-insensitive), or null. Header names
   * containing `_` only arrive when the host allows underscore headers.
   */
  getHeader(name: string): string | null;
  /** Returns every value of request header `name` (case-insensitive), in arrival order. */
  getHeaders(name: string): Enumeration<string>;
  /** Returns the names of the request headers, lower-case. */
  getHeaderNames(): Enumeration<string>;
  /** Returns the HTTP method, e.g. `GET` or `POST`. */
  getMethod(): string;
  /** Returns the part of the URL path after the servlet path: `/<api path>`. */
  getPathInfo(): string;
  /** Returns the path the API router is mounted at, e.g. `/web0/api`. */
  getContextPath(): string;
  /** Returns the raw query string without the leading `?`, or null when the URL has none. */
  getQueryString(): string | null;
  /** Returns the login of the authenticated user. The service has no built-in authentication, so this is null. */
  getRemoteUser(): string | null;
  /** Returns the authenticated user. The service has no built-in authentication, so this is null. */
  getUserPrincipal(): Principal | null;
  /** Returns the path of the URL without the query string, e.g. `/web0/api/<appId>/<path>`. */
  getRequestURI(): string;
  /** Returns `scheme://serverName[:port]` + request URI (the port is left out when it is the scheme's default). */
  getRequestURL(): string;
  /** Returns the part of the URL path that selects the app: `/<appId>`. */
  getServletPath(): string;
  /** Returns the uploaded files of a `multipart/form-data` request (an empty array otherwise). */
  getParts(): Part[];
  /** Returns the uploaded file sent under form field `name`, or null. */
  getPart(name: string): Part | null;
}

// -------------------------------------------------------------------------------------------------
// PlatformHttpResponse
// -------------------------------------------------------------------------------------------------

/**
 * Binary output of the response (servlet `ServletOutputStream`). Bytes written here and text
 * written with `getWriter()` may be mixed; they keep their order.
 */
interface ServletOutputStream {
  /** Writes one byte (the low 8 bits of `byte`). */
  write(byte: number): void;
  /** Writes a string as UTF-8 bytes. */
  write(text: string): void;
  /**
   * Writes bytes (each number is truncated to 8 bits): all of them, or `len` bytes starting at
   * `off`. Accepts a number array, a Uint8Array (or any typed array) or an ArrayBuffer; anything
   * else throws a `TypeError`, and an `off` / `len` outside the bytes an `IndexOutOfBoundsException` error.
   */
  write(bytes: ArrayLike<number> | ArrayBuffer, off?: number, len?: number): void;
  /** Writes `String(value)` as UTF-8 (`null` and `undefined` print as `null`). */
  print(value: unknown): void;
  /** Writes `String(value)` as UTF-8 followed by CRLF, as `ServletOutputStream.println` does; with no argument just CRLF. */
  println(value?: unknown): void;
  /** Flushes the buffer: the response becomes committed (status and headers can no longer change). */
  flush(): void;
  /** Flushes and closes the stream; later writes to it are ignored. */
  close(): void;
  /** Always true: the stream never blocks. */
  isReady(): boolean;
}

/** Character output of the response (servlet `java.io.PrintWriter`). */
interface PrintWriter {
  /** Writes the single character with char code `char`. */
  write(char: number): void;
  /** Writes `text`, or `len` characters of it starting at `off`. */
  write(text: string, off?: number, len?: number): void;
  /** Writes an array of characters (char codes or one-character strings). */
  write(chars: ReadonlyArray<number | string>): void;
  /** Writes `String(value)` (`null` and `undefined` print as `null`). */
  print(value: unknown): void;
  /** Writes `String(value)` followed by `\n`; with no argument just `\n`. */
  println(value?: unknown): void;
  /** Writes `String(value)` and returns this writer, for chaining. */
  append(value: unknown): PrintWriter;
  /**
   * Writes a formatted string and returns this writer. Supports `%s`, `%S`, `%d`, `%f`, `%.Nf`,
   * `%n` and `%%` (a subset of `java.util.Formatter`); other conversions are written as is.
   */
  printf(format: string, ...args: unknown[]): PrintWriter;
  /** Same as `printf`. */
  format(format: string, ...args: unknown[]): PrintWriter;
  /** Flushes the buffer: the response becomes committed (status and headers can no longer change). */
  flush(): void;
  /** Flushes and closes the writer; later writes to it are ignored. */
  close(): void;
  /** Always false: writing never fails. */
  checkError(): boolean;
}

/**
 * The HTTP response, with the methods of `javax.servlet.http.HttpServletResponse`.
 *
 * As in a servlet container, the response is buffered: status and headers may change until it is
 * COMMITTED (by `flushBuffer()`, `flush()`, a body larger than the buffer size, `sendError` or
 * `sendRedirect`); after that header and status changes are ignored. When a script writes a body
 * (or calls sendError / sendRedirect) the response is sent as written and the function's return
 * value is not used. Changes made by one script are seen by the later scripts of the same request.
 *
 * Differences from a servlet container: the default character encoding is UTF-8;
 * `getWriter()` and `getOutputStream()` may both be used; writes after `sendError` or
 * `sendRedirect` are dropped.
 */
interface PlatformHttpResponse {
  /** Returns the charset of the response body; `UTF-8` unless set otherwise. */
  getCharacterEncoding(): string;
  /** Returns the Content-Type set on the response (with `;charset=...` when a charset is set), or null when none is set. */
  getContentType(): string | null;
  /** Returns the stream for writing binary body data. Every call returns the same stream. */
  getOutputStream(): ServletOutputStream;
  /** Returns the writer for writing the body as text in the response charset. Every call returns the same writer. */
  getWriter(): PrintWriter;
  /** Sets the charset of the response body, e.g. `UTF-8`; null restores the default. Ignored once committed. */
  setCharacterEncoding(charset: string | null): void;
  /** Sets the Content-Length header, in bytes. Ignored once committed. */
  setContentLength(len: number): void;
  /** Same as `setContentLength`, for lengths beyond the int range of Java. */
  setContentLengthLong(len: number): void;
  /**
   * Sets the MIME type of the response, e.g. `application/json`. A `charset=` parameter also sets
   * the character encoding. null removes it. Ignored once committed.
   */
  setContentType(type: string | null): void;
  /** Returns true when the response header `name` (case-insensitive) has been set. */
  containsHeader(name: string): boolean;
  /** Encodes `url` for use in the response. There is no session id to add, so it is returned unchanged. */
  encodeURL(url: string): string;
  /** Encodes `url` for `sendRedirect`. There is no session id to add, so it is returned unchanged. */
  encodeRedirectURL(url: string): string;
  /** @deprecated Use `encodeURL`. */
  encodeUrl(url: string): string;
  /** @deprecated Use `encodeRedirectURL`. */
  encodeRedirectUrl(url: string): string;
  /**
   * Sends an error response with status `sc` (100-999) and optional message, clearing the
   * buffered body: the default error body `{ requestId, message, code }` with `msg` (else the
   * status's reason phrase, e.g. `Not Found`) as its message and `sc` as its code. The response
   * becomes committed; later writes are dropped.
   * Throws an `IllegalStateException` error when the response is already committed.
   * A status outside 100-999 throws an `IllegalArgumentException` error.
   * The host sends only statuses 200-599: another one ends the call with a 500 (code 270304).
   */
  sendError(sc: number, msg?: string): void;
  /**
   * Redirects the client to `location` with status 302, clearing the buffered body. The response
   * becomes committed. Throws an `IllegalStateException` error when it is already committed, and
   * an `IllegalArgumentException` error when `location` is null or undefined. A location that is
   * no http(s) or relative URL (`javascript:`, `data:`) fails the script's stage when it ends:
   * status 500, code 270300 (`INVALID_RESULT`; `onError` runs for the call's).
   */
  sendRedirect(location: string): void;
  /**
   * Sets response header `name`, replacing every value it had (names are case-insensitive);
   * null removes it. `Content-Type` and `Content-Length` set the matching response properties
   * (the host always sends the body's real length). The host frames the message: a
   * `Transfer-Encoding`, `Connection`, `Keep-Alive`, `Upgrade`, `TE`, `Trailer` or `Proxy-*`
   * header ends the call with a 500 (code 270304). A name that is not an HTTP token, or a value
   * with control characters (CR, LF...) or characters past U+00FF, throws an
   * `IllegalArgumentException` error. A response holds at most 1000 header entries: one more
   * throws an `IllegalStateException` error. Ignored once committed.
   */
  setHeader(name: string, value: string | null): void;
  /** Adds a value to response header `name`, keeping the ones it has (the same rules and errors as `setHeader`). Ignored once committed. */
  addHeader(name: string, value: string): void;
  /**
   * Sets header `name` to the date `date` (ms since the epoch) in HTTP date format; a date that is
   * not a valid time (NaN) throws an `IllegalArgumentException` error. Ignored once committed.
   */
  setDateHeader(name: string, date: number): void;
  /** Adds the date `date` (ms since the epoch) in HTTP date format to header `name` (the same errors as `setDateHeader`). Ignored once committed. */
  addDateHeader(name: string, date: number): void;
  /** Sets header `name` to the integer `value` (a fraction is cut off; NaN throws an `IllegalArgumentException` error). Ignored once committed. */
  setIntHeader(name: string, value: number): void;
  /** Adds the integer `value` to header `name` (the same rules as `setIntHeader`). Ignored once committed. */
  addIntHeader(name: string, value: number): void;
  /**
   * Sets the status code (100-999; throws an `IllegalArgumentException` error otherwise). Ignored
   * once committed. The host sends only statuses 200-599: another one ends the call with a 500
   * (code 270304).
   */
  setStatus(sc: number): void;
  /** Returns the status code (200 unless set). */
  getStatus(): number;
  /** Returns the first value of response header `name` (case-insensitive), or null. */
  getHeader(name: string): string | null;
  /** Returns every value of response header `name` (case-insensitive); an empty array when it is not set. */
  getHeaders(name: string): string[];
  /** Returns the names of the response headers that are set (each name once). */
  getHeaderNames(): string[];
  /** Returns the size of the body buffer in bytes (8192 unless set). */
  getBufferSize(): number;
  /**
   * Sets the size of the body buffer in bytes: a body larger than it commits the response.
   * Throws an `IllegalStateException` error once content has been written, and an
   * `IllegalArgumentException` error when `size` is not a number.
   */
  setBufferSize(size: number): void;
  /** Commits the response: status and headers can no longer change. */
  flushBuffer(): void;
  /**
   * Clears the buffered body, the status and the headers. Throws an `IllegalStateException`
   * error when the response is committed.
   */
  reset(): void;
  /**
   * Clears the buffered body, keeping status and headers. Throws an `IllegalStateException`
   * error when the response is committed.
   */
  resetBuffer(): void;
  /** Returns true when the response is committed (status and headers are final). */
  isCommitted(): boolean;
}

// -------------------------------------------------------------------------------------------------
// APIContext
// -------------------------------------------------------------------------------------------------

/**
 * The one parameter of every script function: the API function, the preprocessing hook (Execute
 * before calling), the post-processing hook (Execute after calling) and the error hook (Execute
 * after calling error). Each script gets a fresh ctx built from the same request.
 */
interface APIContext {
  /**
   * Request headers by lower-case name; a repeated header has its values joined with `, `.
   * Header names containing `_` only arrive when the host allows underscore headers.
   */
  headers: Record<string, string>;
  /** Request cookies, name to value. */
  cookies: Record<string, string>;
  /**
   * Query string parameters: a string, or an array of strings when the key is repeated
   * (`?tag=a&tag=b`). Never nested: `a[b]=1` is the key `a[b]`.
   */
  query: Record<string, string | string[]>;
  /** Raw request body as text; `''` when there is none (and for multipart uploads, see `getParts()`). */
  body: string;
  /** The original request URL (path and query string), e.g. `/web0/api/shop/orders?page=2`. */
  url: string;
  /** ID of the application the API belongs to. */
  appId: string;
  /** The configured API path, e.g. `orders` or `orders/list`. */
  path: string;
  /** HTTP method, upper-case, e.g. `GET`. */
  method: string;
  /** Returns the files uploaded with a `multipart/form-data` request (an empty array otherwise). */
  getParts(): Part[];
  /** The HTTP request, with servlet-style methods. */
  request: PlatformHttpRequest;
  /** The HTTP response, with servlet-style methods. */
  response: PlatformHttpResponse;
}

// -------------------------------------------------------------------------------------------------
// Results, errors and hook signatures
// -------------------------------------------------------------------------------------------------

/**
 * The error the error hook (Execute after calling error) receives; also the default error body
 * the caller gets (status 500 unless the error carries another) when no error hook answers.
 */
interface APIError {
  /** ID of the request. */
  requestId: string;
  /** Error message: the `message` of the thrown error, or the message given to `platform.app.abort`. */
  message: string;
  /**
   * Error code: the integer `code` property of the thrown error when it has one, 270001 for
   * `platform.app.abort`, otherwise a service error code (270000 for a script error).
   */
  code: number;
}

/**
 * What a script returns when the API's return type is File.
 *
 * - `path` (local sandbox) is used first; `storagePath` (shared storage) only when `path` is
 *   missing or empty.
 * - When neither gives a path, or the file does not exist, the caller gets status 404.
 * - A field that is neither a string nor null / undefined is a result that does not fit the
 *   return type: status 500, code 270300 (`INVALID_RESULT`; `onError` runs for the call's).
 * - The host must be configured with the matching directory (local sandbox / shared storage).
 * - A path may not leave its sandbox (`..`, absolute paths).
 * - The file is sent as a download unless `contentDisposition` is `inline`.
 * - The Content-Type is the one set on `ctx.response`, else guessed from the file name.
 */
interface FileResult {
  /** Path of the file in the app's local sandbox (see `Part.save`). Takes precedence over `storagePath` when not empty. */
  path?: string;
  /** Path of the file in the app's shared storage (see `Part.saveStorage`). Used when `path` is missing or empty. */
  storagePath?: string;
  /** File name sent to the client in Content-Disposition; defaults to the last segment of the path. */
  name?: string;
  /**
   * `attachment` (the default): the browser downloads the file; `inline`: the browser previews it.
   */
  contentDisposition?: 'inline' | 'attachment';
}

/**
 * An API function (the "Call Script" of an API). Its return value, or what its promise resolves
 * to, is the result, sent in the API's return type: JSON (an object, Dates as ms timestamps), Text
 * (`String(value)`, null gives ''), File (a {@link FileResult}) or Redirect (a URL string, status 302).
 * A thrown error gives status 500 with an {@link APIError} body; an integer `code` property on the
 * thrown error becomes the body's `code`.
 */
type ApiFunction = (ctx: APIContext) => unknown;

/**
 * A preprocessing hook (Execute before calling), e.g. authentication. Returning a value other
 * than undefined answers the call with that value (the API function does not run); throwing or
 * calling `platform.app.abort` ends the call with an error. Data for the later scripts goes
 * into request attributes (`ctx.request.setAttribute`). May return a promise.
 */
type BeforeHook = (ctx: APIContext) => unknown;

/**
 * A post-processing hook (Execute after calling), e.g. auditing. `result` is a JSON copy of what
 * the API function returned (undefined when it returned nothing). Returning a value other than
 * undefined replaces the result; throwing ends the call with an error. May return a promise.
 */
type AfterHook = (ctx: APIContext, result: any) => unknown;

/**
 * An error hook (Execute after calling error): runs when the API function fails. It can write
 * its own response through `ctx.response` (status, content type, body; the body starts empty: what
 * the failed function wrote is not sent) or return a value sent in the API's return type; a status
 * or content type set without a body is sent with an empty body (headers alone are not an answer).
 * When it does none of these, the default error response is sent. It does not run for errors of
 * the hooks, nor after a timeout or out-of-memory. May return a promise.
 */
type ErrorHook = (ctx: APIContext, error: APIError) => unknown;

/**
 * What an automation's `script` step passes as the second argument (a JSON copy: changing it
 * changes nothing; return what the next steps need). `steps.<id>` holds each earlier step's
 * result, `vars` what `set` steps assigned, `result` the call's result when the automation is the
 * API's after hook (null otherwise).
 */
interface AutomationState {
  steps: Record<string, any>;
  vars: Record<string, any>;
  result: any;
}

/**
 * A function an automation's `script` step calls: `{ "type": "script", "script": "orders.js",
 * "function": "total" }`. Its return value (a JSON copy) is the step's result,
 * `state.steps.<id>` for the steps after it. Throwing, or `platform.app.abort`, fails the step.
 * May return a promise.
 */
type AutomationStepFunction = (ctx: APIContext, state: AutomationState) => unknown;
