/**
 * Applies what scripts did through ctx.response (status, headers, content type, buffered body,
 * sendError, sendRedirect) to the real response.
 */
import type { ServerResponse } from 'node:http';
import vary from 'vary';
import { STATUS_CODES } from 'node:http';
import type { ResponseState } from '../runtime/protocol';
import { ERROR_MESSAGE_MAX, clipText } from '../errors';
import { JSON_TYPE, endWithBody, sendErrorBody } from './error';
import { encodeText, responseCharset } from '../context/charset';
import { checkResponseState, locationHeader } from './framing';

/**
 * `Vary` with the script's value added: merged by `vary` when it is a list of header names, else
 * appended as the script set it (`vary` throws on it; without a prior `Vary` it goes out as set too).
 */
function appendVary(prior: string, value: string): string {
  try {
    return vary.append(prior, value);
  } catch {
    return `${prior}, ${value}`;
  }
}

/** The headers a script set, each with the value the router had put there before (undefined: none). */
export type AppliedHeaders = ReadonlyMap<string, ReturnType<ServerResponse['getHeader']>>;

/**
 * Headers recorded by scripts. The whole state is checked first (lib/response/framing.ts): a
 * breach throws before any header is set, so the error response carries none of them. Returns
 * the names set with the router's values they replaced (see removeHeaders).
 */
export function applyHeaders(res: ServerResponse, state: ResponseState): AppliedHeaders {
  checkResponseState(state);
  const applied = new Map<string, ReturnType<ServerResponse['getHeader']>>();
  for (const [name, value] of state.headers) {
    const key = name.toLowerCase();
    if (key === 'x-request-id') continue;
    const first = !applied.has(key);
    if (first) applied.set(key, res.getHeader(key));
    if (key === 'vary') {
      // (added to what the router's CORS put there: a shared cache must still key on Origin)
      const prior = res.getHeader('Vary');
      res.setHeader('Vary', prior === undefined ? value : appendVary(String(prior), value));
    } else if (first) res.setHeader(name, value);
    else res.appendHeader(name, value);
  }
  return applied;
}

/**
 * Takes the script's headers off a response that fails before it is sent (the error body goes
 * without them), and puts back the router's own (CORS, rate limit) that they replaced.
 */
export function removeHeaders(res: ServerResponse, applied: AppliedHeaders): void {
  if (res.headersSent) return;
  for (const [name, prior] of applied) {
    if (prior === undefined) res.removeHeader(name);
    else res.setHeader(name, prior);
  }
}

export function contentTypeOf(state: ResponseState): string | null {
  if (!state.contentType) return null;
  if (state.characterEncoding && !/;\s*charset=/i.test(state.contentType)) return `${state.contentType};charset=${state.characterEncoding}`;
  return state.contentType;
}

/**
 * The Content-Type a body goes out with: the script's own (contentTypeOf), else `defaultType` with
 * the encoding the script set (`setCharacterEncoding` alone) in place of its charset, as the text
 * is then encoded in it.
 */
export function bodyType(state: ResponseState, defaultType: string): string {
  const declared = contentTypeOf(state);
  if (declared !== null) return declared;
  const encoding = state.characterEncoding;
  // (a function gives the text as it is: a replacement string would expand the script's `$&`, `$'`...)
  return encoding ? defaultType.replace(/;\s*charset=[^;]*/i, () => `;charset=${encoding}`) : defaultType;
}

/** Sends the response exactly as the script wrote it. */
export function sendWritten(res: ServerResponse, requestId: string, state: ResponseState): void {
  applyHeaders(res, state);
  if (state.error) {
    const message = state.error.message == null ? (STATUS_CODES[state.error.status] ?? 'Error') : clipText(state.error.message, ERROR_MESSAGE_MAX);
    sendErrorBody(res, { requestId, message, code: state.error.status }, state.error.status);
    return;
  }
  if (state.redirect !== null) {
    res.statusCode = 302;
    res.setHeader('Location', locationHeader(state.redirect));
    res.end();
    return;
  }
  // (text in the response's charset, as a servlet's writer writes it)
  const charset = responseCharset(bodyType(state, 'text/plain;charset=UTF-8'));
  const parts = state.chunks.map((c) => ('t' in c ? encodeText(c.t, charset) : Buffer.from(c.b, 'base64')));
  const body = parts.length === 1 ? parts[0] : Buffer.concat(parts); // (one chunk, the usual case, is not copied again)
  res.statusCode = state.status;
  const type = bodyType(state, state.chunks.some((c) => 'b' in c) ? 'application/octet-stream' : 'text/plain;charset=UTF-8');
  endWithBody(res, body, body.length > 0 || state.contentType ? type : null);
}

const NON_ASCII = /[^\x00-\x7f]/;

/** Whether every header the script set (content type included) is ASCII. */
function asciiHead(state: ResponseState, type: string): boolean {
  if (NON_ASCII.test(type)) return false;
  for (const [, value] of state.headers) if (NON_ASCII.test(value)) return false;
  return true;
}

/** Sends a serialized result: the script's status, its content type or the return type's default. */
export function sendBody(res: ServerResponse, state: ResponseState, body: string, defaultType: string): void {
  res.statusCode = state.status;
  const type = bodyType(state, defaultType);
  const charset = responseCharset(type);
  // (a UTF-8 string goes out with the head in one write, but Node then encodes the head as UTF-8
  // too: a Latin-1 header value (`José`) goes as a Buffer body, after a head written byte for byte)
  endWithBody(res, charset === undefined && asciiHead(state, type) ? body : encodeText(body, charset), type);
}

export { JSON_TYPE };
