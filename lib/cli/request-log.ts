/**
 * One line per request, when its response ends (or the client goes away first):
 *   2026-01-05T10:00:00.000Z GET /web0/api/shop/hello?name=Ada 200 3.1ms 6f0c1d2e-…
 * The last field is the request id the router sent in X-Request-Id ('-' for other routes). A
 * request whose client left first ends in `(client closed)`, after its status if one was sent
 * (`- (client closed)` when none was); one the server cut when the shutdown's limit passed ends in
 * `(closed at shutdown)`. A query parameter naming a credential (`?token=`) is written
 * `token=[REDACTED]` (loggedTarget).
 */
import type { NextFunction, Request, Response } from 'express';
import { loggedTarget } from '../logging';

export function requestLog(write: (line: string) => void, cutAtShutdown: () => boolean = () => false) {
  return (req: Request, res: Response, next: NextFunction): void => {
    const start = process.hrtime.bigint();
    let done = false;
    const end = (aborted: boolean) => {
      if (done) return;
      done = true;
      const ms = Number(process.hrtime.bigint() - start) / 1e6;
      const id = res.getHeader('x-request-id');
      // (a client that left before the answer: its status, if it was sent, else '-')
      const status = aborted && !res.writableFinished ? `${res.headersSent ? res.statusCode : '-'} (${cutAtShutdown() ? 'closed at shutdown' : 'client closed'})` : String(res.statusCode);
      write(`${new Date().toISOString()} ${req.method} ${loggedTarget(req.originalUrl)} ${status} ${ms.toFixed(1)}ms ${typeof id === 'string' ? id : '-'}`);
    };
    res.once('finish', () => end(false));
    res.once('close', () => end(true));
    next();
  };
}
