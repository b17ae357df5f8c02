/**
 * What the standalone server answers for a request no route takes (a path outside the mount
 * point and the server's own routes, a `*` target): the library's JSON 404 with a request id, as
 * an unknown path under the mount gets, instead of Express's HTML page.
 */
import { randomUUID } from 'node:crypto';
import type { Request, Response } from 'express';
import { ApiError } from '../errors';
import { sendError } from '../response/error';

export function notFound(mount: string) {
  const message = `No API at this path: the APIs are served under ${mount}`;
  return (_req: Request, res: Response): void => {
    const requestId = randomUUID();
    res.setHeader('X-Request-Id', requestId);
    sendError(res, requestId, new ApiError('API_NOT_FOUND', message));
  };
}
