/**
 * Validation of router options and API definitions. Every failure is a ConfigError naming the
 * field, thrown at startup (options) or registration (MemoryRegistry.putApi); definitions from a
 * custom registry are checked each time they are served and answered with INVALID_API_DEFINITION.
 */
import { MAX_TIMER_MS } from './timers';
import { badHeaderPlaceholder, unknownPlaceholder } from './rate-limit/identifier';
import { ConfigError } from './errors';
import { maxQuickJsMemoryLimitMb, QUICKJS_HEAP_NOTE } from './runtime/messages';
import { MAX_WORKERS, POOL_DEFAULTS } from './runtime/pool-options';
import { validateCors } from './cors';
import { validateProductionOptions } from './production-options';
import { checkSchema, dotted } from './definitions/schema';
import { nearestName, shown } from './definitions/names';
import { validateUploadOptions } from './context/upload-options';
import { isFileStorage } from './files/storage';
import { validateFileRootKinds, validateFileRoots } from './files/file-roots';
import { hostAllowed } from './outbound/address-policy';
import { isIP } from 'node:net';
import { METHODS } from 'node:http';

export { nearestName, shown };
import type { ApiDefinition, ApiRouterOptions, OutboundOptions, RateLimitOptions } from './types';

function isObject(v: unknown): v is Record<string, unknown> {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

/**
 * Validates and normalizes (upper-cases `methods`) an API definition. Throws ConfigError naming
 * the field. The rules are schemas/api-definition.json's (unknown fields are refused), plus what a
 * schema cannot say: the rate-limit identifier's placeholders.
 */
export function validateApiDefinition(def: unknown, where = 'api'): ApiDefinition {
  const problem = checkSchema('api-definition', def);
  if (problem) {
    if (problem.path.length === 0) throw new ConfigError(where, problem.message);
    throw new ConfigError(where + dotted(problem.path), problem.message);
  }
  const d = def as Record<string, unknown> & { rateLimit?: { identifier?: string }; methods?: string[] };
  const unknown = d.rateLimit?.identifier === undefined ? undefined : unknownPlaceholder(d.rateLimit.identifier);
  if (unknown !== undefined) {
    throw new ConfigError(
      `${where}.rateLimit.identifier`,
      `${JSON.stringify(unknown)} is not a placeholder: use {ip}, {header.NAME}, {query.NAME}, {cookie.NAME} or {attr.NAME} (braces are not allowed in literal text)`,
    );
  }
  const header = d.rateLimit?.identifier === undefined ? undefined : badHeaderPlaceholder(d.rateLimit.identifier);
  if (header !== undefined) {
    throw new ConfigError(
      `${where}.rateLimit.identifier`,
      `${JSON.stringify(header.placeholder)}: ${JSON.stringify(header.name)} is not a header name (letters, digits and !#$%&'*+-.^_\`|~ only), so the key would always be the IP`,
    );
  }
  if (d.cors !== undefined) validateCors(d.cors, `${where}.cors`);
  const methods = d.methods?.map((m) => m.toUpperCase());
  methods?.forEach((m, i) => {
    // (a method this Node.js never parses never arrives: the API would answer every request 405)
    if (!SERVED_METHODS.has(m)) {
      const near = nearestName(m, METHODS);
      throw new ConfigError(`${where}.methods[${i}]`, `${JSON.stringify(d.methods![i])} is not an HTTP method Node.js serves${near ? ` (did you mean '${near}'?)` : ''}`);
    }
  });
  return methods ? ({ ...d, methods } as unknown as ApiDefinition) : (d as unknown as ApiDefinition);
}

/**
 * An API definition as the router serves it from a registry: a copy of the object's own fields
 * (structuredClone: read once, deep), validated. The request runs the copy, so a registry that
 * changes its object in place while the request waits (for a script lookup, a rate-limit slot, its
 * body), or whose getters answer differently at each read, cannot change what runs after the check.
 * Throws ConfigError naming the field; what a getter or proxy of the registry's throws is passed on
 * (the registry failed: the router answers HOST_ERROR, without its message).
 */
export function copyApiDefinition(def: object): ApiDefinition {
  let copy: unknown;
  try {
    copy = structuredClone(def);
  } catch (e) {
    if (!(e instanceof DOMException && e.name === 'DataCloneError')) throw e;
    validateApiDefinition(def, apiName(def)); // (names the field holding a function or a symbol)
    throw new ConfigError(apiName(def), `must be plain data (JSON values): ${e.message}`);
  }
  return validateApiDefinition(copy, apiName(copy));
}

/** `api 'orders/list'` as messages name a definition, or `api` when its path is no string (or it is no object). */
export function apiName(def: unknown): string {
  const path = typeof def === 'object' && def !== null ? (def as { path?: unknown }).path : undefined;
  return typeof path === 'string' ? `api '${path}'` : 'api';
}

/** The methods Node.js's HTTP parser accepts (http.METHODS). */
const SERVED_METHODS = new Set(METHODS);

const SIZE = /^(\d+(?:\.\d+)?)\s*(b|kb|mb|gb)?$/i;
const UNITS: Record<string, number> = { b: 1, kb: 1024, mb: 1024 ** 2, gb: 1024 ** 3 };

/** `1048576`, `'100kb'`, `'1mb'` → bytes. */
export function parseSize(v: unknown, field: string): number {
  if (typeof v === 'number' && Number.isFinite(v) && v >= 0) return Math.floor(v);
  const m = typeof v === 'string' ? SIZE.exec(v.trim()) : null;
  if (!m) throw new ConfigError(field, `must be a byte count or a size like '1mb', got ${shown(v)}`);
  return Math.floor(Number(m[1]) * UNITS[(m[2] ?? 'b').toLowerCase()]);
}

function positiveInt(v: unknown, field: string, min = 1, max = Number.MAX_SAFE_INTEGER): void {
  if (v !== undefined && (typeof v !== 'number' || !Number.isInteger(v) || v < min)) {
    throw new ConfigError(field, `must be an integer >= ${min}, got ${shown(v)}`);
  }
  if (typeof v === 'number' && v > max) throw new ConfigError(field, `must be at most ${max}, got ${shown(v)}`);
}

/** Timeouts become Node.js timers, which hold at most 2^31 - 1 ms (about 24.8 days). */
function timeoutMs(v: unknown, field: string): void {
  positiveInt(v, field, 1, MAX_TIMER_MS);
}

/** The keys of ApiRouterOptions, OutboundOptions and RateLimitOptions (lib/types.ts). */
export const ROUTER_KEYS = ['registry', 'engine', 'scriptTimeoutMs', 'scriptMemoryLimitMb', 'scriptSizeLimit', 'workers', 'maxWorkers', 'maxConcurrentPerApp', 'maxWorkersPerApp', 'contextBudgetMb', 'queueTimeoutMs', 'allowUnderscoreHeaders', 'sandboxDir', 'storageDir', 'storage', 'upload', 'accounts', 'attachments', 'automations', 'bodyLimit', 'outbound', 'rateLimit', 'logger',
  'loggerStyle', 'exposeErrorLocation', 'cors', 'fallthrough', 'preview', 'metrics'] as const;
const OUTBOUND_KEYS = ['allowPrivateNetworks', 'allowHosts', 'timeoutMs', 'maxBodyBytes', 'maxBufferedBytes', 'maxRedirects', 'maxRequestsPerApp'] as const;
const RATE_LIMIT_KEYS = ['store', 'onStoreError', 'maxWaiting', 'ipv6Subnet'] as const;
// (the build fails when an option is added to the types and not to these lists, or the other way round)
/** True when two types are the same (a keys list checked against its options type at build time). */
export type Same<A, B> = [A] extends [B] ? ([B] extends [A] ? true : false) : false;
const keysMatch: [Same<keyof ApiRouterOptions, (typeof ROUTER_KEYS)[number]>, Same<keyof OutboundOptions, (typeof OUTBOUND_KEYS)[number]>, Same<keyof RateLimitOptions, (typeof RATE_LIMIT_KEYS)[number]>] = [true, true, true];
void keysMatch;

/** An unknown key is a typo until shown otherwise (`scriptTimeoutMS` would silently keep the default). */
export function onlyKnownKeys(o: Record<string, unknown>, known: readonly string[], prefix: string): void {
  for (const k of Object.keys(o)) {
    if (known.includes(k)) continue;
    const near = nearestName(k, known);
    throw new ConfigError(prefix + k, `is not an option${near ? ` (did you mean '${prefix}${near}'?)` : `; the options are ${known.join(', ')}`}`);
  }
}


/** An `allowHosts` entry that can match a host: a name, an IP literal, or `*.` and a name. */
function validHostPattern(entry: string): boolean {
  const probe = entry.trim().startsWith('*.') ? `a.${entry.trim().slice(2)}` : entry.trim();
  const ipv6 = isIP(probe.replace(/^\[|\]$/g, '')) === 6;
  return (ipv6 || /^[^\s/:?#@*]+$/.test(probe)) && hostAllowed(probe, [entry]);
}

/** The router options that configure the WorkerPool it makes, and the pool's own names for them. */
const BUILT_IN_ENGINE_KEYS = {
  workers: 'size',
  maxWorkers: 'maxWorkers',
  scriptMemoryLimitMb: 'memoryLimitMb',
  contextBudgetMb: 'contextBudgetMb',
  maxConcurrentPerApp: 'maxConcurrentPerApp',
  maxWorkersPerApp: 'maxWorkersPerApp',
  queueTimeoutMs: 'queueTimeoutMs',
} as const;

/** Checks `createApiRouter` options. */
export function validateOptions(o: unknown): asserts o is ApiRouterOptions {
  if (!isObject(o)) throw new ConfigError('options', 'createApiRouter needs an options object with a registry');
  onlyKnownKeys(o, ROUTER_KEYS, '');
  const reg = o.registry as Record<string, unknown> | undefined;
  if (!isObject(reg) && typeof reg !== 'function') throw new ConfigError('registry', 'is required: an object with getApi(appId, path) and getScript(appId, name)');
  if (typeof reg!.getApi !== 'function') throw new ConfigError('registry.getApi', 'must be a function');
  if (typeof reg!.getScript !== 'function') throw new ConfigError('registry.getScript', 'must be a function');
  if (reg!.getAutomation !== undefined && typeof reg!.getAutomation !== 'function') throw new ConfigError('registry.getAutomation', 'must be a function');
  const engine = o.engine;
  if (engine !== undefined && engine !== 'quickjs' && engine !== 'vm2') {
    if (!isObject(engine) || typeof engine.run !== 'function' || typeof engine.close !== 'function') {
      throw new ConfigError('engine', "must be 'quickjs', 'vm2' or a ScriptEngine with run() and close()");
    }
    for (const m of ['ready', 'stats'] as const) {
      if (engine[m] !== undefined && typeof engine[m] !== 'function') throw new ConfigError(`engine.${m}`, `must be a function when given, got ${shown(engine[m], 40)}`);
    }
  }
  if (isObject(engine)) {
    // (they configure the WorkerPool the router makes: with an engine of one's own they did nothing)
    for (const [k, poolKey] of Object.entries(BUILT_IN_ENGINE_KEYS)) {
      if (o[k] !== undefined) {
        throw new ConfigError(k, `configures the built-in engine ('quickjs' or 'vm2'), not an engine of your own: set it on that engine (a WorkerPool: new WorkerPool({ ${poolKey} }))`);
      }
    }
  }
  timeoutMs(o.scriptTimeoutMs, 'scriptTimeoutMs');
  positiveInt(o.scriptMemoryLimitMb, 'scriptMemoryLimitMb', 8);
  positiveInt(o.workers, 'workers', 1, MAX_WORKERS);
  positiveInt(o.maxWorkers, 'maxWorkers', 1, MAX_WORKERS);
  positiveInt(o.maxConcurrentPerApp, 'maxConcurrentPerApp');
  positiveInt(o.maxWorkersPerApp, 'maxWorkersPerApp');
  positiveInt(o.contextBudgetMb, 'contextBudgetMb', 8, 1024);
  timeoutMs(o.queueTimeoutMs, 'queueTimeoutMs');
  if (engine === undefined || engine === 'quickjs') {
    const budget = typeof o.contextBudgetMb === 'number' ? o.contextBudgetMb : POOL_DEFAULTS.contextBudgetMb;
    if (typeof o.scriptMemoryLimitMb === 'number' && o.scriptMemoryLimitMb > maxQuickJsMemoryLimitMb(budget)) {
      throw new ConfigError('scriptMemoryLimitMb', `must be at most ${maxQuickJsMemoryLimitMb(budget)} with contextBudgetMb ${budget}, got ${o.scriptMemoryLimitMb} (${QUICKJS_HEAP_NOTE})`);
    }
  }
  if (typeof o.workers === 'number' && typeof o.maxWorkers === 'number' && o.maxWorkers < o.workers) {
    throw new ConfigError('maxWorkers', `must be >= workers (${o.workers})`);
  }
  if (o.allowUnderscoreHeaders !== undefined && typeof o.allowUnderscoreHeaders !== 'boolean') throw new ConfigError('allowUnderscoreHeaders', 'must be a boolean');
  for (const k of ['sandboxDir', 'storageDir'] as const) {
    if (o[k] !== undefined && (typeof o[k] !== 'string' || o[k] === '')) throw new ConfigError(k, 'must be a directory path');
  }
  if (o.accounts !== undefined && (!isObject(o.accounts) || typeof o.accounts.getAccountByToken !== 'function')) {
    throw new ConfigError('accounts.getAccountByToken', 'must be a function (token) => account | null');
  }
  if (o.automations !== undefined && (!isObject(o.automations) || typeof o.automations.run !== 'function')) {
    throw new ConfigError('automations.run', 'must be a function (invocation) => result');
  }
  if (o.attachments !== undefined && (!isObject(o.attachments) || typeof o.attachments.save !== 'function')) {
    throw new ConfigError('attachments.save', 'must be a function');
  }
  if (o.bodyLimit !== undefined) parseSize(o.bodyLimit, 'bodyLimit');
  if (o.scriptSizeLimit !== undefined) parseSize(o.scriptSizeLimit, 'scriptSizeLimit');
  if (o.storage !== undefined && !isFileStorage(o.storage)) throw new ConfigError('storage', 'must be a FileStorage with put, get, stat and delete methods');
  if (o.storage !== undefined && o.storageDir !== undefined) throw new ConfigError('storage', 'give either storage or storageDir, not both (storageDir is new LocalFileStorage({ root: storageDir }))');
  validateUploadOptions(o.upload);
  validateFileRoots(o);
  validateFileRootKinds(o);
  if (o.outbound !== undefined) {
    if (!isObject(o.outbound)) throw new ConfigError('outbound', 'must be an object');
    const ob = o.outbound;
    onlyKnownKeys(ob, OUTBOUND_KEYS, 'outbound.');
    if (ob.allowPrivateNetworks !== undefined && typeof ob.allowPrivateNetworks !== 'boolean') throw new ConfigError('outbound.allowPrivateNetworks', 'must be a boolean');
    if (ob.allowHosts !== undefined && (!Array.isArray(ob.allowHosts) || ob.allowHosts.some((h) => typeof h !== 'string' || h === ''))) {
      throw new ConfigError('outbound.allowHosts', 'must be an array of host names');
    }
    (ob.allowHosts as string[] | undefined)?.forEach((entry, i) => {
      if (!validHostPattern(entry)) {
        throw new ConfigError(`outbound.allowHosts[${i}]`, `${JSON.stringify(entry)} is not a host name, an IP address or '*.domain' (no scheme, port or path)`);
      }
    });
    timeoutMs(ob.timeoutMs, 'outbound.timeoutMs');
    positiveInt(ob.maxBodyBytes, 'outbound.maxBodyBytes');
    positiveInt(ob.maxBufferedBytes, 'outbound.maxBufferedBytes');
    const maxBody = (ob.maxBodyBytes as number | undefined) ?? 10 * 1024 * 1024;
    if (ob.maxBufferedBytes !== undefined && (ob.maxBufferedBytes as number) < maxBody) {
      throw new ConfigError('outbound.maxBufferedBytes', `must be at least outbound.maxBodyBytes (${maxBody}), got ${shown(ob.maxBufferedBytes)}`);
    }
    positiveInt(ob.maxRedirects, 'outbound.maxRedirects', 0);
    positiveInt(ob.maxRequestsPerApp, 'outbound.maxRequestsPerApp');
  }
  if (o.rateLimit !== undefined) {
    if (!isObject(o.rateLimit)) throw new ConfigError('rateLimit', 'must be an object');
    const rl = o.rateLimit;
    onlyKnownKeys(rl, RATE_LIMIT_KEYS, 'rateLimit.');
    if (rl.onStoreError !== undefined && rl.onStoreError !== 'memory' && rl.onStoreError !== 'open') throw new ConfigError('rateLimit.onStoreError', "must be 'memory' or 'open'");
    if (rl.store !== undefined && (!isObject(rl.store) || typeof rl.store.reserve !== 'function')) throw new ConfigError('rateLimit.store', 'must implement reserve(key, intervalMs, maxWaitMs)');
    positiveInt(rl.maxWaiting, 'rateLimit.maxWaiting', 0);
    if (rl.ipv6Subnet !== undefined && (typeof rl.ipv6Subnet !== 'number' || !Number.isInteger(rl.ipv6Subnet) || rl.ipv6Subnet < 1 || rl.ipv6Subnet > 128)) {
      throw new ConfigError('rateLimit.ipv6Subnet', 'must be an integer from 1 to 128');
    }
  }
  validateProductionOptions(o);
  if (o.logger !== undefined && o.logger !== false) {
    const l = o.logger as Record<string, unknown>;
    if (!isObject(l) || ['info', 'warn', 'error'].some((m) => typeof l[m] !== 'function')) throw new ConfigError('logger', 'must have info, warn and error methods (or be false)');
    if (l.debug !== undefined && typeof l.debug !== 'function') throw new ConfigError('logger.debug', 'must be a function when given (without it, debug lines go to info)');
  }
}
