/**
 * The router's logger: the `logger` option adapted to one call shape, the default console logger,
 * and the one structured line every failed call logs.
 *
 * Call shapes. The router calls `logger.error(message, meta)` (winston, console, log4js and most
 * loggers take the message first). pino and bunyan take the fields first, `logger.error(meta,
 * message)`: they are recognised (or named with the `loggerStyle` option) and called that way, so
 * `meta` lands in the log record instead of being dropped or printed as a format argument.
 */
import { Console } from 'node:console';
import type { ErrorDetail } from './error-location';
import { clipText, type ErrorName } from './errors';
import type { Logger } from './types';

/** How a logger takes its arguments: `(message, meta)` (winston, console) or `(meta, message)` (pino, bunyan). */
export type LoggerStyle = 'message-first' | 'meta-first';

const LEVELS = ['debug', 'info', 'warn', 'error'] as const;
type Level = (typeof LEVELS)[number];

/** pino marks its loggers with this symbol; bunyan loggers carry `streams` and `fields`. */
function isMetaFirst(logger: object): boolean {
  const l = logger as Record<string | symbol, unknown>;
  if (l[Symbol.for('pino.serializers')] !== undefined) return true;
  return Array.isArray(l.streams) && typeof l.fields === 'object' && l.fields !== null && typeof l.child === 'function';
}

/**
 * winston loggers (`winston.createLogger`, and their children): a `format` with `transform`,
 * `levels`, `log` and `add`. winston's `(message, meta)` leaves `meta` out of the record when the
 * message holds a printf token (`%s`, `%d`, a script's `50%off`); one info object always lands whole.
 */
function isWinston(logger: object): boolean {
  const l = logger as Record<string, unknown>;
  const format = l.format as Record<string, unknown> | null | undefined;
  return typeof l.log === 'function' && typeof l.add === 'function' && typeof l.levels === 'object' && l.levels !== null && typeof format?.transform === 'function';
}

/** Whether `logger` is a `console.Console` (`new Console(stream)`); false for what cannot be asked. */
function isConsoleInstance(logger: object): boolean {
  try {
    return logger instanceof Console;
  } catch {
    return false;
  }
}

/** The global console's own methods (bound to it), as an object of them (`{ info: console.info }`) holds them. */
const CONSOLE_METHODS: ReadonlySet<unknown> = new Set(['log', 'debug', 'info', 'warn', 'error', 'trace'].map((m) => (console as unknown as Record<string, unknown>)[m]));

/** What becomes of a line a logger failed to write: it is lost (see adaptLogger). */
export function lostLine(): void {}

/**
 * The logger the router uses: every method takes `(message, meta?)`. A meta-first logger is called
 * `(meta, message)` (or `(message)` without meta); `debug` falls back to `info` when missing. A
 * logger that throws, or whose promise rejects (a transport that is down), loses that line, never
 * the request that logs it, nor the process:
 * the router logs inside its error paths, where a throw would leave the request unanswered.
 * The message is never read as a format: a script's or a path's `%s`, `%c` or `%d` must not take
 * `meta` (the request id, app, stage) off the line. winston gets `{ ...meta, message }`, Node's
 * console `('%s', message, meta)`.
 */
export function adaptLogger(logger: Logger, style?: LoggerStyle): Logger {
  const metaFirst = (style ?? (isMetaFirst(logger) ? 'meta-first' : 'message-first')) === 'meta-first';
  const infoObject = !metaFirst && isWinston(logger);
  // (the global console, a Console of the host's own writing to a file, or an object of console's
  // methods, `{ info: console.info, ... }`: each formats its first argument)
  const isConsole = !metaFirst && (logger === console || isConsoleInstance(logger));
  const target = logger as unknown as Record<Level, ((...args: unknown[]) => void) | undefined>;
  const method = (level: Level) => {
    const fn = target[level] ?? target.info!;
    const formats = isConsole || (!metaFirst && !infoObject && CONSOLE_METHODS.has(fn));
    return (message: string, meta?: Record<string, unknown>) => {
      try {
        let out: unknown;
        if (meta === undefined) out = fn.call(logger, message);
        else if (metaFirst) out = fn.call(logger, meta, message);
        else if (infoObject) out = fn.call(logger, { ...meta, message });
        else if (formats) out = fn.call(logger, '%s', message, meta);
        else out = fn.call(logger, message, meta);
        // (an async logger fails with a rejected promise: unhandled, it would end the process)
        if (typeof (out as PromiseLike<unknown> | null)?.then === 'function') (out as PromiseLike<unknown>).then(undefined, lostLine);
      } catch {
        // (the line is lost: see above)
      }
    };
  };
  return { debug: method('debug'), info: method('info'), warn: method('warn'), error: method('error') };
}

/**
 * Query parameters whose value a log must not hold: names with token, key, secret, pass, auth,
 * sig, session or cred in them (`token`, `access_token`, `api_key`, `password`, `X-Amz-Signature`,
 * `sig`, `X-Amz-Credential`...). The spec's own authentication reads the token from the query.
 */
const CREDENTIAL_PARAM = /token|key|secret|pass|auth|sig|session|cred/i;

/** The user name and password of an absolute-form request target (`GET http://user:pass@host/...`). */
const USERINFO = /^([a-zA-Z][a-zA-Z0-9+.-]*:\/\/)[^/?#]*@/;

/**
 * A request target as a log line writes it: the value of each query parameter that names a
 * credential is `[REDACTED]`, and so is the user information of an absolute-form target (Node.js
 * accepts `GET http://user:pass@host/path`); the path and the other parameters are kept as sent.
 */
export function loggedTarget(sent: string): string {
  const target = sent.replace(USERINFO, '$1[REDACTED]@');
  const q = target.indexOf('?');
  if (q < 0) return target;
  const params = target.slice(q + 1).split('&').map((param) => {
    const eq = param.indexOf('=');
    if (eq < 0) return param;
    let name = param.slice(0, eq);
    try {
      name = decodeURIComponent(name.replace(/\+/g, ' '));
    } catch {
      // (a malformed name is matched as it was sent)
    }
    return CREDENTIAL_PARAM.test(name) ? `${param.slice(0, eq)}=[REDACTED]` : param;
  });
  return `${target.slice(0, q)}?${params.join('&')}`;
}

/** `meta` as one line of JSON (values that cannot be written are shown as strings). */
function metaText(meta: Record<string, unknown>): string {
  try {
    return JSON.stringify(meta, (_k, v: unknown) => (typeof v === 'bigint' ? String(v) : v));
  } catch {
    return '{}';
  }
}

/** Control characters that break a line or drive a terminal (tab stays); U+2028/2029 end lines in some viewers. */
const CONTROL = /[\u0000-\u0008\u000a-\u001f\u007f-\u009f\u2028\u2029]/g;

/**
 * `text` with its control characters escaped (`\n`, `\r`, `\u001b`...), for loggers that write one
 * line per message: an app id from a request path (`%0A`) or a script's message cannot start a
 * line of its own, forging an entry of the log.
 */
export function oneLine(text: string): string {
  return text.replace(CONTROL, (c) => (c === '\n' ? '\\n' : c === '\r' ? '\\r' : `\\u${c.charCodeAt(0).toString(16).padStart(4, '0')}`));
}

/**
 * `<message> <meta as JSON>` as one line (control characters escaped): the request id, app and
 * script of a console line, and a failure's script frames, stay with it.
 */
export function logLine(message: string, meta?: Record<string, unknown>): string {
  return oneLine(meta === undefined ? message : `${message} ${metaText(meta)}`);
}

/** One line per message on the console, `scriptable-api <message> <meta as JSON>`. Nothing under NODE_ENV=test. */
export function defaultLogger(env: string | undefined = process.env.NODE_ENV): Logger | undefined {
  if (env === 'test') return undefined;
  const line = (fn: (s: string) => void) => (message: string, meta?: Record<string, unknown>) => fn(logLine(`scriptable-api ${message}`, meta));
  /* eslint-disable no-console */
  return { debug: line(console.debug), info: line(console.info), warn: line(console.warn), error: line(console.error) };
  /* eslint-enable no-console */
}

/** The stage a host-side error belongs to, by its error name (script stages come with the job's detail). */
const HOST_STAGES: Partial<Record<ErrorName, string>> = {
  API_NOT_FOUND: 'route',
  METHOD_NOT_ALLOWED: 'route',
  BAD_REQUEST: 'body', // (a malformed path is the route's: see Observer.hostFailed)
  BODY_TOO_LARGE: 'body',
  UPLOAD_TOO_LARGE: 'body',
  UNSUPPORTED_CHARSET: 'body',
  UNSUPPORTED_ENCODING: 'body',
  PREVIEW_FORBIDDEN: 'preview',
  INVALID_API_DEFINITION: 'definition',
  INVALID_AUTOMATION: 'definition',
  RATE_LIMITED: 'rateLimit',
  RATE_LIMIT_QUEUE_FULL: 'rateLimit',
  INVALID_RESULT: 'response',
  FILE_NOT_FOUND: 'response',
  PATH_OUTSIDE_SANDBOX: 'response',
  FILES_NOT_CONFIGURED: 'response',
  // (no stage to name: the router refused the request, or ended its wait, as it closed)
  SHUTTING_DOWN: 'engine',
};

/** The stage of a host-side error: its entry in HOST_STAGES, `response` once the script has run, else `host`. */
export function hostStage(errorName: string | undefined, fallback = 'host'): string {
  return (errorName && HOST_STAGES[errorName as ErrorName]) || fallback;
}

/** The fields of a failure line. */
export interface FailureLog {
  requestId: string;
  /** Absent when the path named no app. */
  appId?: string;
  apiPath?: string;
  /** `before`, `call`, `after`, `onError` (script stages) or `route`, `preview`, `rateLimit`, `body`, `definition`, `registry`, `response`, `host`. */
  stage: string;
  code: number;
  status: number;
  message: string;
  /** Set for preview requests. */
  preview?: boolean;
  /** Where it failed and the script's stack (script stages only; never host frames). */
  detail?: ErrorDetail;
  /** A host-side exception's own stack (unexpected errors only: these are bugs or host outages). */
  hostStack?: string;
  /** What a host failure came from (the message of its cause: a file system's, a service's error), never sent to the client. */
  cause?: string;
}

/**
 * Most characters of a script's own text (a thrown message or name) a failure line holds, as a
 * script's console message (CONSOLE_CAP, lib/runtime/sandbox/prelude.ts): a tenant must not write
 * megabytes into the host's log with each request. The error body keeps up to ERROR_MESSAGE_MAX.
 */
const LOGGED_TEXT_MAX = 8 * 1024;

function clip(text: string): string {
  return clipText(text, LOGGED_TEXT_MAX);
}

/**
 * Logs one line for a failed call: `error` for a 5xx, `info` for a 4xx (unknown paths, rate
 * limits and bad requests are the client's doing; they are counted by the metrics too).
 */
export function logFailure(logger: Logger | undefined, f: FailureLog): void {
  if (!logger) return;
  const d = f.detail ?? {};
  const message = clip(f.message);
  const meta: Record<string, unknown> = {
    requestId: f.requestId,
    appId: f.appId ?? null,
    apiPath: f.apiPath ?? null,
    stage: d.stage ?? f.stage,
    code: f.code,
    status: f.status,
    message,
  };
  if (f.preview) meta.preview = true;
  if (d.script !== undefined) meta.script = d.script;
  if (d.name !== undefined) meta.errorName = clip(d.name);
  if (d.location !== undefined) meta.location = d.location;
  if (d.stack !== undefined) meta.stack = d.stack;
  if (f.hostStack !== undefined) meta.hostStack = f.hostStack;
  if (f.cause !== undefined) meta.cause = clip(f.cause);
  const cause = d.callFailure;
  if (cause !== undefined) meta.callFailure = { ...cause, message: clip(cause.message) };
  const where = f.appId === undefined ? '' : ` ${f.preview ? 'preview/' : ''}${f.appId}/${f.apiPath ?? ''}`;
  const at = d.location === undefined ? '' : ` at ${d.location}`;
  const after = cause === undefined ? '' : ` (handling the call's failure: ${cause.code} ${clip(cause.message)}${cause.location === undefined ? '' : ` at ${cause.location}`})`;
  const why = f.cause === undefined ? '' : ` (${clip(f.cause)})`;
  const text = `request ${f.requestId}${where} failed in ${meta.stage as string}: ${f.status} ${f.code} ${message}${why}${at}${after}`;
  if (f.status >= 500) logger.error(text, meta);
  else logger.info(text, meta);
}

/** Logs `message` the first time `key` is seen by this `once` set only. */
export function logOnce(logger: Logger | undefined, seen: Set<string>, key: string, level: 'warn' | 'error', message: string, meta?: Record<string, unknown>): void {
  if (!logger || seen.has(key)) return;
  seen.add(key);
  logger[level](message, meta);
}
