/**
 * An HTTP/1.1 request without a Host header, and any request with more than one (RFC 9112 3.2: the
 * server must answer 400), gets the library's JSON error body, then its connection closes. The
 * standalone server turns Node.js's own check off (`requireHostHeader: false`), which answered
 * with an empty body; Node.js never checked for a second Host, which it drops (scripts saw the
 * first, a proxy or cache in front may have read the other).
 */
import { randomUUID } from 'node:crypto';
import type { NextFunction, Request, Response } from 'express';
import { ApiError } from '../errors';
import { sendError } from '../response/error';

/** How many Host header lines the request has. */
function hostCount(raw: string[]): number {
  let n = 0;
  for (let i = 0; i < raw.length; i += 2) if (raw[i].length === 4 && raw[i].toLowerCase() === 'host') n++;
  return n;
}

export function requireHost() {
  return (req: Request, res: Response, next: NextFunction): void => {
    const hosts = hostCount(req.rawHeaders);
    if (hosts === 1 || (hosts === 0 && req.httpVersion !== '1.1')) {
      next();
      return;
    }
    const requestId = randomUUID();
    res.setHeader('X-Request-Id', requestId);
    res.setHeader('Connection', 'close');
    sendError(res, requestId, new ApiError('BAD_REQUEST', hosts === 0 ? 'An HTTP/1.1 request needs a Host header' : 'A request may have only one Host header'));
  };
}
