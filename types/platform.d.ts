/*
 * scriptable-api — types for SCRIPT AUTHORS: the `platform` helpers and the `console` that exist
 * as globals inside the sandbox.
 *
 * The sandbox is neither Node nor a browser: there is no `require`, `process`, `Buffer`,
 * `setTimeout`, `fetch`, `URL` or `TextEncoder`, so none of them is declared here. Do not add
 * `@types/node` or the `DOM` lib to a scripts project.
 *
 * Host helpers return their result directly (synchronously); `await` on them works too.
 */

/// <reference path="./api-context.d.ts" />

/** An account, as returned by `platform.system.getAccountByToken`. Only `id` is always present. */
interface Account {
  /** Account ID. */
  id: string;
  /** Display name. */
  name?: string;
  /** Login name. */
  userName?: string;
  /** E-mail address. */
  email?: string;
  /** Mobile phone number. */
  mobileNo?: string;
  /** URL of the avatar image. */
  avatar?: string;
  /** ID of the company the account belongs to. */
  companyId?: string;
  /** Creation time, ms since the epoch. */
  createTime?: number;
  /** Time of the last update, ms since the epoch. */
  updateTime?: number;
  /** Whether the account is valid (enabled). */
  isValid?: boolean;
  /** Same as `isValid`. */
  valid?: boolean;
  /** Other fields the host's account service adds. */
  [key: string]: unknown;
}

/** The request given to `platform.http.request`. */
interface PlatformHttpRequestOptions {
  /** Absolute `http:` or `https:` URL. */
  url: string;
  /** HTTP method; default `GET`. */
  method?: string;
  /**
   * Request headers. Hop-by-hop headers (Host, Connection, Content-Length...) are dropped. At most
   * 100 (others than null or undefined): more fails the call with OUTBOUND_FAILED (270501). The
   * method, URL and headers (names and values) take at most 64 KiB together; more fails the same way.
   */
  headers?: Record<string, string>;
  /**
   * Request body: a string is sent as is (UTF-8); bytes (an `ArrayBuffer`, a typed array such as
   * `Uint8Array`, a `DataView`: the bytes it spans) as they are, with no content type added; any
   * other value, an array of numbers too, is sent as JSON (Dates as ms timestamps) with
   * `content-type: application/json` unless a content type is given. To send
   * `platform.utils.stringToBytes`'s bytes, wrap them: `new Uint8Array(bytes)`.
   */
  body?: string | ArrayBuffer | ArrayBufferView | object | null;
  /**
   * Timeout in ms for the whole call (connect, redirects, body). It can lower the host's
   * timeout (default 10 s), never raise it.
   */
  timeoutMs?: number;
}

/** The answer of `platform.http.request`. The body is read from the network on first use. */
interface PlatformHttpResponseData {
  /** HTTP status code. */
  status: number;
  /** Response headers by lower-case name; repeated values joined with `, `. */
  headers: Record<string, string>;
  /** Final URL, after redirects. */
  url: string;
  /** The body as text, decoded with the charset of its Content-Type (default UTF-8). Same as `text()`. */
  readonly body: string;
  /** Returns the body as text, decoded with the charset of its Content-Type (default UTF-8). */
  text(): string;
  /** Returns the body parsed as JSON; throws a `SyntaxError` when it is not JSON. */
  json<T = any>(): T;
  /**
   * Streams the body into the app's LOCAL SANDBOX at `path` (missing folders are created, an
   * existing file is replaced) and returns the saved file. A path that leaves the sandbox throws.
   * Use it instead of `body` for large or binary responses. A call keeps its last 32 responses:
   * on an older one it throws (code 270501).
   */
  saveBodyAsFile(path: string): SavedFile;
}

/** `platform.app`: control of the current call. */
interface PlatformApp {
  /**
   * Ends the call with an error: the caller gets the default error body with `message` (without
   * one, `The call was aborted`) and code 270001, and HTTP status `status` when it is a whole
   * number from 400 to 599 (otherwise 500). Typical use: rejecting a
   * request in the preprocessing hook. The abort is recorded before the error is thrown, so
   * catching the error does not cancel it.
   */
  abort(message?: string, status?: number): never;
}

/** `platform.system`: platform data. */
interface PlatformSystem {
  /**
   * Looks up the account a token belongs to. Returns null when the token is empty, unknown or
   * expired, or when the host has no account service; throws (code 270602) when the
   * lookup itself fails or the host's service answers something that is not an account.
   */
  getAccountByToken(token: string): Account | null;
}

/** `platform.utils`: conversions. */
interface PlatformUtils {
  /**
   * Serializes `value` to a JSON string, as the JSON return type does: Dates become ms
   * timestamps. A value with no JSON form (undefined, a function) gives `'null'`; one nested
   * more than 100 levels deep throws a `RangeError`.
   */
  toJSON(value: unknown): string;
  /**
   * Encodes `text` to bytes (numbers 0-255) in `charset`: UTF-8 by default; also `ISO-8859-1`
   * (`latin1`), `US-ASCII`, `UTF-16LE`. An unsupported charset throws a `RangeError`, and so does
   * a text taking more than 256 KiB in a charset other than UTF-8.
   */
  stringToBytes(text: string, charset?: string): number[];
}

/** `platform.http`: outbound HTTP calls. */
interface PlatformHttp {
  /**
   * Sends an HTTP request and returns the response (any status; only network failures throw).
   * Redirects are followed. Destinations on private networks (loopback, RFC 1918, link-local,
   * cloud metadata addresses...) are refused unless the host allows them, and the host may
   * restrict calls to a list of host names; a refused destination throws. The response body is
   * capped in size by the host.
   */
  request(req: PlatformHttpRequestOptions): PlatformHttpResponseData;
  /** Sends a `GET` request to `url`. Same rules as the object form. */
  request(url: string): PlatformHttpResponseData;
}

/** The type of the global `platform` object. */
interface Platform {
  /** Control of the current call (`abort`). */
  readonly app: PlatformApp;
  /** Platform data (`getAccountByToken`). */
  readonly system: PlatformSystem;
  /** Conversions (`toJSON`, `stringToBytes`). */
  readonly utils: PlatformUtils;
  /** Outbound HTTP (`request`). */
  readonly http: PlatformHttp;
}

/** Host helpers available to every script (a frozen object). */
declare const platform: Platform;

/**
 * The sandbox console: every call becomes one log line in the host's logger, tagged with the
 * level and the script name. Arguments are joined with spaces; objects are shown as JSON-like
 * text; a line is cut at 8192 characters. A request logs at most 200 lines: the rest are dropped
 * and counted in one warning when the request ends.
 */
interface Console {
  /** Logs at level `log`. */
  log(...data: any[]): void;
  /** Logs at level `info`. */
  info(...data: any[]): void;
  /** Logs at level `warn`. */
  warn(...data: any[]): void;
  /** Logs at level `error`. */
  error(...data: any[]): void;
  /** Logs at level `debug`. */
  debug(...data: any[]): void;
}

/** The sandbox console (log, info, warn, error, debug), written to the host's logger. */
declare var console: Console;
