/**
 * An HTTP/1.1 request without a Host header (RFC 9112 3.2: the server must answer 400) gets the
 * library's JSON error body, then its connection closes. The standalone server turns Node.js's
 * own check off (`requireHostHeader: false`), which answered with an empty body.
 */
import { randomUUID } from 'node:crypto';
import type { NextFunction, Request, Response } from 'express';
import { ApiError } from '../errors';
import { sendError } from '../response/error';

export function requireHost() {
  return (req: Request, res: Response, next: NextFunction): void => {
    if (req.httpVersion !== '1.1' || req.headers.host !== undefined) {
      next();
      return;
    }
    const requestId = randomUUID();
    res.setHeader('X-Request-Id', requestId);
    res.setHeader('Connection', 'close');
    sendError(res, requestId, new ApiError('BAD_REQUEST', 'An HTTP/1.1 request needs a Host header'));
  };
}
