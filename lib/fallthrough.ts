/**
 * The `fallthrough` option: an unknown app or path leaves the router through `next()`, so later
 * routes and the host's own 404 handler answer it. Nothing of the router stays on the response.
 */
import type { NextFunction, Response } from 'express';
import type { RequestTrace } from './observe';

/** Hands the request on: the router's headers are taken back and the request is not counted. */
export function passOn(res: Response, trace: RequestTrace, next: NextFunction): void {
  trace.passed = true;
  res.removeHeader('X-Request-Id');
  next();
}
