/** The default error response: `{ requestId, message, code }` as JSON. */
import type { ServerResponse } from 'node:http';
import { ERRORS, isApiError, type ErrorBody } from '../errors';
import { connectionClosed } from './client-gone';

export const JSON_TYPE = 'application/json;charset=UTF-8';

/**
 * Ends a response with `body`, unless its status is one that has no content (204, 205, 304: RFC
 * 9110 15.3.5, 15.3.6, 15.4.5): then it goes without body, Content-Type or Content-Length (205:
 * `Content-Length: 0`), so the connection's next response is read where it begins.
 */
export function endWithBody(res: ServerResponse, body: string | Buffer, contentType: string | null): void {
  const status = res.statusCode;
  if (status === 204 || status === 205 || status === 304) {
    res.removeHeader('Content-Type');
    if (status === 205) res.setHeader('Content-Length', 0);
    else res.removeHeader('Content-Length');
    res.end();
    return;
  }
  if (contentType !== null) res.setHeader('Content-Type', contentType);
  res.setHeader('Content-Length', typeof body === 'string' ? Buffer.byteLength(body) : body.length);
  res.end(body);
}

export function sendErrorBody(res: ServerResponse, body: ErrorBody, status: number, headers?: Record<string, string>): void {
  if (res.headersSent || connectionClosed(res)) {
    res.destroy();
    return;
  }
  res.statusCode = status;
  if (headers) for (const k in headers) res.setHeader(k, headers[k]);
  endWithBody(res, Buffer.from(JSON.stringify(body)), JSON_TYPE);
}

/** Turns anything thrown on the host side into the error body (hiding unexpected internals). */
export function sendError(res: ServerResponse, requestId: string, err: unknown, headers?: Record<string, string>): void {
  if (isApiError(err)) {
    sendErrorBody(res, { requestId, message: err.message, code: err.code }, err.status, headers);
    return;
  }
  const e = ERRORS.HOST_ERROR;
  sendErrorBody(res, { requestId, message: e.message, code: e.code }, e.status, headers);
}
