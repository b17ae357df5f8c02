/**
 * CORS per API and per router, through the `cors` package.
 *
 * - A preflight (`OPTIONS` with `Origin` and `Access-Control-Request-Method`) is answered by the
 *   router with 204 and never reaches a script, also for an API that allows every method. An API
 *   without CORS still gets its 204, without `Access-Control-Allow-Origin`: the browser refuses.
 * - Every actual response of an API with CORS carries its `Access-Control-*` headers, errors
 *   (404, 405, 429, 500) included; an unknown path gets the router's CORS.
 * - The router option `cors` is the default of every API; an API's `cors` overrides it field by
 *   field, and `cors: false` turns it off for that API.
 */
import corsMiddleware, { type CorsOptions as CorsPackageOptions } from 'cors';
import type { IncomingMessage, ServerResponse } from 'node:http';
import { ConfigError } from './errors';

/** CORS settings of the router (`cors` option) or of one API (`ApiDefinition.cors`). JSON only. */
export interface CorsOptions {
  /**
   * Origins allowed: `'*'` (any, the default), or a list of origins, exact (`https://app.example.com`)
   * or with a wildcard subdomain (`https://*.example.com`), matched as browsers send them (no
   * default port, lowercase, punycode). With `credentials`, `'*'` echoes the
   * caller's origin (browsers refuse `*` with credentials).
   */
  origins?: '*' | string[];
  /** Methods a preflight allows. Default: the API's `methods`, else GET, HEAD, PUT, PATCH, POST, DELETE. */
  methods?: string[];
  /** Request headers a preflight allows. Default: those the preflight asks for. */
  headers?: string[];
  /** Response headers scripts in the page may read. Default: X-Request-Id, Retry-After, RateLimit, RateLimit-Policy. */
  exposeHeaders?: string[];
  /** Send `Access-Control-Allow-Credentials: true` (cookies, Authorization). Default false. */
  credentials?: boolean;
  /** How long (seconds) a browser may cache a preflight's answer. Default: not sent (the browser's own, 5 s in Chrome). */
  maxAge?: number;
}

const KEYS = ['origins', 'methods', 'headers', 'exposeHeaders', 'credentials', 'maxAge'] as const;
const DEFAULT_EXPOSE = ['X-Request-Id', 'Retry-After', 'RateLimit', 'RateLimit-Policy'];
const TOKEN = /^[A-Za-z0-9!#$%&'*+.^_`|~-]+$/;
// (no path, query, fragment or user name: a browser's Origin has none)
const ORIGIN = /^(https?|[a-z][a-z0-9+.-]*):\/\/(\*\.)?[^/\s*?#@]+$/i;

/**
 * A configured origin as a browser sends it in `Origin`, which is compared with it as a string:
 * lowercase, without the scheme's default port, an international name in punycode
 * (`HTTPS://Bücher.example:443` is `https://xn--bcher-kva.example`); other schemes than http(s),
 * such as `capacitor://localhost`, lowercase. Null when it is no origin.
 */
function canonicalOrigin(o: string): string | null {
  if (!ORIGIN.test(o)) return null;
  if (!/^https?:/i.test(o)) return o.toLowerCase();
  try {
    return new URL(o).origin; // (keeps a leading `*.` as it is)
  } catch {
    return null; // (a port past 65535, a host no URL has)
  }
}

function isObject(v: unknown): v is Record<string, unknown> {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

function tokenList(v: unknown, field: string, what: string): void {
  if (!Array.isArray(v) || v.some((x) => typeof x !== 'string' || !TOKEN.test(x))) {
    throw new ConfigError(field, `must be an array of ${what}, got ${JSON.stringify(v)}`);
  }
}

/**
 * Checks a `cors` value (router option or API field): `false` (API only) or an object of
 * CorsOptions. Throws a ConfigError naming the field.
 */
export function validateCors(v: unknown, field = 'cors', allowFalse = true): CorsOptions | false {
  if (v === false && allowFalse) return false;
  if (!isObject(v)) throw new ConfigError(field, `must be an object { origins, methods, headers, exposeHeaders, credentials, maxAge }${allowFalse ? ' or false' : ''}`);
  for (const k of Object.keys(v)) {
    if (!(KEYS as readonly string[]).includes(k)) throw new ConfigError(`${field}.${k}`, `is not a CORS setting; the settings are ${KEYS.join(', ')}`);
  }
  if (v.origins !== undefined && v.origins !== '*') {
    if (!Array.isArray(v.origins) || v.origins.some((o) => typeof o !== 'string' || (o !== '*' && canonicalOrigin(o) === null))) {
      throw new ConfigError(`${field}.origins`, `must be '*' or an array of origins like 'https://app.example.com' or 'https://*.example.com' (no path), got ${JSON.stringify(v.origins)}`);
    }
  }
  if (v.methods !== undefined) tokenList(v.methods, `${field}.methods`, 'HTTP methods');
  if (v.headers !== undefined) tokenList(v.headers, `${field}.headers`, 'header names');
  if (v.exposeHeaders !== undefined) tokenList(v.exposeHeaders, `${field}.exposeHeaders`, 'header names');
  if (v.credentials !== undefined && typeof v.credentials !== 'boolean') throw new ConfigError(`${field}.credentials`, 'must be a boolean');
  checkCredentials(v as CorsOptions, field, '');
  if (v.maxAge !== undefined && (typeof v.maxAge !== 'number' || !Number.isInteger(v.maxAge) || v.maxAge < 0)) {
    throw new ConfigError(`${field}.maxAge`, `must be a whole number of seconds >= 0, got ${JSON.stringify(v.maxAge)}`);
  }
  return v as CorsOptions;
}

/**
 * With credentials, a browser reads `*` in Access-Control-Allow-Methods, -Allow-Headers and
 * -Expose-Headers as a name, not as "any" (Fetch standard): every request would fail. `from` says
 * where `credentials` came from when it is not `c`'s own field.
 */
function checkCredentials(c: CorsOptions, field: string, from: string): void {
  if (c.credentials !== true) return;
  for (const k of ['methods', 'headers', 'exposeHeaders'] as const) {
    if (c[k]?.includes('*')) throw new ConfigError(`${field}.${k}`, `cannot hold '*' with credentials${from}: browsers take it for a name, not for any (list the names${k === 'headers' ? ', or leave headers out to allow those the preflight asks for' : ''})`);
  }
}

/**
 * Checks an API's `cors` together with the router's: settings that are right on their own can
 * make a combination no browser accepts (the router's `credentials` with the API's `methods:
 * ['*']`, or the reverse). Throws a ConfigError naming the API's field; `where` names the API.
 */
export function validateCombinedCors(router: CorsOptions | undefined, api: CorsOptions | false | undefined, where: string): void {
  if (!router || !api) return;
  const c = { ...router, ...api };
  if (c.credentials !== true) return;
  const from = api.credentials === true ? '' : " (the router's cors.credentials)";
  for (const k of ['methods', 'headers', 'exposeHeaders'] as const) {
    // (name the level the '*' comes from)
    const owner = api[k] !== undefined ? `${where}.cors` : 'cors';
    if (c[k]?.includes('*')) checkCredentials({ credentials: true, [k]: c[k] }, owner, owner === 'cors' ? ` (${where}.cors.credentials)` : from);
  }
}

/** A preflight: the browser asks before sending the actual request. */
export function isPreflight(req: IncomingMessage): boolean {
  return req.method === 'OPTIONS' && req.headers.origin !== undefined && req.headers['access-control-request-method'] !== undefined;
}

function originOption(c: CorsOptions): CorsPackageOptions['origin'] {
  const list = c.origins ?? '*';
  if (list === '*' || list.includes('*')) return c.credentials ? true : '*';
  return list.map((configured) => {
    const o = canonicalOrigin(configured) ?? configured.toLowerCase(); // (validated: never null)
    if (!o.includes('://*.')) return o;
    const [scheme, host] = o.split('://*.');
    return new RegExp(`^${scheme.replace(/[.+]/g, '\\$&')}://[^/]+\\.${host.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')}$`, 'i');
  });
}

type Middleware = (req: IncomingMessage, res: ServerResponse, next: () => void) => void;

/** The effective settings of one API (router defaults, then the API's own fields); null = no CORS. */
function effective(router: CorsOptions | undefined, api: CorsOptions | false | undefined): CorsOptions | null {
  if (api === false) return null;
  if (!router && !api) return null;
  return { ...router, ...api };
}

/** Distinct API CORS settings whose middleware is kept. */
const MAX_CONFIGS = 1000;

/**
 * The CORS of a router: `apply(req, res, def)` sets the headers for an actual response,
 * `preflight(req, res, def)` answers a preflight. `def` is the API (undefined for an unknown path:
 * the router's own settings). Middlewares are built once per distinct API setting (`cors`, `methods`).
 */
export class Cors {
  private readonly byConfig = new Map<string, Middleware | null>();
  private readonly routerOnly: Middleware | null;

  constructor(private readonly defaults: CorsOptions | undefined) {
    this.routerOnly = this.build(effective(defaults, undefined), undefined);
  }

  private build(c: CorsOptions | null, apiMethods: string[] | undefined): Middleware | null {
    if (!c) return null;
    const methods = c.methods ?? apiMethods;
    return corsMiddleware({
      origin: originOption(c),
      ...(methods ? { methods } : {}),
      ...(c.headers ? { allowedHeaders: c.headers } : {}),
      exposedHeaders: c.exposeHeaders ?? DEFAULT_EXPOSE,
      credentials: c.credentials === true,
      ...(c.maxAge !== undefined ? { maxAge: c.maxAge } : {}),
      // the router ends preflights itself, and lets non-preflight OPTIONS requests reach the script
      preflightContinue: true,
    }) as unknown as Middleware;
  }

  private middleware(def: { cors?: CorsOptions | false; methods?: string[] } | undefined): Middleware | null {
    if (!def || (def.cors === undefined && !def.methods)) return this.routerOnly;
    // by what the definition says now (a registry may change a definition in place)
    const key = JSON.stringify([def.cors, def.methods]);
    let m = this.byConfig.get(key);
    if (m === undefined) {
      m = this.build(effective(this.defaults, def.cors), def.methods);
      if (this.byConfig.size >= MAX_CONFIGS) this.byConfig.clear();
      this.byConfig.set(key, m);
    }
    return m;
  }

  /** Sets the `Access-Control-*` headers of an actual response (none when the API has no CORS). */
  apply(req: IncomingMessage, res: ServerResponse, def?: { cors?: CorsOptions | false; methods?: string[] }): void {
    const m = this.middleware(def);
    if (m) m(req, res, () => undefined); // (the `cors` package calls next synchronously for static options)
  }

  /** Answers a preflight: 204 with the API's CORS headers (none when it has no CORS). */
  preflight(req: IncomingMessage, res: ServerResponse, def?: { cors?: CorsOptions | false; methods?: string[] }): void {
    this.apply(req, res, def);
    res.statusCode = 204;
    res.setHeader('Content-Length', '0');
    res.end();
  }
}
