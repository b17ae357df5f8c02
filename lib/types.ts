/**
 * Public types of scriptable-api: the registry contract, API definitions and router options.
 * Script-author types (APIContext, platform...) live in `types/` at the package root.
 */
import type { Request } from 'express';
import type { Readable } from 'node:stream';
import type { RateLimitStore } from './rate-limit/types';
import type { ScriptEngine } from './runtime/engine';
import type { CorsOptions } from './cors';
import type { LoggerStyle } from './logging';
import type { MetricsOptions, RouterMetrics } from './metrics';
import type { PreviewOptions, RegistryStage } from './preview';

export type { CorsOptions } from './cors';
export type { LoggerStyle } from './logging';
export type { MetricsOptions, RouterMetrics } from './metrics';
export type { PreviewOptions, RegistryStage } from './preview';
import type { AutomationDefinition } from './automation/types';
import type { FileStorage } from './files/storage';

/** A value or a promise of it. */
export type Awaitable<T> = T | Promise<T>;

/** A function exported by a script module: `{ script: 'orders.js', function: 'list' }`. */
export interface ScriptRef {
  /** Script name as the registry knows it (`getScript(appId, name)`); `.ts` names are type-stripped. */
  script: string;
  /** Exported function name; `default` for `export default`. */
  function: string;
}

/** An automation (a host-run program without interactive steps), by id. */
export interface AutomationRef {
  automation: string;
}

/** Per-API rate limiting (GCRA: admissions spaced by 1000 / requestsPerSecond ms). */
export interface RateLimitRule {
  /** Requests admitted per second; fractions allowed (0.5 = one every 2 s); 0 = no limit. */
  requestsPerSecond: number;
  /** Longest a request may wait for its turn, in ms (negative counts as 0). Default 0. */
  timeoutMs?: number;
  /**
   * Bucket key template. Default `{ip}`. Placeholders: `{ip}`, `{header.NAME}`, `{query.NAME}`,
   * `{cookie.NAME}`, `{attr.NAME}` (a request attribute set by the before script). Other text is
   * literal: `"global"` is one bucket for every caller.
   */
  identifier?: string;
}

export type ReturnType = 'JSON' | 'Text' | 'File' | 'Redirect';

/** One configured API of an app. */
export interface ApiDefinition {
  /** Configured path, e.g. `orders/list` (no leading slash). */
  path: string;
  /** The call type: a script function or an automation. */
  call: ScriptRef | AutomationRef;
  /** How the result is sent. */
  returnType: ReturnType;
  /** "Execute before calling": its non-undefined return value is the response. */
  before?: ScriptRef;
  /** "Execute after calling": its non-undefined return value replaces the result. */
  after?: ScriptRef | AutomationRef;
  /** "Execute after calling error": runs on an error of the call; may write its own response. */
  onError?: ScriptRef;
  /** Rate limiting for this API. */
  rateLimit?: RateLimitRule;
  /** Accepted HTTP methods (any case; each one Node.js parses, `http.METHODS`, or the definition is refused). Default: all. */
  methods?: string[];
  /** `false` makes the API answer as unknown (404). Default true. */
  enabled?: boolean;
  /** CORS of this API, over the router's `cors` field by field; `false` turns CORS off for it. */
  cors?: CorsOptions | false;
  /** For people reading the definition. */
  description?: string;
  /** The JSON Schema an editor checks the definition against (`schemas/api-definition.json`); not used by the router. */
  $schema?: string;
}

export type { AutomationDefinition, AutomationStep, AutomationState, AutomationValue, AutomationStepBase, ScriptStep, HttpStep, SetStep, IfStep, ForEachStep, ReturnStep, AbortStep } from './automation/types';

/**
 * Where API definitions and scripts live. Implement it over your database, files, or CMS.
 * `stage` is `'published'` for `<mount>/<appId>/<path>` and `'preview'` for the preview path
 * (`preview` option): a registry without unpublished versions may ignore it.
 */
export interface ApiRegistry {
  getApi(appId: string, path: string, stage?: RegistryStage): Awaitable<ApiDefinition | null | undefined>;
  /** ES module source of a script. */
  getScript(appId: string, name: string, stage?: RegistryStage): Awaitable<string | null | undefined>;
  getAutomation?(appId: string, id: string, stage?: RegistryStage): Awaitable<AutomationDefinition | null | undefined>;
  /**
   * The app's incarnation (optional; answered synchronously, on every request): a value that
   * changes when the app is deleted and created again under the same id. Its scripts' contexts
   * (module state) are kept per incarnation, so an app created under a deleted one's id never sees
   * that app's module state, even with a byte-identical script. MemoryRegistry and
   * DirectoryRegistry answer it; without it a script's context is kept per app id and source.
   */
  appGeneration?(appId: string, stage?: RegistryStage): number | string | undefined;
}

/** The account object of the spec, returned by `platform.system.getAccountByToken`. */
export interface Account {
  id: string;
  name?: string;
  userName?: string;
  email?: string;
  mobileNo?: string;
  avatar?: string;
  companyId?: string;
  createTime?: number;
  updateTime?: number;
  isValid?: boolean;
  valid?: boolean;
  [key: string]: unknown;
}

/** Who asks for an account: the second argument of `AccountService.getAccountByToken`. */
export interface AccountLookup {
  /** The app whose script asks (one service serves every app: scope its tokens by it if its apps have their own users). */
  appId: string;
  requestId: string;
  /** True on the preview path. */
  preview: boolean;
  /** Aborted when the call ends before the lookup answers (its time limit passed...): the answer is no longer read. */
  signal: AbortSignal;
}

/** Account lookups for `platform.system.getAccountByToken(token)`. */
export interface AccountService {
  /**
   * The account of a non-empty token, or null / undefined for none. A throw, a rejection or an
   * answer that is neither (not an object with a string `id`) fails the script's call with
   * HOST_ERROR (270602).
   */
  getAccountByToken(token: string, lookup: AccountLookup): Awaitable<Account | null | undefined>;
}

/** What an automation runner receives. */
export interface AutomationInvocation {
  appId: string;
  requestId: string;
  automation: AutomationDefinition;
  /** `call` or `after`. */
  stage: 'call' | 'after';
  /**
   * True on the preview path: `automation` is the registry's preview version; what its steps run
   * (scripts, other definitions) should come from the preview stage too.
   */
  preview: boolean;
  /** A JSON copy of the request (headers, query, body...) and, for `after`, the call's result. */
  input: { request: Record<string, unknown>; result?: unknown; attributes: Record<string, unknown> };
  /**
   * Aborted when the call ends before the runner answers (its time limit passed, the router
   * closed with `force`; a client that leaves does not end the call): stop the work (pass it to
   * `fetch`, a database driver...); the answer is no longer read.
   */
  signal: AbortSignal;
}

/** Runs automation programs (host code), in place of the built-in interpreter. */
export interface AutomationRunner {
  run(invocation: AutomationInvocation): Awaitable<unknown>;
}

/** The file an uploaded Part hands to `saveAttachment(tableId, fieldId)`. */
export interface AttachmentFile {
  fieldName: string;
  fileName: string | null;
  contentType: string;
  size: number;
  /** The temporary file holding the upload; removed when the request ends. */
  path: string;
  /** A new stream of the bytes (read it, or destroy it). */
  stream(): Readable;
  /** The whole file in memory, read on first use: prefer `stream()` or `path` for large files. */
  readonly data: Buffer;
}

/**
 * The attachment record `Part.saveAttachment(tableId, fieldId)` returns when the router stores
 * attachments itself (no `attachments` service): the file is in storage at `path`.
 */
export interface TableAttachment {
  /** A new unique id. */
  id: string;
  /** The file name (the upload's, made safe for a path and a header). */
  name: string;
  /** Size in bytes. */
  size: number;
  /** The upload's MIME type. */
  contentType: string;
  tableId: string;
  fieldId: string;
  /** Path in the app's shared storage (`attachments/<tableId>/<fieldId>/<id>/<name>`): a File result's `storagePath`. */
  path: string;
  /** When it was stored, ms since the epoch. */
  createTime: number;
}

/** Stores uploaded files as table attachments for `Part.saveAttachment(tableId, fieldId)`. */
export interface AttachmentService {
  /** Returns the TableAttachment record the script receives (any JSON value). */
  save(appId: string, tableId: string, fieldId: string, file: AttachmentFile): Awaitable<unknown>;
}

/** Limits of `multipart/form-data` uploads (the `upload` option). */
export interface UploadOptions {
  /** Largest uploaded file, bytes or a size like `'100mb'`. Default `'1gb'`. */
  fileSize?: number | string;
  /** Most files in one request. Default 10. */
  files?: number;
  /** Most non-file form fields in one request (of a multipart upload, and of an urlencoded form body). Default 1000. */
  fields?: number;
  /** Largest form field value, bytes or a size like `'64kb'`. Default `'1mb'`. */
  fieldSize?: number | string;
  /** Folder of the uploads' temporary files (one sub-folder per request), made when missing. Default: the OS temp folder. */
  tmpDir?: string;
}

/** Outbound HTTP for `platform.http.request`. Private networks are refused unless allowed. */
export interface OutboundOptions {
  /** Allow loopback, private, link-local and unspecified addresses. Default false. */
  allowPrivateNetworks?: boolean;
  /** If set, only these host names (exact, or `*.example.com`) may be called. */
  allowHosts?: string[];
  /** Per-request timeout in ms (1 to 2147483647). Default 10000. */
  timeoutMs?: number;
  /** Largest response body read, in bytes. Default 10 MiB. */
  maxBodyBytes?: number;
  /**
   * Most bytes of outbound bodies the router holds in memory for all calls together: a response
   * body from when it is read until its response is released (the call ends, or the call's 32
   * kept responses move past it), a request body from when it is sent until it is answered. One
   * call may hold an eighth of it, or `maxBodyBytes` if that is more. A request body that does not
   * fit fails its request with OUTBOUND_FAILED (270501); a response body, when the script reads it
   * (one of a declared length is then not read, so `saveBodyAsFile` can still stream it to a file).
   * At least `maxBodyBytes`. Default 256 MiB (or `maxBodyBytes`, if that is more).
   */
  maxBufferedBytes?: number;
  /** Most redirects followed. Default 5. */
  maxRedirects?: number;
  /**
   * Most outbound requests the calls of one app have open at once: in flight, or kept by their
   * call with a body not read whole (each may hold a connection, a file descriptor every app
   * shares). One past it fails with OUTBOUND_FAILED (270501). Default 2048.
   */
  maxRequestsPerApp?: number;
}

/**
 * Where script console output, failed calls and router diagnostics go. The router calls
 * `error(message, meta)`; pino and bunyan loggers (recognised, or `loggerStyle: 'meta-first'`) are
 * called `error(meta, message)`. `console`, winston, pino and bunyan loggers all fit.
 */
export interface Logger {
  debug?(message: string, meta?: Record<string, unknown>): void;
  info(message: string, meta?: Record<string, unknown>): void;
  warn(message: string, meta?: Record<string, unknown>): void;
  error(message: string, meta?: Record<string, unknown>): void;
}

/** Options of the rate limiter. */
export interface RateLimitOptions {
  /** Where buckets live. Default: an in-memory store for this router. */
  store?: RateLimitStore;
  /** When the store fails: `memory` (default) falls back to an in-memory limiter, `open` admits. */
  onStoreError?: 'memory' | 'open';
  /** Most requests waiting for a slot across all buckets. Default 1000. */
  maxWaiting?: number;
  /** IPv6 subnet prefix length grouped into one `{ip}` key. Default 56. */
  ipv6Subnet?: number;
}

/** Options of `createApiRouter`. Everything but `registry` is optional. */
export interface ApiRouterOptions {
  registry: ApiRegistry;
  /**
   * `quickjs` (default), `vm2`, or your own engine (such as a shared WorkerPool). `workers`,
   * `maxWorkers`, `scriptMemoryLimitMb`, `contextBudgetMb`, `maxConcurrentPerApp`,
   * `maxWorkersPerApp` and `queueTimeoutMs` configure the built-in one: beside your own engine
   * they throw a ConfigError (set them on it).
   */
  engine?: 'quickjs' | 'vm2' | ScriptEngine;
  /**
   * Limit of one call (before + call + after + onError) in elapsed time, ms (1 to 2147483647, a
   * Node.js timer), counted from when its first stage starts running in a worker, on a monotonic
   * clock (a step of the system clock does not move it). Default 10000.
   */
  scriptTimeoutMs?: number;
  /**
   * Longest a call may wait for a worker, ms (1 to 2147483647); then 503 QUEUE_TIMEOUT with
   * Retry-After. Counted while a worker is ready (not while the workers start). Default 5000.
   */
  queueTimeoutMs?: number;
  /**
   * Memory limit of one script context, MiB, at least 8; on QuickJS at most 2016 minus
   * `contextBudgetMb` (a worker's heap holds at most 2048 MiB). Default 64.
   */
  scriptMemoryLimitMb?: number;
  /**
   * Largest script source, UTF-8 bytes or a string like `'512kb'`. A worker parses and compiles a
   * script version before its first call, on the thread the calls of other apps share (seconds
   * for a megabyte of code dense with functions), so a larger script fails its calls with
   * SCRIPT_COMPILE_ERROR (270204) naming this option. Default `'1mb'`.
   */
  scriptSizeLimit?: number | string;
  /**
   * Worker threads kept running scripts, started with the router. Default: the number of CPUs
   * less one (at least 1): the host's event loop keeps a core. Each worker runs many calls at
   * once while they wait on the host. An app's calls keep to the worker holding its context, and
   * spread over the others while calls wait to start there (an app with 4 calls or more in flight).
   */
  workers?: number;
  /** Most worker threads, counting ones started while others are held by long-running or blocked scripts; at least `workers`. Default 32, or `workers` if more. */
  maxWorkers?: number;
  /** Most calls of one app in flight at once (running or waiting on the host); more wait in line. Default 1000. */
  maxConcurrentPerApp?: number;
  /**
   * Most workers one app may hold at once with long-running script work (a stretch past 25 ms
   * without waiting); its other calls wait while other apps' calls go ahead. Default: half the
   * CPUs, at least 1.
   */
  maxWorkersPerApp?: number;
  /**
   * Memory the sandbox contexts one worker keeps between calls may hold, in MiB (8 to 1024): one
   * context per app and script version; past it, idle ones are dropped at random among the less
   * recently used half. Default 384, about 1,350 small apps (QuickJS).
   */
  contextBudgetMb?: number;
  /** Pass header names that contain `_`. Default false. */
  allowUnderscoreHeaders?: boolean;
  /** Root of the apps' local file sandboxes (`<sandboxDir>/<appId>/`). */
  sandboxDir?: string;
  /** Root of shared storage (`<storageDir>/<appId>/`): a LocalFileStorage. Not with `storage`. */
  storageDir?: string;
  /** Shared storage of your own (e.g. `new S3FileStorage({ bucket })`). Not with `storageDir`. */
  storage?: FileStorage;
  /** Limits of multipart uploads (their form fields together are also bounded by `bodyLimit`). */
  upload?: UploadOptions;
  /** Account lookups for `platform.system.getAccountByToken`. */
  accounts?: AccountService;
  /** Stores uploads for `Part.saveAttachment(tableId, fieldId)`. */
  attachments?: AttachmentService;
  /**
   * Runs automations referred to by `call` / `after` in place of the built-in interpreter (which
   * runs the steps of an AutomationDefinition itself).
   */
  automations?: AutomationRunner;
  /**
   * Largest request body other than a multipart upload (whose files the `upload` option bounds),
   * and largest total of a multipart upload's form fields; bytes or a string like `'1mb'`. Default `'1mb'`.
   */
  bodyLimit?: number | string;
  /** `platform.http.request` settings. */
  outbound?: OutboundOptions;
  /** Rate limiter settings. */
  rateLimit?: RateLimitOptions;
  /** Script console output and diagnostics. Default: nothing under NODE_ENV=test, else console. */
  logger?: Logger | false;
  /**
   * How the logger takes its arguments: `message-first` `(message, meta)` (console, winston) or
   * `meta-first` `(meta, message)` (pino, bunyan). Default: meta-first for pino and bunyan loggers.
   */
  loggerStyle?: LoggerStyle;
  /** Add `location` (`script.js:line:column`) to the error body of a script failure. Default false (it is always logged). */
  exposeErrorLocation?: boolean;
  /** CORS of every API (an API's own `cors` overrides it field by field). Default: no CORS. */
  cors?: CorsOptions;
  /** An unknown app or path calls `next()` (later routes, the host's 404) instead of answering the JSON 404. Default false. */
  fallthrough?: boolean;
  /** Serve `<mount>/preview/<appId>/<path>` from the registry's `preview` stage, for requests `authorize(req)` accepts. Default off. */
  preview?: PreviewOptions | false;
  /** Prometheus metrics (`router.metrics`): `{ registry?, prefix?, buckets?, maxApis? }`, or `false` for none. Default: on, in a registry of the router's own. */
  metrics?: MetricsOptions | false;
}

/** The Express router returned by `createApiRouter`, plus `ready()` and `close()`. */
export interface ApiRouter {
  (req: Request, res: unknown, next: (err?: unknown) => void): void;
  /** Resolves when the script workers started with the router can take work. */
  ready(): Promise<void>;
  /**
   * Stops serving: new requests get 503 SHUTTING_DOWN, requests already running finish (each
   * within its own limits), then the workers stop and the stores the router created close.
   * `force` ends the running requests at once.
   */
  close(options?: { force?: boolean }): Promise<void>;
  /** The router's Prometheus metrics (`text()`, `handler`, `registry`); undefined with `metrics: false`. */
  readonly metrics: RouterMetrics | undefined;
}
