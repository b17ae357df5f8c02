/**
 * createApiRouter: `<mount>/<appId>/<path>` → registry lookup → method check → rate limit →
 * body → one engine job (before, call, after, onError) → response by return type.
 */
import { createHash, randomUUID } from 'node:crypto';
import type { NextFunction, Request, Response } from 'express';
import { ApiError, ConfigError, ERRORS } from './errors';
import { parseOptions } from './options';
import { validateApiDefinition } from './validations';
import { readBody } from './context/body';
import { buildSnapshot } from './context/request';
import { ownSet } from './context/own-map';
import { HostServices } from './host/services';
import { OutboundClient } from './outbound/client';
import { createRateLimiter, type RateLimitDecision } from './rate-limit';
import { WorkerPool } from './runtime/pool';
import { newResponseState } from './runtime/protocol';
import type { JobResult, ScriptEngine, ScriptJob, ScriptSource } from './runtime/engine';
import { sendError, sendErrorBody } from './response/error';
import { sendWritten } from './response/apply';
import { sendOutput } from './return-types';
import type { ApiDefinition, ApiRouter, ApiRouterOptions, AutomationRef, ScriptRef } from './types';

function scriptNames(def: ApiDefinition): string[] {
  const names = new Set<string>();
  for (const ref of [def.before, def.call, def.after, def.onError]) {
    if (ref && typeof (ref as ScriptRef).script === 'string') names.add((ref as ScriptRef).script);
  }
  return [...names];
}

function splitPath(path: string): { appId: string; apiPath: string } | null {
  const segments = path.split('/').filter((s) => s !== '');
  if (segments.length < 2) return null;
  try {
    const decoded = segments.map(decodeURIComponent);
    return { appId: decoded[0], apiPath: decoded.slice(1).join('/') };
  } catch {
    throw new ApiError('BAD_REQUEST', 'Malformed percent-encoding in the path');
  }
}

/** Creates the Express middleware that serves every app's APIs. Mount it with `app.use(path, router)`. */
export function createApiRouter(options: ApiRouterOptions): ApiRouter {
  const opts = parseOptions(options);
  const { registry } = options;
  const logger = opts.logger;
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
          logger,
        });
  const limiter = createRateLimiter(options.rateLimit, logger);
  const shared = { options, outbound: new OutboundClient(options.outbound), logger, files: { sandbox: opts.sandbox, storage: opts.storage } };
  const checked = new WeakMap<object, ApiDefinition | ConfigError>();
  const hashes = new Map<string, ScriptSource & { source: string }>();

  /** Definitions from the registry are validated once per object. */
  function checkDefinition(def: ApiDefinition): ApiDefinition {
    if (typeof def !== 'object' || def === null) {
      // (e.g. a registry handing back the JSON text it stored instead of the parsed object)
      const message = `scriptable-api: invalid api definition: the registry's getApi returned ${def === null ? 'null' : `a ${typeof def}`}, not an object (return undefined for an unknown path)`;
      logger?.error(message);
      throw new ApiError('INVALID_API_DEFINITION', message);
    }
    let v = checked.get(def);
    if (v === undefined) {
      try {
        v = validateApiDefinition(def, `api '${def.path}'`);
      } catch (e) {
        v = e as ConfigError;
      }
      checked.set(def, v);
    }
    if (v instanceof ConfigError) {
      logger?.error(v.message);
      throw new ApiError('INVALID_API_DEFINITION', v.message);
    }
    return v;
  }

  /** Hash per (app, script name), recomputed only when the source text changes. */
  function sourceOf(appId: string, name: string, source: string): ScriptSource {
    const key = `${appId}\u0000${name}`;
    const cached = hashes.get(key);
    if (cached !== undefined && cached.source === source) return cached;
    if (hashes.size >= 5000) hashes.clear();
    const entry = { name, hash: createHash('sha1').update(name).update('\u0000').update(source).digest('hex'), source };
    hashes.set(key, entry);
    return entry;
  }

  async function limit(req: Request, res: Response, appId: string, def: ApiDefinition, attributes?: Record<string, unknown>): Promise<RateLimitDecision> {
    const ac = new AbortController();
    const onClose = () => {
      if (!res.writableFinished) ac.abort();
    };
    res.once('close', onClose);
    try {
      return await limiter.acquire({ appId, apiPath: def.path, rule: def.rateLimit!, req, attributes, signal: ac.signal });
    } finally {
      res.removeListener('close', onClose);
    }
  }

  function rejectLimited(res: Response, requestId: string, d: RateLimitDecision): void {
    if (!d.error) {
      res.destroy(); // the client went away while waiting
      return;
    }
    const e = ERRORS[d.error];
    sendErrorBody(res, { requestId, message: e.message, code: e.code }, e.status, d.headers);
  }

  async function serve(req: Request, res: Response, requestId: string): Promise<void> {
    const target = splitPath(req.path);
    const def0 = target ? await registry.getApi(target.appId, target.apiPath) : null;
    if (!target || !def0 || def0.enabled === false) {
      throw new ApiError('API_NOT_FOUND', target ? `No API '${target.apiPath}' in app '${target.appId}'` : 'The path needs an app id and an API path');
    }
    const { appId, apiPath } = target;
    const def = checkDefinition(def0);
    if (def.methods && !def.methods.includes(req.method) && !(req.method === 'HEAD' && def.methods.includes('GET'))) {
      res.setHeader('Allow', def.methods.join(', '));
      throw new ApiError('METHOD_NOT_ALLOWED', `${req.method} is not allowed for this API (allowed: ${def.methods.join(', ')})`);
    }

    const limited = limiter.isActive(def.rateLimit);
    const limitAfterBefore = limited && limiter.needsAttributes(def.rateLimit!);
    if (limited && !limitAfterBefore) {
      const d = await limit(req, res, appId, def);
      if (!d.ok) return rejectLimited(res, requestId, d);
      for (const k in d.headers) res.setHeader(k, d.headers[k]);
    }

    const body = await readBody(req, res, opts.bodyLimit, opts.upload);
    const scripts: Record<string, ScriptSource> = {};
    for (const name of scriptNames(def)) {
      const source = await registry.getScript(appId, name);
      if (typeof source === 'string') ownSet(scripts, name, sourceOf(appId, name, source));
    }
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
      deadline: Date.now() + opts.scriptTimeoutMs,
    };
    const services = new HostServices(shared, { appId, apiPath, requestId, parts: body.parts });
    try {
      let result: JobResult;
      if (limitAfterBefore) {
        // The identifier reads attributes set by the before script: limit between before and call.
        let state = job.state;
        if (job.before) {
          result = await engine.run({ ...job, phase: 'before' }, services);
          if (result.outcome.kind !== 'continue') return await send(res, requestId, appId, req, result);
          state = result.state;
        }
        const d = await limit(req, res, appId, def, state.attributes);
        if (!d.ok) return rejectLimited(res, requestId, d);
        for (const k in d.headers) res.setHeader(k, d.headers[k]);
        result = await engine.run({ ...job, phase: 'rest', state }, services);
      } else {
        result = await engine.run(job, services);
      }
      await send(res, requestId, appId, req, result);
    } finally {
      services.dispose();
    }
  }

  async function send(res: Response, requestId: string, appId: string, req: Request, result: JobResult): Promise<void> {
    const { outcome, state } = result;
    switch (outcome.kind) {
      case 'error':
        return sendErrorBody(res, { requestId, message: outcome.message, code: outcome.code }, outcome.status);
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
    }
  }

  const router = ((req: Request, res: Response, next: NextFunction) => {
    const requestId = randomUUID();
    res.setHeader('X-Request-Id', requestId);
    serve(req, res, requestId).catch((err: unknown) => {
      if (!(err instanceof ApiError)) logger?.error(`scriptable-api: request ${requestId} failed: ${(err as Error)?.stack ?? String(err)}`);
      if (res.headersSent) {
        res.destroy();
        return;
      }
      sendError(res, requestId, err);
    });
    void next;
  }) as ApiRouter;

  router.close = async () => {
    await Promise.all([ownEngine ? engine.close() : undefined, limiter.close()]);
  };
  return router;
}
