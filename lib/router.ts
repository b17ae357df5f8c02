/**
 * createApiRouter: `<mount>/<appId>/<path>` → registry lookup → method check → rate limit →
 * body → one engine job (before, call, after, onError) → response by return type.
 */
import { createHash, randomUUID } from 'node:crypto';
import type { NextFunction, Request, Response } from 'express';
import { ApiError, ConfigError, ERRORS, isApiError } from './errors';
import { parseOptions } from './options';
import { copyApiDefinition } from './validations';
import { deepFreeze, isSettled } from './definitions/frozen';
import { shown } from './definitions/names';
import { readBody } from './context/body';
import { UploadFolders } from './context/multipart';
import { buildSnapshot } from './context/request';
import { ownSet } from './context/own-map';
import { HostServices, LocalWrites } from './host/services';
import { OutboundClient } from './outbound/client';
import { createRateLimiter, type RateLimitDecision } from './rate-limit';
import { scriptMemoryOf, WorkerPool } from './runtime/pool';
import { SOURCE_CHARS } from './runtime/messages';
import { newResponseState } from './runtime/protocol';
import type { JobResult, ScriptEngine, ScriptJob, ScriptSource } from './runtime/engine';
import { clientGone, connectionClosed, type ClientGone } from './response/client-gone';
import { sendError, sendErrorBody } from './response/error';
import { sendWritten } from './response/apply';
import { sendOutput } from './return-types';
import { readAutomations, resolveAutomations, runsAutomation } from './automation/resolve';
import type { ApiDefinition, ApiRouter, ApiRouterOptions, Awaitable, AutomationRef, ScriptRef } from './types';
import { Cors, isPreflight, validateCombinedCors } from './cors';
import { Preview, type RegistryStage } from './preview';
import { createMetrics } from './metrics';
import { Observer, type RequestTrace } from './observe';
import { loggedTarget, logOnce } from './logging';
import { passOn } from './fallthrough';

/** Thrown where a request stops waiting for a lookup because its client left (see lookup). */
const CLIENT_LEFT = Symbol('the client left');

function scriptNames(def: ApiDefinition): string[] {
  const names = new Set<string>();
  for (const ref of [def.before, def.call, def.after, def.onError]) {
    if (ref && typeof (ref as ScriptRef).script === 'string') names.add((ref as ScriptRef).script);
  }
  return [...names];
}

/** What a getScript that returned no source text (a Buffer, a number...) failed with: HOST_ERROR, logged. */
function notSource(source: unknown, appId: string, name: string): Error {
  const kind = Buffer.isBuffer(source) ? 'a Buffer' : Array.isArray(source) ? 'an array' : `a ${typeof source}`;
  return new TypeError(
    `scriptable-api: the registry's getScript returned ${kind} for script '${name}' of app '${appId}', not its source text (a string; undefined when there is none)${Buffer.isBuffer(source) ? ": read files with an encoding, readFile(file, 'utf8')" : ''}`,
  );
}

/**
 * Refuses a request target with a fragment (no part of one: RFC 9112 3.2) or a backslash in its
 * path (no URI character: RFC 3986). Express routes such a target by url.parse, which drops the
 * fragment and reads `\` as `/`, while ctx.url and getRequestURI are the target as sent: the
 * script would see another path and query than the one that was routed.
 */
function checkTarget(target: string): void {
  const q = target.indexOf('?');
  if (target.includes('#')) throw new ApiError('BAD_REQUEST', 'Malformed request target: it has a fragment (#)');
  if ((q < 0 ? target : target.slice(0, q)).includes('\\')) throw new ApiError('BAD_REQUEST', 'Malformed request target: a backslash in the path');
}

/** The path's non-empty segments, decoded. */
function pathSegments(path: string): string[] {
  try {
    return path.split('/').filter((s) => s !== '').map(decodeURIComponent);
  } catch {
    throw new ApiError('BAD_REQUEST', 'Malformed percent-encoding in the path');
  }
}

/**
 * What is wrong with an error outcome of an engine of one's own, if anything: a status that is no
 * error status (a 101 would switch the connection's protocol, a 200 or 302 pass the error body as
 * an answer), a code that is no integer (the spec's APIError code is an Integer), a message that
 * is no text.
 */
function unfitErrorOutcome(o: { message: unknown; code: unknown; status: unknown }): string | undefined {
  if (typeof o.status !== 'number' || !Number.isInteger(o.status) || o.status < 400 || o.status > 599) return `status is ${shown(o.status)}, not an error status (400 to 599)`;
  if (typeof o.code !== 'number' || !Number.isSafeInteger(o.code)) return `code is ${shown(o.code)}, not an integer`;
  if (typeof o.message !== 'string') return `message is ${shown(o.message)}, not a string`;
  return undefined;
}

function splitPath(segments: string[]): { appId: string; apiPath: string } | null {
  return segments.length < 2 ? null : { appId: segments[0], apiPath: segments.slice(1).join('/') };
}

/** Creates the Express middleware that serves every app's APIs. Mount it with `app.use(path, router)`. */
export function createApiRouter(options: ApiRouterOptions): ApiRouter {
  const opts = parseOptions(options);
  const { registry } = options;
  const logger = opts.logger;
  // (metrics first: a clash in a shared registry fails before any worker or store exists)
  const engineStats = typeof options.engine !== 'object' || typeof options.engine.stats === 'function';
  const metrics = options.metrics === false ? undefined : createMetrics(options.metrics, engineStats ? () => engine.stats!() : undefined, logger);
  const ownEngine = typeof options.engine !== 'object';
  const engine: ScriptEngine =
    typeof options.engine === 'object'
      ? options.engine
      : new WorkerPool({
          engine: options.engine ?? 'quickjs',
          size: opts.workers,
          maxWorkers: opts.maxWorkers,
          memoryLimitMb: opts.scriptMemoryLimitMb,
          maxConcurrentPerApp: opts.maxConcurrentPerApp,
          maxWorkersPerApp: opts.maxWorkersPerApp,
          contextBudgetMb: options.contextBudgetMb,
          queueTimeoutMs: opts.queueTimeoutMs,
          logger,
        });
  let closing = false;
  /** Set by close({ force: true }): requests waiting for a rate-limit slot end at once (SHUTTING_DOWN). */
  let stopped = false;
  /** The waits of the requests at the rate limiter or on a registry lookup now (close({ force: true }) ends them). */
  const waiting = new Set<ClientGone>();
  let running = 0;
  /** While a graceful close() waits: resolves when no request is running. */
  let drained: Promise<void> | undefined;
  let idle: (() => void) | undefined;
  const limiter = createRateLimiter({ ...options.rateLimit, allowUnderscoreHeaders: opts.allowUnderscoreHeaders }, logger);
  // (the memory a script's call has: the router's option for its own pool, the pool's own option for one given)
  const poolMemory = ownEngine ? undefined : scriptMemoryOf(engine);
  const scriptMemory = ownEngine ? { mb: opts.scriptMemoryLimitMb, option: 'scriptMemoryLimitMb' } : poolMemory === undefined ? undefined : { mb: poolMemory, option: "the WorkerPool's memoryLimitMb" };
  const shared = { options, outbound: new OutboundClient(options.outbound), logger, files: { sandbox: opts.sandbox, storage: opts.storage }, writes: new LocalWrites(), scriptMemory };
  /** The temporary folders of uploads not removed yet (close() removes those left). */
  const uploads = new UploadFolders();
  const hashes = new Map<string, ScriptSource & { source: string }>();
  /** The characters of the sources `hashes` holds (deleted apps' too, until it is emptied). */
  let hashedChars = 0;
  const cors = new Cors(options.cors);
  const preview = new Preview(options.preview);
  const observer = new Observer(logger, metrics, options.exposeErrorLocation === true);
  const warned = new Set<string>();

  /** The checked copies of definitions that cannot change (isSettled), by the registry's object. */
  const settled = new WeakMap<object, ApiDefinition>();

  /**
   * A definition from the registry, copied and validated each time it is served: a registry may
   * hand back an object it changed in place, and may change it again while the request is under
   * way (the request runs the copy). A definition that cannot change (deep-frozen data, as
   * MemoryRegistry and the folder registries hand out) is checked the first time only.
   */
  function checkDefinition(def: ApiDefinition): ApiDefinition {
    let message: string;
    if (typeof def !== 'object' || def === null) {
      // (e.g. a registry handing back the JSON text it stored instead of the parsed object)
      message = `scriptable-api: invalid api definition: the registry's getApi returned ${def === null ? 'null' : `a ${typeof def}`}, not an object (return undefined for an unknown path)`;
    } else {
      const known = settled.get(def);
      if (known !== undefined) return known;
      try {
        const copy = copyApiDefinition(def);
        validateCombinedCors(options.cors, copy.cors, `api '${copy.path}'`);
        if (isSettled(def)) settled.set(def, deepFreeze(copy));
        return copy;
      } catch (e) {
        if (!(e instanceof ConfigError)) throw e; // (a getter or proxy of the registry's failed: HOST_ERROR)
        message = e.message;
      }
    }
    // (logged once, with the request, by the failure line)
    throw new ApiError('INVALID_API_DEFINITION', message);
  }

  /** The app's incarnation as the registry tells it (ApiRegistry.appGeneration), '' for none. */
  function generationOf(appId: string, stage: RegistryStage): string {
    if (typeof registry.appGeneration !== 'function') return '';
    const g: unknown = registry.appGeneration(appId, stage);
    if (g === undefined || g === null) return '';
    if (typeof g !== 'number' && typeof g !== 'string') throw new ApiError('HOST_ERROR', `the registry's appGeneration answered ${typeof g === 'object' && typeof (g as { then?: unknown }).then === 'function' ? 'a promise' : `a ${typeof g}`}: it must answer a number or a string, synchronously`);
    return String(g);
  }

  /**
   * Hash per (stage, app, script name), recomputed only when the source text changes. A preview
   * source hashes with the stage in front: engines keep contexts per (app, hash), so a script the
   * preview shows unchanged still gets a context (module state) of its own, apart from live calls.
   * Emptied past 5,000 entries or SOURCE_CHARS characters of source (as much as a worker holds).
   */
  function sourceOf(appId: string, name: string, source: string, stage: RegistryStage, generation: string): ScriptSource {
    const key = `${stage}\u0000${appId}\u0000${generation}\u0000${name}`;
    const cached = hashes.get(key);
    if (cached !== undefined && cached.source === source) return cached;
    // (bytes >= characters >= a third of the bytes: most sources are measured by their length alone)
    const limit = opts.scriptSizeLimit;
    if (source.length > limit || (source.length * 3 > limit && Buffer.byteLength(source) > limit)) {
      throw new ApiError('SCRIPT_COMPILE_ERROR', `Script '${name}' is larger than scriptSizeLimit (${limit} bytes)`);
    }
    if (cached !== undefined) hashedChars -= cached.source.length; // (replaced below)
    if (hashes.size >= 5000 || hashedChars + source.length > SOURCE_CHARS) {
      hashes.clear();
      hashedChars = 0;
    }
    const sha1 = createHash('sha1');
    if (stage === 'preview') sha1.update('\u0000preview\u0000');
    // (an app created again under a deleted one's id: contexts of its own, whatever its scripts)
    if (generation !== '') sha1.update(`\u0000generation ${generation}\u0000`);
    const entry = { name, hash: sha1.update(name).update('\u0000').update(source).digest('hex'), source };
    hashedChars += source.length;
    hashes.set(key, entry);
    return entry;
  }

  /**
   * A lookup the request waits for (the registry, preview.authorize): one that never answers holds
   * its request only until the client leaves (CLIENT_LEFT) or close({ force: true }) comes
   * (SHUTTING_DOWN), not for good (nor a graceful close() with it). A value is passed on as it is;
   * any thenable is waited for so (a query builder's, such as knex's or a mongoose Query, is no Promise).
   */
  function lookup<T>(res: Response, value: Awaitable<T>): Awaitable<T> {
    if (typeof (value as { then?: unknown } | null | undefined)?.then !== 'function') return value;
    const gone = clientGone(res);
    waiting.add(gone);
    return new Promise<T>((resolve, reject) => {
      const stop = () => reject(stopped ? new ApiError('SHUTTING_DOWN') : CLIENT_LEFT);
      if (gone.signal.aborted) stop();
      else gone.signal.addEventListener('abort', stop, { once: true });
      Promise.resolve(value).then(resolve, reject);
    }).finally(() => {
      waiting.delete(gone);
      gone.done();
    });
  }

  async function limit(req: Request, res: Response, appId: string, def: ApiDefinition, stage: RegistryStage, attributes?: Record<string, unknown>): Promise<RateLimitDecision> {
    // (a client that left earlier, during the before script or the registry lookup, takes no slot)
    const gone = clientGone(res);
    waiting.add(gone);
    try {
      const decision = await limiter.acquire({ appId, apiPath: def.path, stage, rule: def.rateLimit!, req, attributes, signal: gone.signal });
      if (stopped) throw new ApiError('SHUTTING_DOWN'); // (close({ force: true }) came while it waited)
      return decision;
    } finally {
      waiting.delete(gone);
      gone.done();
    }
  }

  /** Admitted: its headers go on the response. Rejected: the 429 (or nothing, when the client left). */
  function admitted(res: Response, trace: RequestTrace, d: RateLimitDecision): boolean {
    observer.rateLimit(trace, d);
    if (d.ok) {
      for (const k in d.headers) res.setHeader(k, d.headers[k]);
      return true;
    }
    if (!d.error) {
      res.destroy(); // the client went away while waiting
      return false;
    }
    const e = ERRORS[d.error];
    observer.hostFailed(trace, new ApiError(d.error));
    sendErrorBody(res, { requestId: trace.requestId, message: e.message, code: e.code }, e.status, d.headers);
    return false;
  }

  async function serve(req: Request, res: Response, trace: RequestTrace): Promise<void> {
    if (closing) throw new ApiError('SHUTTING_DOWN');
    const { requestId } = trace;
    checkTarget(req.originalUrl ?? req.url);
    const { stage, segments } = preview.split(pathSegments(req.path));
    trace.stage = stage;
    const target = splitPath(segments);
    if (target) Object.assign(trace, target);
    if (stage === 'preview' && !isPreflight(req)) await lookup(res, preview.authorize(req));
    const def0 = target ? await lookup(res, registry.getApi(target.appId, target.apiPath, stage)) : null;
    if (!target || !def0 || def0.enabled === false) {
      throw new ApiError('API_NOT_FOUND', target ? `No API '${target.apiPath}' in app '${target.appId}'` : 'The path needs an app id and an API path');
    }
    const { appId, apiPath } = target;
    const def = checkDefinition(def0);
    trace.apiPath = def.path; // (the configured path, as a metric label: a registry may match loosely)
    trace.matched = true;
    trace.corsDone = true;
    if (isPreflight(req)) return cors.preflight(req, res, def); // (never the script's)
    cors.apply(req, res, def);
    if (def.methods && !def.methods.includes(req.method) && !(req.method === 'HEAD' && def.methods.includes('GET'))) {
      // (HEAD is served wherever GET is: RFC 9110 §10.2.1 lists every method the resource supports)
      res.setHeader('Allow', (def.methods.includes('GET') && !def.methods.includes('HEAD') ? [...def.methods, 'HEAD'] : def.methods).join(', '));
      throw new ApiError('METHOD_NOT_ALLOWED', `${req.method} is not allowed for this API (allowed: ${def.methods.join(', ')})`);
    }

    // [automation] definitions (and the scripts their steps call) travel with the job, or, when the
    // host runs them, wait for its runner in the request's host services. Read right after the
    // definition, before any wait (rate limit, body, the before script), so that a request runs one
    // version of its app, not a definition and the scripts of a later one.
    const auto = options.automations || !runsAutomation(def) ? undefined : await lookup(res, resolveAutomations(registry, appId, def, stage));
    const hosted = options.automations && runsAutomation(def) ? await lookup(res, readAutomations(registry, appId, def, stage)) : undefined;
    const scripts: Record<string, ScriptSource> = {};
    const generation = generationOf(appId, stage);
    for (const name of auto ? new Set([...scriptNames(def), ...auto.scripts]) : scriptNames(def)) {
      const source: unknown = await lookup(res, registry.getScript(appId, name, stage));
      if (typeof source === 'string') ownSet(scripts, name, sourceOf(appId, name, source, stage, generation));
      else if (source !== undefined && source !== null) throw notSource(source, appId, name);
    }

    const limited = limiter.isActive(def.rateLimit);
    const limitAfterBefore = limited && limiter.needsAttributes(def.rateLimit!);
    if (limited && !limitAfterBefore && !admitted(res, trace, await limit(req, res, appId, def, stage))) return;

    const body = await readBody(req, res, opts.bodyLimit, opts.upload, (kind) =>
      kind === 'multipart'
        ? logOnce(logger, warned, 'reparsed-multipart', 'error', 'scriptable-api: a multipart parser (multer, busboy...) ran before the router: scripts get the form fields it parsed, but ctx.getParts() has none of the uploaded files. Mount the router before it.')
        : logOnce(logger, warned, 'reparsed', 'error', 'scriptable-api: a body parser ran before the router and kept no raw body: ctx.body is the parsed value written back, not the bytes the client sent. Mount the router before body parsers, or keep the bytes with `express.json({ verify: (req, _res, buf) => { req.rawBody = buf } })`.'),
      uploads,
    );
    const job: ScriptJob = {
      requestId,
      appId,
      apiPath,
      returnType: def.returnType,
      phase: 'all',
      before: def.before,
      call: def.call as ScriptRef | AutomationRef,
      after: def.after,
      onError: def.onError,
      scripts,
      request: buildSnapshot({ req, requestId, appId, apiPath, body, allowUnderscoreHeaders: opts.allowUnderscoreHeaders }),
      state: { attributes: {}, response: newResponseState() },
      timeoutMs: opts.scriptTimeoutMs,
      automations: auto?.automations, // [automation]
    };
    if (stage === 'preview') preview.mark(job.request);
    // (connection: a call still waiting for a worker when its client goes is dropped, CLIENT_GONE)
    const services = new HostServices(shared, { appId, apiPath, requestId, parts: body.parts, stage, automations: hosted, connection: res.socket });
    const run = async (j: ScriptJob): Promise<JobResult> => {
      const t0 = performance.now();
      const r = await engine.run(j, services);
      observer.jobDone(trace, performance.now() - t0, r);
      return r;
    };
    /** The job's stages; undefined: already answered (the rate limit between them did not admit it). */
    const stages = async (): Promise<JobResult | undefined> => {
      if (!limitAfterBefore) return run(job);
      // The identifier reads attributes set by the before script: limit between before and call.
      let state = job.state;
      let beforeMs = 0; // (the before script's time counts against the call's limit too)
      if (job.before) {
        const before = await run({ ...job, phase: 'before' });
        if (before.outcome.kind !== 'continue') return before;
        state = before.state;
        beforeMs = before.runMs ?? 0;
      }
      if (!admitted(res, trace, await limit(req, res, appId, def, stage, state.attributes))) return undefined;
      return run({ ...job, phase: 'rest', state, timeoutMs: Math.max(1, opts.scriptTimeoutMs - beforeMs) });
    };
    let result: JobResult | undefined;
    try {
      result = await stages();
    } finally {
      // (before the answer is sent: the outbound bodies the scripts held, counted in the router's
      // budget, go when they end, not once a slow client has read a File)
      services.dispose();
      observer.scriptsDone(trace);
    }
    if (result) await send(res, trace, appId, req, result);
  }

  async function send(res: Response, trace: RequestTrace, appId: string, req: Request, result: JobResult): Promise<void> {
    const { outcome, state } = result;
    const { requestId } = trace;
    if (res.headersSent) return observer.answeredBefore(trace); // (the host answered while the scripts ran)
    if (connectionClosed(res)) {
      // (its connection closed while the scripts ran: no one to answer; a failure is still logged
      // and counted, but for a call that never started)
      if (outcome.kind === 'error' && outcome.code !== ERRORS.CLIENT_GONE.code) observer.scriptFailed(trace, outcome);
      return;
    }
    trace.answering = true;
    if (result.handled !== undefined) trace.handled = result.handled; // (the answer is onError's)
    switch (outcome.kind) {
      case 'error': {
        // (an engine of one's own that gives an error no error status, code or message: HOST_ERROR, logged)
        const unfit = unfitErrorOutcome(outcome);
        if (unfit !== undefined) throw new Error(`engine ${engine.name} returned an error outcome whose ${unfit}`);
        if (outcome.code === ERRORS.QUEUE_TIMEOUT.code || outcome.code === ERRORS.SHUTTING_DOWN.code) res.setHeader('Retry-After', '1');
        return sendErrorBody(res, observer.scriptFailed(trace, outcome), outcome.status);
      }
      case 'written':
      case 'continue':
        return sendWritten(res, requestId, state.response);
      case 'output':
        return sendOutput(outcome.output, {
          res,
          requestId,
          appId,
          method: req.method,
          headers: req.headers,
          state: state.response,
          files: shared.files,
        });
      default:
        // (an engine of one's own, in JavaScript, that misspells a kind: the request was left unanswered)
        throw new Error(`engine ${engine.name} returned an outcome of kind ${shown((outcome as { kind?: unknown }).kind)}, not continue, written, output or error`);
    }
  }

  const router = ((req: Request, res: Response, next: NextFunction) => {
    if (res.headersSent) {
      // (the host's middleware began its own answer and still called next(): it stands, untouched)
      logger?.warn(`scriptable-api: ${req.method} ${loggedTarget(String(req.originalUrl ?? req.url)).slice(0, 200)} reached the router with a response already under way (the host's middleware answered it): the router left it alone`);
      return;
    }
    const requestId = randomUUID();
    const priorId = res.getHeader('X-Request-Id'); // (the host's own, put back when the request falls through)
    res.setHeader('X-Request-Id', requestId);
    const trace = observer.begin(requestId, performance.now());
    running++;
    serve(req, res, trace).catch((err: unknown) => {
      if (err === CLIENT_LEFT) return void res.destroy(); // (it left while a lookup waited: no one to answer)
      if (options.fallthrough && isApiError(err) && err.errorName === 'API_NOT_FOUND' && !res.headersSent) return passOn(res, trace, next, priorId);
      if (res.headersSent && !trace.answering) return observer.answeredBefore(trace);
      observer.hostFailed(trace, err);
      if (res.headersSent) {
        res.destroy();
        return;
      }
      if (!trace.corsDone) cors.apply(req, res); // (an unknown path, or a failure before the API was known: the router's CORS)
      if (isApiError(err) && err.errorName === 'SHUTTING_DOWN') res.setHeader('Retry-After', '1');
      sendError(res, requestId, err);
    }).finally(() => {
      observer.end(trace, res);
      if (--running === 0) idle?.();
    });
  }) as ApiRouter;

  router.ready = async () => {
    await engine.ready?.();
  };
  router.close = async (closeOptions?: { force?: boolean }) => {
    closing = true;
    if (closeOptions?.force) {
      stopped = true;
      for (const wait of waiting) wait.abort();
      if (ownEngine) await engine.close(closeOptions);
    } else {
      // requests already running finish first (the engine bounds each by its limits; those that
      // have not reached it yet, still reading their body or their definition, reach it open)
      if (running > 0) await (drained ??= new Promise<void>((resolve) => (idle = resolve)));
      if (ownEngine) await engine.close();
    }
    // writes into the apps' folders that outlived their calls (a timed-out or forced call's
    // saveBodyAsFile, a part.save still copying) end and remove their temporary files first
    await shared.writes.settled();
    // uploads' temporary folders whose responses have not closed yet (or, forced, whose uploads are
    // still arriving: they end with SHUTTING_DOWN) go now: a process exiting after close() left them
    await uploads.removeAll(new ApiError('SHUTTING_DOWN'));
    await Promise.all([limiter.close(), shared.outbound.close()]);
    metrics?.close();
  };
  Object.defineProperty(router, 'metrics', { value: metrics, enumerable: true });
  return router;
}
