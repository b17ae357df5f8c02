/**
 * Framing belongs to the host. Whatever state comes back from a worker (and whatever engine ran
 * the script), the response is checked here, on the host, before anything of it is applied:
 * - a script may not set the headers that frame the message or the connection (FRAMING_HEADERS,
 *   and every `Proxy-*` header): the host decides Content-Length, Transfer-Encoding and the
 *   connection's fate, so a script can never desynchronise a keep-alive connection;
 *   `setContentLength` / `setHeader('Content-Length', n)` are servlet response properties the
 *   host does not send: the body's real length always goes out;
 * - a script sets at most MAX_RESPONSE_HEADERS headers;
 * - a status must be a final status, 200 to 599 (1xx would end the response early, 101 would
 *   switch protocols);
 * - a redirect goes to an http(s) URL or a relative one, never `javascript:`, `data:`, ...
 * A breach fails the request with a clear error before any of the script's headers are set.
 */
import { validateHeaderName, validateHeaderValue } from 'node:http';
import encodeUrl from 'encodeurl';
import { ApiError } from '../errors';
import type { ResponseState } from '../runtime/protocol';

/** Header names (lower case) only the host sets. */
export const FRAMING_HEADERS: ReadonlySet<string> = new Set([
  'content-length',
  'transfer-encoding',
  'connection',
  'keep-alive',
  'upgrade',
  'te',
  'trailer',
]);

/** True when a script may not set this header. */
export function isFramingHeader(name: string): boolean {
  const key = name.toLowerCase();
  return FRAMING_HEADERS.has(key) || key.startsWith('proxy-');
}

/**
 * Most headers a script may set: the host checks and sets each one on its event loop, which every
 * app shares (100,000 headers held it for seconds), and no client reads such a head anyway.
 */
export const MAX_RESPONSE_HEADERS = 1000;

/**
 * Most characters a script's response headers hold in all (names, values, content type and
 * charset): a 24 MB header held the host's event loop for a second (checked, set and written on
 * it), where Node.js's own HTTP client reads at most 16 KiB of a head.
 */
export const MAX_RESPONSE_HEAD_CHARS = 64 * 1024;

/**
 * Most pieces of a script's response body (each switch between text and bytes starts one): each
 * becomes a buffer on the host's event loop, which every app shares (400,000 held it for 0.5 to
 * 0.9 s, a piece of text encoded at a time).
 */
export const MAX_RESPONSE_CHUNKS = 10_000;

const MIN_STATUS = 200;
const MAX_STATUS = 599;

/** A status a script may answer with: an integer from 200 to 599. */
export function checkStatus(status: unknown): number {
  if (typeof status !== 'number' || !Number.isInteger(status) || status < MIN_STATUS || status > MAX_STATUS) {
    throw new ApiError('INVALID_RESPONSE', `Status ${String(status)} is not allowed: a script may answer with a status from ${MIN_STATUS} to ${MAX_STATUS}`);
  }
  return status;
}

/** Checks one header a script set: not a framing header, a valid name and value. */
export function checkHeader(name: string, value: string): void {
  if (isFramingHeader(name)) {
    throw new ApiError('INVALID_RESPONSE', `A script may not set the '${name}' response header: the host frames the response`);
  }
  try {
    validateHeaderName(name);
    validateHeaderValue(name, value);
  } catch {
    throw new ApiError('INVALID_RESPONSE', `Invalid response header '${name}': names must be HTTP tokens and values must not hold control characters`);
  }
}

const BASE = 'http://base.invalid/';

/**
 * Checks a redirect target: an http(s) URL, or a relative one (resolved by the client against
 * the request's URL). Parsed the way a browser parses it (WHATWG URL), so tabs, newlines and
 * leading control characters cannot hide another scheme.
 */
export function checkRedirectLocation(location: string): string {
  // (a head no client reads, parsed and written on the event loop every app shares: see MAX_RESPONSE_HEAD_CHARS)
  if (location.length > MAX_RESPONSE_HEAD_CHARS) {
    throw new ApiError('INVALID_RESULT', `Redirect location is longer than ${MAX_RESPONSE_HEAD_CHARS} characters (${location.length})`);
  }
  let scheme: string;
  try {
    scheme = new URL(location, BASE).protocol;
  } catch {
    throw new ApiError('INVALID_RESULT', `Redirect location is not a valid URL: ${JSON.stringify(location.slice(0, 200))}`);
  }
  if (scheme !== 'http:' && scheme !== 'https:') {
    throw new ApiError('INVALID_RESULT', `Redirect location must be an http(s) or relative URL, got a '${scheme}' URL`);
  }
  return location;
}

/**
 * The `Location` header for a redirect a script asked for: checked, then percent-encoded by
 * `encodeurl` (as Express does): raw spaces and non-ASCII characters are encoded, escapes already
 * there (`%2F`, `%E9`) and IPv6 brackets are kept.
 */
export function locationHeader(location: string): string {
  return encodeUrl(checkRedirectLocation(location));
}

/** Checks everything a script set on the response; throws before anything is applied. */
export function checkResponseState(state: ResponseState): void {
  checkStatus(state.status);
  if (state.error) checkStatus(state.error.status);
  if (state.headers.length > MAX_RESPONSE_HEADERS) {
    throw new ApiError('INVALID_RESPONSE', `A script may set at most ${MAX_RESPONSE_HEADERS} response headers (${state.headers.length} were set)`);
  }
  if (state.chunks.length > MAX_RESPONSE_CHUNKS) {
    throw new ApiError('INVALID_RESPONSE', `A script's response body may hold at most ${MAX_RESPONSE_CHUNKS} pieces of text and bytes (${state.chunks.length} were written)`);
  }
  let chars = (state.contentType?.length ?? 0) + (state.characterEncoding?.length ?? 0);
  for (const [name, value] of state.headers) chars += name.length + value.length;
  if (chars > MAX_RESPONSE_HEAD_CHARS) {
    throw new ApiError('INVALID_RESPONSE', `A script's response headers may hold at most ${MAX_RESPONSE_HEAD_CHARS} characters in all (${chars} were set)`);
  }
  for (const [name, value] of state.headers) {
    checkHeader(name, value);
    // (a Location the script set itself goes where a redirect may: sendRedirect's rule)
    if (name.toLowerCase() === 'location') checkRedirectLocation(value);
  }
  for (const [what, value] of [['content type', state.contentType], ['character encoding', state.characterEncoding]] as const) {
    if (value === null) continue;
    try {
      validateHeaderValue('Content-Type', value);
    } catch {
      throw new ApiError('INVALID_RESPONSE', `Invalid response ${what} ${JSON.stringify(value.slice(0, 100))}: it must not hold control characters`);
    }
  }
  if (state.redirect !== null) checkRedirectLocation(state.redirect);
}
