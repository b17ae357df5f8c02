/**
 * Builds the RequestSnapshot the sandbox sees: a plain copy of the request, made once per request.
 * Header names are lower-cased; names containing `_` are dropped unless allowUnderscoreHeaders
 * (as a fronting web server does). The query is parsed here, never into nested objects.
 */
import type { Request } from 'express';
import { parse as parseCookies } from 'cookie';
import type { PartInfo, RequestSnapshot } from '../runtime/protocol';
import type { RequestBody } from './body';
import { ownGet, ownSet } from './own-map';
import { charsetParameter } from './charset';

export function parseQuery(qs: string | null): Record<string, string | string[]> {
  const query: Record<string, string | string[]> = {};
  if (!qs) return query;
  for (const [k, v] of new URLSearchParams(qs)) {
    const prev = ownGet(query, k);
    if (prev === undefined) ownSet(query, k, v);
    else if (Array.isArray(prev)) prev.push(v); // (in place: a copy per value is quadratic in a repeated key)
    else ownSet(query, k, [prev, v]);
  }
  return query;
}

/** Joined headers, plus the separate values of headers that arrived more than once. */
function headersOf(req: Request, allowUnderscore: boolean) {
  const headers: Record<string, string> = {};
  const lists: Record<string, string[]> = {};
  const raw = req.rawHeaders;
  for (let i = 0; i < raw.length; i += 2) {
    const name = raw[i].toLowerCase();
    if (!allowUnderscore && name.includes('_')) continue;
    const value = raw[i + 1];
    const prev = ownGet(headers, name);
    if (prev === undefined) {
      ownSet(headers, name, value);
      continue;
    }
    const list = ownGet(lists, name);
    if (list) list.push(value);
    else ownSet(lists, name, [prev, value]);
    ownSet(headers, name, prev + (name === 'cookie' ? '; ' : ', ') + value);
  }
  return { headers, lists };
}

/**
 * The cookies of a Cookie header: the first value of each name, and, when a name came more than
 * once (a cookie of the same name for another path or domain), every cookie in order. Each pair
 * is decoded by `cookie` as the map's values are.
 */
function cookiesOf(header: string | undefined): { cookies: Record<string, string>; cookieList?: Array<[string, string]> } {
  if (!header) return { cookies: {} };
  const cookies = parseCookies(header) as Record<string, string>;
  const pieces = header.split(';');
  if (Object.keys(cookies).length >= pieces.length) return { cookies };
  const list: Array<[string, string]> = [];
  for (const piece of pieces) {
    const one = parseCookies(piece) as Record<string, string>;
    for (const name in one) list.push([name, one[name]]);
  }
  return list.length > Object.keys(cookies).length ? { cookies, cookieList: list } : { cookies };
}

/**
 * Whether Express's `trust proxy` setting trusts the peer (never outside an Express app). Any truthy
 * answer of the setting's function counts, as it does for Express's req.ip, req.protocol and req.hostname.
 */
function fromTrustedProxy(req: Request): boolean {
  const trust: unknown = typeof req.app?.get === 'function' ? req.app.get('trust proxy fn') : undefined;
  return typeof trust === 'function' && Boolean((trust as (addr: string | undefined, i: number) => unknown)(req.socket?.remoteAddress, 0));
}

/** A local address as a host name: IPv4 (also IPv4-mapped IPv6) as it is, IPv6 in brackets. */
function localName(address: string | undefined): string {
  if (!address) return '';
  const v4 = address.startsWith('::ffff:') && address.includes('.') ? address.slice(7) : address;
  return v4.includes(':') ? `[${v4}]` : v4;
}

/**
 * The host (`name[:port]`) the client asked for: the first X-Forwarded-Host of a trusted proxy
 * (as Express's `req.hostname` reads it), else the first Host ('' without one).
 */
export function requestedHost(req: Request, trusted = fromTrustedProxy(req)): string {
  const xfh: unknown = trusted ? req.headers?.['x-forwarded-host'] : undefined;
  const forwarded = typeof xfh === 'string' ? xfh : undefined;
  // (Host sent twice: its first value, Node.js's req.headers.host)
  return (forwarded ? forwarded.split(',')[0] : (req.headers?.host ?? '')).trim();
}

/**
 * The server the client asked for, name and port from one header (requestedHost). Without a port there, the
 * scheme's when a trusted proxy forwarded the request (the socket's port is the proxy's hop),
 * else the port the connection was accepted on (HttpServletRequest.getServerPort).
 */
function serverOf(req: Request, headers: Record<string, string>, scheme: 'http' | 'https'): { name: string; port: number } {
  const trusted = fromTrustedProxy(req);
  const forwarded = trusted ? ownGet(headers, 'x-forwarded-host') : undefined;
  const host = requestedHost(req, trusted);
  const start = host.startsWith('[') ? host.indexOf(']') + 1 : 0; // (IPv6 literal)
  const colon = host.indexOf(':', start);
  // (no Host at all, as HTTP/1.0 allows: the address the connection was accepted on, as a servlet container answers)
  const name = colon >= 0 ? host.slice(0, colon) : host === '' ? localName(req.socket?.localAddress) : host;
  const port = colon >= 0 && /^\d{1,5}$/.test(host.slice(colon + 1)) ? Number(host.slice(colon + 1)) : undefined;
  if (port !== undefined) return { name, port };
  const byProxy = trusted && (forwarded !== undefined || ownGet(headers, 'x-forwarded-proto') !== undefined);
  const dflt = scheme === 'https' ? 443 : 80;
  return { name, port: byProxy ? dflt : (req.socket?.localPort ?? dflt) };
}

/**
 * The request target in origin form (`/path?query`): a target in absolute form
 * (`http://host/path?query`, RFC 9112 3.2.2, which servers must accept) loses its scheme and authority.
 */
function originForm(target: string): string {
  if (target.startsWith('/')) return target;
  const m = /^[A-Za-z][A-Za-z0-9+.-]*:\/\/[^/?#]*/.exec(target);
  if (!m) return target;
  const rest = target.slice(m[0].length);
  return rest.startsWith('/') ? rest : `/${rest}`;
}

export interface SnapshotInput {
  req: Request;
  requestId: string;
  appId: string;
  apiPath: string;
  body: RequestBody;
  allowUnderscoreHeaders: boolean;
}

export function buildSnapshot({ req, requestId, appId, apiPath, body, allowUnderscoreHeaders }: SnapshotInput): RequestSnapshot {
  const url = originForm(req.originalUrl ?? req.url);
  const q = url.indexOf('?');
  const queryString = q >= 0 ? url.slice(q + 1) : null;
  const { headers, lists } = headersOf(req, allowUnderscoreHeaders);
  const form = { ...body.form };
  const parts: PartInfo[] = body.parts.map((p, i) => ({
    id: String(i),
    name: p.fieldName,
    contentType: p.contentType,
    size: p.size,
    submittedFileName: p.fileName,
  }));
  const socket = req.socket;
  const scheme = req.protocol === 'https' ? 'https' : 'http';
  const server = serverOf(req, headers, scheme);
  const auth = headers.authorization;
  // (a Content-Type sent twice: its first value, the one Node.js keeps and the body was decoded by,
  // not the two joined, whose charset parameter may be the second's or end in a comma)
  const contentType = ownGet(lists, 'content-type')?.[0] ?? ownGet(headers, 'content-type');
  const remoteAddr = req.ip ?? socket?.remoteAddress ?? '';
  return {
    headers,
    headerLists: lists,
    ...cookiesOf(headers.cookie),
    query: parseQuery(queryString),
    form,
    requestId,
    appId,
    path: apiPath,
    method: req.method,
    url,
    queryString,
    body: body.text,
    protocol: `HTTP/${req.httpVersion}`,
    scheme,
    serverName: server.name,
    serverPort: server.port,
    remoteAddr,
    remoteHost: remoteAddr,
    remotePort: socket?.remotePort ?? 0,
    contentType: contentType ?? null,
    // (the charset the body was decoded by, read as decodeBody reads it)
    characterEncoding: charsetParameter(contentType) ?? null,
    authType: auth ? auth.split(' ', 1)[0] : null,
    contextPath: req.baseUrl ?? '',
    servletPath: `/${appId}`,
    pathInfo: `/${apiPath}`,
    requestURI: q >= 0 ? url.slice(0, q) : url,
    parts,
  };
}
