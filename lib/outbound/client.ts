/**
 * The HTTP client behind `platform.http.request`: http(s) only, private networks refused after
 * DNS resolution on every connection (the checked address is the one connected to), `allowHosts`
 * on every redirect hop, one deadline over connect + headers + body, a cap on the body size, and
 * a budget of memory for the bodies all calls hold (lib/outbound/budget.ts).
 * Connections are kept alive and reused between calls (lib/outbound/connections.ts).
 */
import * as dns from 'node:dns';
import * as http from 'node:http';
import * as https from 'node:https';
import { isIP, type LookupFunction } from 'node:net';
import { ApiError } from '../errors';
import type { OutboundOptions } from '../types';
import { addressBlockReason, hostAllowed } from './address-policy';
import { BodyBudget, type BodyAccount } from './budget';
import { createAgents, type Agents } from './connections';
import { LookupQueue } from './lookups';
import { Deadline, describe, OutboundHttpResponse, type OutboundResponse } from './response';
import { ownSet } from '../context/own-map';

export type { OutboundResponse } from './response';

/** One outbound call as a script describes it. */
export interface OutboundRequest {
  url: string;
  /** Default `GET`. */
  method?: string;
  /** Host, Connection, Content-Length, Transfer-Encoding and other hop-by-hop headers are dropped. */
  headers?: Record<string, string>;
  body?: string | Uint8Array;
  /** Lowers the client's `timeoutMs` for this call (never raises it). */
  timeoutMs?: number;
  /** Ends the call early (connection closed, OUTBOUND_FAILED), while it waits for the answer or reads the body. */
  signal?: AbortSignal;
  /** The app the call is made for: its name lookups take turns with other apps' (lib/outbound/lookups.ts). */
  appId?: string;
  /** The call's part of the client's budget (`account()`), which a body read whole, and a request body until answered, take from; none: not counted. */
  account?: BodyAccount;
}

/** @internal Test seams only: not part of the public options and may change without notice. */
export interface OutboundInternals {
  /** Replaces `dns.lookup(host, { all: true })`. */
  resolve?: (host: string) => Promise<dns.LookupAddress[]>;
  /** Replaces the address policy: why `address` (reached for `host`) is refused, or null. */
  blockReason?: (address: string, host: string) => string | null;
}

/** OutboundOptions plus the internal test seams. */
export interface OutboundClientOptions extends OutboundOptions {
  /** @internal */
  internal?: OutboundInternals;
}

const MiB = 1024 * 1024;
/**
 * Most headers one request may carry: each is checked and set on the host's event loop, which
 * every app shares (a script sending 100,000 held it for seconds, whatever the destination).
 */
export const MAX_REQUEST_HEADERS = 100;
/**
 * Most bytes of one request's head: its method, URL and headers (names and values) together.
 * The host holds the head of every request in flight (a few copies of it, until the upstream
 * reads it), outside the budget for bodies: 32 requests of a call carrying a 1 MiB header or URL
 * to an upstream not reading them raised its RSS by about 170 MB. No common server takes a head
 * this large (Node.js: 16 KiB).
 */
export const MAX_REQUEST_HEAD_BYTES = 64 * 1024;
const REDIRECTS = new Set([301, 302, 303, 307, 308]);
/** Methods RFC 9110 calls idempotent: safe to send again when a reused connection was reset before the answer. */
const IDEMPOTENT = new Set(['GET', 'HEAD', 'OPTIONS', 'PUT', 'DELETE', 'TRACE']);
/** Request headers a script may not set. */
const DROPPED = new Set(['host', 'connection', 'content-length', 'transfer-encoding', 'keep-alive', 'proxy-connection', 'te', 'trailer', 'upgrade', 'expect']);
/** Dropped when a redirect turns the request into a body-less GET. */
const BODY_HEADERS = ['content-type', 'content-encoding', 'content-language', 'content-location'];
/** Dropped when a redirect leaves the origin. */
const CREDENTIAL_HEADERS = ['authorization', 'proxy-authorization', 'cookie'];

const failed = (message: string) => new ApiError('OUTBOUND_FAILED', message);
const blocked = (message: string) => new ApiError('OUTBOUND_BLOCKED', message);
const bareHost = (url: URL) => url.hostname.replace(/^\[(.*)\]$/, '$1');
const num = (v: unknown, fallback: number) => (typeof v === 'number' && Number.isFinite(v) && v >= 0 ? v : fallback);

const headTooLarge = (size: number) => failed(`request head too large: at most ${MAX_REQUEST_HEAD_BYTES} bytes of method, URL and headers (${size} given)`);

/** The request's headers, checked; `used`: the bytes its method and URL take of MAX_REQUEST_HEAD_BYTES. */
function buildHeaders(input: Record<string, string> | undefined, used: number): Record<string, string> {
  const out: Record<string, string> = {};
  const entries = Object.entries(input ?? {});
  if (entries.length > MAX_REQUEST_HEADERS) throw failed(`too many request headers: at most ${MAX_REQUEST_HEADERS} (${entries.length} given)`);
  // (sizes first: each value is then checked on the host's event loop)
  let size = used;
  for (const [name, value] of entries) size += name.length + (value === undefined || value === null ? 0 : String(value).length);
  if (size > MAX_REQUEST_HEAD_BYTES) throw headTooLarge(size);
  for (const [rawName, rawValue] of entries) {
    const name = rawName.toLowerCase();
    if (DROPPED.has(name) || rawValue === undefined || rawValue === null) continue;
    const value = String(rawValue);
    try {
      http.validateHeaderName(name);
      http.validateHeaderValue(name, value);
    } catch {
      throw failed(`invalid request header ${JSON.stringify(rawName).slice(0, 100)}`);
    }
    ownSet(out, name, value);
  }
  if (!('user-agent' in out)) out['user-agent'] = 'scriptable-api';
  return out;
}

function toBody(body: unknown): Buffer | undefined {
  if (body === undefined || body === null) return undefined;
  if (typeof body === 'string') return Buffer.from(body, 'utf8');
  if (body instanceof Uint8Array) return Buffer.from(body.buffer, body.byteOffset, body.byteLength);
  throw failed('request body must be a string or bytes');
}

/** Outbound HTTP client with SSRF protection; one per router, safe to share between calls. */
export class OutboundClient {
  private readonly timeoutMs: number;
  private readonly maxBodyBytes: number;
  private readonly maxRedirects: number;
  private readonly allowPrivate: boolean;
  private readonly allowHosts: readonly string[] | undefined;
  private readonly internal: OutboundInternals;
  private readonly agents: Agents;
  private readonly budget: BodyBudget;
  private readonly lookups: LookupQueue;
  private readonly maxRequestsPerApp: number;
  /** Requests each app has open (in flight, or kept with a body not read whole): see hold(). */
  private readonly open = new Map<string, number>();

  /**
   * Defaults: timeoutMs 10000, maxBodyBytes 10 MiB, maxRedirects 5, allowPrivateNetworks false,
   * maxBufferedBytes 256 MiB (at least maxBodyBytes), of which a call may hold an eighth (at least maxBodyBytes),
   * maxRequestsPerApp 2048.
   */
  constructor(options: OutboundClientOptions = {}) {
    this.timeoutMs = num(options.timeoutMs, 10_000) || 10_000;
    this.maxBodyBytes = num(options.maxBodyBytes, 10 * MiB);
    this.maxRedirects = Math.floor(num(options.maxRedirects, 5));
    this.allowPrivate = options.allowPrivateNetworks === true;
    this.allowHosts = Array.isArray(options.allowHosts) ? [...options.allowHosts] : undefined;
    this.internal = options.internal ?? {};
    this.agents = createAgents((address, host) => this.checkAddress(address, host));
    this.lookups = new LookupQueue(this.internal.resolve ?? ((h) => dns.promises.lookup(h, { all: true })));
    const buffered = Math.max(num(options.maxBufferedBytes, 256 * MiB), this.maxBodyBytes);
    this.budget = new BodyBudget(buffered, Math.max(this.maxBodyBytes, Math.floor(buffered / 8)));
    this.maxRequestsPerApp = Math.floor(num(options.maxRequestsPerApp, 2048));
  }

  /**
   * Counts one more open request (in flight, or kept by its call) of app `appId`, or fails with
   * OUTBOUND_FAILED when the app has `maxRequestsPerApp`: each may hold a connection (a file
   * descriptor of the process every app shares), and one app's calls together could otherwise
   * hold 32 each. `release` gives them back.
   */
  hold(appId: string): void {
    const n = this.open.get(appId) ?? 0;
    if (n >= this.maxRequestsPerApp) throw failed(`app '${appId}' has ${n} outbound requests open at once, the most allowed (outbound.maxRequestsPerApp); try again later`);
    this.open.set(appId, n + 1);
  }

  /** Gives back `count` of app `appId`'s open requests (see hold). */
  release(appId: string, count = 1): void {
    const n = (this.open.get(appId) ?? 0) - count;
    if (n > 0) this.open.set(appId, n);
    else this.open.delete(appId);
  }

  /** A new call's part of the budget for outbound bodies; `close()` it when the call ends. */
  account(): BodyAccount {
    return this.budget.account();
  }

  /** Closes the idle kept-alive connections; those in use close when their call ends. */
  close(): void {
    this.agents.http.close();
    this.agents.https.close();
  }

  /**
   * Sends the request, following redirects. Rejects with ApiError OUTBOUND_BLOCKED when a hop
   * is not allowed (scheme, allowHosts, private address) and OUTBOUND_FAILED otherwise.
   */
  async request(req: OutboundRequest): Promise<OutboundResponse> {
    if (!req || typeof req !== 'object') throw failed('request must be an object with a url');
    const timeoutMs = Math.min(num(req.timeoutMs, this.timeoutMs) || this.timeoutMs, this.timeoutMs);
    const rawUrl = String(req.url);
    let method = typeof req.method === 'string' && req.method ? req.method : 'GET';
    // (a URL this long is not parsed)
    if (method.length + rawUrl.length > MAX_REQUEST_HEAD_BYTES) throw headTooLarge(method.length + rawUrl.length);
    let url = parseUrl(rawUrl);
    method = method.toUpperCase();
    if (!/^[!#$%&'*+.^_`|~0-9A-Z-]+$/.test(method) || method === 'CONNECT') throw failed(`unsupported method ${method.slice(0, 20)}`);
    let headers = buildHeaders(req.headers, method.length + url.href.length);
    let body = toBody(req.body);
    // (held on the host until the request is answered: counted in the call's budget meanwhile)
    const sent = body?.length ?? 0;
    if (sent > 0) req.account?.take(sent, `request body to ${url.host}`);
    const deadline = new Deadline(timeoutMs, req.signal);
    try {
      for (let hop = 0; ; hop++) {
        deadline.host = url.host;
        this.checkDestination(url);
        const res = await this.send(url, method, headers, body, deadline, req.appId ?? '');
        const location = res.headers.location;
        if (!REDIRECTS.has(res.statusCode ?? 0) || !location) return new OutboundHttpResponse(res, url, deadline, this.maxBodyBytes, method, req.account);
        res.destroy();
        if (hop >= this.maxRedirects) throw failed(`too many redirects (more than ${this.maxRedirects}) from ${url.host}`);
        const next = parseUrl(location, url);
        const status = res.statusCode;
        if ((status === 303 && method !== 'HEAD') || ((status === 301 || status === 302) && method === 'POST')) {
          method = 'GET';
          body = undefined;
          headers = omit(headers, BODY_HEADERS);
        }
        if (next.origin !== url.origin) headers = omit(headers, CREDENTIAL_HEADERS);
        url = next;
      }
    } catch (err) {
      deadline.clear();
      throw describe(err, url.host, 'before the response');
    } finally {
      if (sent > 0) req.account?.give(sent);
    }
  }

  /** Scheme, allowHosts and (for IP literals, which skip `lookup`) the address policy. */
  private checkDestination(url: URL): void {
    if (url.protocol !== 'http:' && url.protocol !== 'https:') {
      throw blocked(`URL scheme ${url.protocol} is not allowed; only http: and https: URLs may be called`);
    }
    const host = bareHost(url);
    if (!hostAllowed(host, this.allowHosts)) throw blocked(`destination ${host} is not in allowHosts`);
    if (isIP(host) !== 0) this.checkAddress(host, host);
  }

  /**
   * Refuses `address` (reached for `host`) when the policy blocks it. For a name, the message says
   * what kind of address it resolved to, never the address: a script must not learn the host's
   * network from it.
   */
  private checkAddress(address: string, host: string): void {
    const reason = this.internal.blockReason ? this.internal.blockReason(address, host) : this.allowPrivate ? null : addressBlockReason(address);
    if (reason === null) return;
    throw blocked(`destination ${host} ${address === host ? 'is' : 'resolves to'} ${reason}; private networks are not allowed`);
  }

  /**
   * A lookup for net: resolves every address of `hostname` in app `appId`'s turn, refuses if any
   * is blocked, hands net the checked ones.
   */
  private lookupFor(appId: string, deadline: Deadline): LookupFunction {
    return (hostname, options, callback) => {
      const family = options.family === 4 || options.family === 'IPv4' ? 4 : options.family === 6 || options.family === 'IPv6' ? 6 : 0;
      this.lookups
        .lookup(appId, hostname, () => !deadline.over)
        .then((all) => {
          all.forEach((a) => this.checkAddress(a.address, hostname));
          const list = family ? all.filter((a) => a.family === family) : all;
          if (list.length === 0) throw failed(`could not resolve host ${hostname}`);
          return list;
        })
        .then(
          (list) => (options.all ? callback(null, list) : callback(null, list[0].address, list[0].family)),
          (err: NodeJS.ErrnoException) => callback(err, '', 0),
        );
    };
  }

  private send(url: URL, method: string, headers: Record<string, string>, body: Buffer | undefined, deadline: Deadline, appId: string): Promise<http.IncomingMessage> {
    return new Promise((resolve, reject) => {
      const options: https.RequestOptions = {
        method,
        hostname: bareHost(url),
        port: url.port || undefined,
        path: `${url.pathname}${url.search}`,
        headers: body ? { ...headers, 'content-length': String(body.length) } : headers,
        agent: url.protocol === 'https:' ? this.agents.https : this.agents.http,
        lookup: this.lookupFor(appId, deadline),
        auth: url.username || url.password ? `${decodeURIComponent(url.username)}:${decodeURIComponent(url.password)}` : undefined,
      };
      const req = (url.protocol === 'https:' ? https : http).request(options);
      let settled = false;
      deadline.watch(req);
      req.on('error', (err: NodeJS.ErrnoException) => {
        // (after the response: Node reports a reset while the body arrives here too; the body's
        // reader reports it, and nothing is sent again)
        const answered = settled;
        settled = true;
        // A kept connection the upstream closed just as it was reused (its idle timeout): the
        // request never reached it. An idempotent one is sent again, on the next connection (each
        // retry uses up a kept connection: at worst the last one is new).
        if (!answered && req.reusedSocket && err.code === 'ECONNRESET' && IDEMPOTENT.has(method)) {
          resolve(this.send(url, method, headers, body, deadline, appId));
        } else reject(err);
      });
      req.on('response', (res) => {
        settled = true;
        res.on('error', () => undefined);
        // An answer read to its end while the request body is still going out (an upstream that
        // answered without reading it): the rest would wait for good, holding the connection and
        // the body past the deadline and the call. The connection closes instead.
        res.once('end', () => {
          if (!req.writableFinished) req.destroy();
        });
        deadline.watch(res);
        resolve(res);
      });
      // Closed with neither: Node drops an unasked protocol switch (101) that way. ('close' comes
      // after 'response' or 'error' too, every request: no error is made for those.)
      req.on('close', () => {
        if (!settled) reject(failed(`connection to ${url.host} closed before the response`));
      });
      req.end(body);
    });
  }
}

function parseUrl(raw: unknown, base?: URL): URL {
  try {
    return new URL(String(raw), base);
  } catch {
    throw failed(base ? `invalid redirect location from ${base.host}` : `invalid URL ${JSON.stringify(String(raw).slice(0, 200))}`);
  }
}

function omit(headers: Record<string, string>, names: string[]): Record<string, string> {
  const out = { ...headers };
  for (const n of names) delete out[n];
  return out;
}
