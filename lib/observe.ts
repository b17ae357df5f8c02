/**
 * What the router tells operators about each request: the metrics (requests, script time, queue
 * wait, rate-limit outcomes) and one log line per failed call. One RequestTrace per request
 * carries what is known so far (app, API, stage).
 */
import type { ServerResponse } from 'node:http';
import { ERRORS, ERROR_MESSAGE_MAX, clipText, isApiError, thrownStack, thrownText, type ErrorBody } from './errors';
import type { ErrorDetail } from './error-location';
import { hostStage, logFailure } from './logging';
import type { MetricsRecorder } from './metrics';
import type { RegistryStage } from './preview';
import type { RateLimitDecision } from './rate-limit';
import type { JobResult } from './runtime/engine';
import type { Logger } from './types';

/** What is known about a request as it goes through the router. */
export interface RequestTrace {
  requestId: string;
  /** performance.now() at arrival. */
  started: number;
  stage: RegistryStage;
  /** The app and API path the request names (logged; unknown ones are never metric labels). */
  appId?: string;
  apiPath?: string;
  /** The API exists: `appId` and `apiPath` label its metrics. */
  matched: boolean;
  /** The script stages have run (a host error after them belongs to the response). */
  ran: boolean;
  /**
   * The script time and queue wait (ms) of the request's jobs so far: a rate limit that reads
   * attributes runs the before script and the rest as two jobs, counted once (scriptsDone).
   * `ran`: one of them left the line and ran (a job that never did, a queue timeout say, has no
   * script time to count: its wait is queue wait).
   */
  scripts?: { runMs: number; queueMs?: number; ran: boolean };
  /** The request left the router through `next()` (fallthrough): nothing is counted. */
  passed: boolean;
  /** The response carries its CORS headers already. */
  corsDone: boolean;
  /** The status of the host failure logged: a response it leaves unfinished (a download cut short) counts with it, not as 499 (one never begun, its client gone, counts as 499). */
  failedStatus?: number;
  /** The router has begun writing its answer (a response sent otherwise was the host's). */
  answering?: boolean;
  /** The call's failure the answer being sent is an `onError` hook's answer to: a failure to send it names it. */
  handled?: ErrorDetail['callFailure'];
}

/** The error body with `location` added when the router exposes it. */
export type ErrorBodyWithLocation = ErrorBody & { location?: string };

/** Metric labels: the app and API of a request that matched one, else both empty; whether it is a preview. */
function labels(trace: RequestTrace): [string, string, boolean] {
  const preview = trace.stage === 'preview';
  return trace.matched ? [trace.appId ?? '', trace.apiPath ?? '', preview] : ['', '', preview];
}

export class Observer {
  constructor(
    private readonly logger: Logger | undefined,
    readonly metrics: MetricsRecorder | undefined,
    private readonly exposeLocation: boolean,
  ) {}

  /** Starts a request's trace (its response is counted by `end`). */
  begin(requestId: string, now: number): RequestTrace {
    return { requestId, started: now, stage: 'published', matched: false, ran: false, passed: false, corsDone: false };
  }

  /**
   * The router is done with the request: its response is counted, at once when it has been
   * written out, else once it closes (a client that went away counts as 499, as nginx logs it, a
   * host failure with its status). A request passed on with `next()` is not counted.
   */
  end(trace: RequestTrace, res: ServerResponse): void {
    const metrics = this.metrics;
    if (!metrics || trace.passed) return;
    // (cut short: the router has heard of a host failure by now, failedStatus; else the client left.
    // Nothing sent at all: the client left first, even when that failed the request, such as a
    // body it stopped sending, whose 400 never went out)
    const status = () => (res.writableFinished ? res.statusCode : res.headersSent ? (trace.failedStatus ?? 499) : 499);
    const count = () => metrics.request(...labels(trace), status(), (performance.now() - trace.started) / 1000);
    if (res.writableFinished || res.destroyed) count();
    else res.once('close', count); // still being written out (a slow client)
  }

  /** A job ended after `elapsedMs` of waiting for it: script time, and queue wait when the engine reports its run time. */
  jobDone(trace: RequestTrace, elapsedMs: number, result: JobResult): void {
    trace.ran = true;
    const run = typeof result.runMs === 'number' && result.runMs >= 0 ? Math.min(result.runMs, elapsedMs) : undefined;
    const s = (trace.scripts ??= { runMs: 0, ran: false });
    // (the engine reports 0 ms for a job that never left the line: QUEUE_TIMEOUT, CLIENT_GONE, SHUTTING_DOWN)
    if (run !== 0) s.ran = true;
    s.runMs += run ?? elapsedMs;
    if (run !== undefined) s.queueMs = (s.queueMs ?? 0) + elapsedMs - run;
  }

  /** The request's jobs are over: their script time and queue wait, one observation each. */
  scriptsDone(trace: RequestTrace): void {
    const s = trace.scripts;
    if (!this.metrics || s === undefined) return;
    this.metrics.script(...labels(trace), s.ran ? s.runMs / 1000 : undefined, s.queueMs === undefined ? undefined : s.queueMs / 1000);
  }

  /** A rate-limit decision: admitted (maybe after a wait) or rejected. */
  rateLimit(trace: RequestTrace, d: RateLimitDecision): void {
    if (!this.metrics) return;
    const [app, api, preview] = labels(trace);
    if (d.ok) this.metrics.rateLimit(app, api, preview, 'admitted', { waitedMs: d.waitedMs });
    else this.metrics.rateLimit(app, api, preview, 'rejected', { reason: d.error === 'RATE_LIMITED' ? 'rate_limited' : d.error === 'RATE_LIMIT_QUEUE_FULL' ? 'queue_full' : 'client_gone' });
  }

  /** Logs a failure the engine reported, and returns the error body to send. */
  scriptFailed(trace: RequestTrace, e: { message: string; code: number; status: number; detail?: ErrorDetail }): ErrorBodyWithLocation {
    logFailure(this.logger, { ...this.where(trace), stage: e.detail?.stage ?? 'engine', code: e.code, status: e.status, message: e.message, detail: e.detail, cause: e.detail?.cause });
    const body: ErrorBodyWithLocation = { requestId: trace.requestId, message: clipText(e.message, ERROR_MESSAGE_MAX), code: e.code };
    if (this.exposeLocation && e.detail?.location !== undefined) body.location = e.detail.location;
    return body;
  }

  /**
   * The host's own middleware sent a response while the router worked (a request timeout, say):
   * it stands, untouched; the router's answer is dropped, with a warning.
   */
  answeredBefore(trace: RequestTrace): void {
    const where = trace.appId === undefined ? '' : ` ${trace.stage === 'preview' ? 'preview/' : ''}${trace.appId}/${trace.apiPath ?? ''}`;
    this.logger?.warn(
      `request ${trace.requestId}${where}: the response had been sent before the router answered (by the host's middleware, a request timeout say); the router's answer was dropped`,
      this.where(trace),
    );
  }

  /** Logs a failure on the host side (an ApiError, or anything else thrown: HOST_ERROR with its stack). */
  hostFailed(trace: RequestTrace, err: unknown): void {
    // (anything a host service threw is read without trusting it: a getter of its stack or message
    // that throws, or a revoked proxy, must not throw here, where the request is being answered)
    if (isApiError(err)) {
      trace.failedStatus = err.status;
      const stage = err.errorName === 'BAD_REQUEST' && !trace.matched ? 'route' : hostStage(err.errorName, trace.ran ? 'response' : 'host');
      // (a host failure's cause, such as the file system's or a preview authorize's error, is for the log only)
      const cause = (err as { cause?: unknown }).cause;
      const why = cause === undefined ? {} : { cause: thrownText(cause), hostStack: thrownStack(cause) };
      logFailure(this.logger, { ...this.where(trace), stage, code: err.code, status: err.status, message: err.message, ...why, ...this.handled(trace) });
      return;
    }
    const e = ERRORS.HOST_ERROR;
    trace.failedStatus = e.status;
    // (the message the client got, as for every failure; what failed is the cause)
    logFailure(this.logger, {
      ...this.where(trace),
      stage: trace.ran ? 'response' : 'host',
      code: e.code,
      status: e.status,
      message: e.message,
      cause: thrownText(err),
      hostStack: thrownStack(err),
      ...this.handled(trace),
    });
  }

  /** The call's failure an onError hook's refused answer was handling, for its log line. */
  private handled(trace: RequestTrace): { detail?: ErrorDetail } {
    return trace.handled === undefined ? {} : { detail: { callFailure: trace.handled } };
  }

  private where(trace: RequestTrace) {
    return { requestId: trace.requestId, appId: trace.appId, apiPath: trace.apiPath, preview: trace.stage === 'preview' };
  }
}
