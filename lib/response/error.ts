/** The default error response: `{ requestId, message, code }` as JSON. */
import type { ServerResponse } from 'node:http';
import { ApiError, ERRORS, type ErrorBody } from '../errors';

export const JSON_TYPE = 'application/json;charset=UTF-8';

export function sendErrorBody(res: ServerResponse, body: ErrorBody, status: number, headers?: Record<string, string>): void {
  if (res.headersSent) {
    res.destroy();
    return;
  }
  const payload = Buffer.from(JSON.stringify(body));
  res.statusCode = status;
  if (headers) for (const k in headers) res.setHeader(k, headers[k]);
  res.setHeader('Content-Type', JSON_TYPE);
  res.setHeader('Content-Length', payload.length);
  res.end(payload);
}

/** Turns anything thrown on the host side into the error body (hiding unexpected internals). */
export function sendError(res: ServerResponse, requestId: string, err: unknown, headers?: Record<string, string>): void {
  if (err instanceof ApiError) {
    sendErrorBody(res, { requestId, message: err.message, code: err.code }, err.status, headers);
    return;
  }
  const e = ERRORS.HOST_ERROR;
  sendErrorBody(res, { requestId, message: e.message, code: e.code }, e.status, headers);
}
