/**
 * The `fallthrough` option: an unknown app or path leaves the router through `next()`, so later
 * routes and the host's own 404 handler answer it. Nothing of the router stays on the response.
 */
import type { NextFunction, Response } from 'express';
import type { RequestTrace } from './observe';

/**
 * Hands the request on: the router's headers are taken back (an X-Request-Id the host set before the
 * router, `prior`, is put back) and the request is not counted.
 */
export function passOn(res: Response, trace: RequestTrace, next: NextFunction, prior?: number | string | string[]): void {
  trace.passed = true;
  if (prior === undefined) res.removeHeader('X-Request-Id');
  else res.setHeader('X-Request-Id', prior);
  next();
}
