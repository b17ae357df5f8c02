/**
 * The rule's `identifier` template → the bucket identifier of one request.
 *
 * Placeholders: `{ip}`, `{header.NAME}` (case-insensitive), `{query.NAME}`, `{cookie.NAME}`,
 * `{attr.NAME}` (a request attribute set by the before script). Any other text is literal
 * (`"global"` is one bucket for every caller); braces outside these placeholders are refused when
 * the API is registered (a mistyped placeholder would otherwise be one bucket for everyone). A placeholder whose value is empty falls back to
 * the IP, marked so that no value a client sends can name the same bucket. `{ip}` is `req.ip`
 * (so the host's `trust proxy` setting decides), with IPv6 addresses
 * grouped by subnet by express-rate-limit's `ipKeyGenerator`. A header whose name contains `_` is
 * absent unless the router's `allowUnderscoreHeaders` is set, as it is for scripts.
 */
import type { Request } from 'express';
import { parse as parseCookie } from 'cookie';
import { ipKeyGenerator } from 'express-rate-limit';
import { ownGet } from '../context/own-map';

export const DEFAULT_IDENTIFIER = '{ip}';
export const DEFAULT_IPV6_SUBNET = 56;

type Part =
  | { kind: 'literal'; text: string }
  | { kind: 'ip' }
  | { kind: 'header' | 'query' | 'cookie' | 'attr'; name: string };

interface ParsedTemplate {
  parts: Part[];
  usesAttributes: boolean;
}

const PLACEHOLDER = /\{(ip|(header|query|cookie|attr)\.([^{}]+))\}/g;
const cache = new Map<string, ParsedTemplate>();
const CACHE_MAX = 10000;

/** The first brace-delimited text that is not a placeholder (`{headers.x}`, `{IP}`, a lone `{`), if any. */
export function unknownPlaceholder(template: string): string | undefined {
  const rest = template.replace(PLACEHOLDER, '');
  const at = rest.search(/[{}]/);
  if (at < 0) return undefined;
  const m = /\{[^{}]*\}?|\}/.exec(rest.slice(at));
  return m ? m[0] : rest.slice(at, at + 1);
}

/** An HTTP field name is a token (RFC 9110 §5.1, §5.6.2). */
const HEADER_NAME = /^[!#$%&'*+.^_`|~0-9A-Za-z-]+$/;

/** The first `{header.NAME}` whose NAME no request header can have (a space, a colon), if any. */
export function badHeaderPlaceholder(template: string): { placeholder: string; name: string } | undefined {
  for (const m of template.matchAll(PLACEHOLDER)) {
    if (m[2] === 'header' && !HEADER_NAME.test(m[3])) return { placeholder: m[0], name: m[3] };
  }
  return undefined;
}

/** Parses a template once; later calls with the same string are a Map lookup. */
export function parseTemplate(template: string | undefined): ParsedTemplate {
  const key = template === undefined || template === '' ? DEFAULT_IDENTIFIER : template;
  let parsed = cache.get(key);
  if (parsed) return parsed;
  const parts: Part[] = [];
  let last = 0;
  PLACEHOLDER.lastIndex = 0;
  for (let m = PLACEHOLDER.exec(key); m; m = PLACEHOLDER.exec(key)) {
    if (m.index > last) parts.push({ kind: 'literal', text: key.slice(last, m.index) });
    if (m[1] === 'ip') parts.push({ kind: 'ip' });
    else {
      const kind = m[2] as 'header' | 'query' | 'cookie' | 'attr';
      parts.push({ kind, name: kind === 'header' ? m[3].toLowerCase() : m[3] });
    }
    last = m.index + m[0].length;
  }
  if (last < key.length) parts.push({ kind: 'literal', text: key.slice(last) });
  parsed = { parts, usesAttributes: parts.some((p) => p.kind === 'attr') };
  if (cache.size >= CACHE_MAX) cache.clear();
  cache.set(key, parsed);
  return parsed;
}

/** True if the template contains an `{attr.NAME}` placeholder (resolvable only after the before script). */
export function templateUsesAttributes(template: string | undefined): boolean {
  return parseTemplate(template).usesAttributes;
}

/** `req.ip` grouped by subnet (IPv6 /56 by default; IPv4-mapped IPv6 becomes IPv4). */
export function ipKey(req: Request, ipv6Subnet: number = DEFAULT_IPV6_SUBNET): string {
  const ip = req.ip || req.socket?.remoteAddress || '';
  if (ip === '') return '';
  return ipKeyGenerator(ip, ipv6Subnet);
}

/** Resolves the template for one request. */
export function resolveIdentifier(
  template: string | undefined,
  req: Request,
  attributes?: Record<string, unknown>,
  ipv6Subnet: number = DEFAULT_IPV6_SUBNET,
  allowUnderscoreHeaders = false,
): string {
  const { parts } = parseTemplate(template);
  // Fast path for the default `{ip}`.
  if (parts.length === 1 && parts[0].kind === 'ip') return ipKey(req, ipv6Subnet);
  let out = '';
  let cookies: Record<string, string | undefined> | undefined;
  let query: URLSearchParams | undefined;
  for (const part of parts) {
    let value: string;
    switch (part.kind) {
      case 'literal':
        out += part.text;
        continue;
      case 'ip':
        value = ipKey(req, ipv6Subnet);
        break;
      case 'header':
        value = !allowUnderscoreHeaders && part.name.includes('_') ? '' : toText(ownGet(req.headers, part.name));
        break;
      case 'query':
        if (query === undefined) query = queryOf(req);
        value = query.get(part.name) ?? '';
        break;
      case 'cookie':
        if (cookies === undefined) {
          const header = req.headers.cookie;
          cookies = header ? parseCookie(header) : {};
        }
        value = toText(cookies[part.name]);
        break;
      case 'attr':
        value = toText(attributes ? ownGet(attributes, part.name) : undefined);
        break;
    }
    out += value === '' ? FALLBACK + ipKey(req, ipv6Subnet) : ownValue(value);
  }
  return out;
}

/**
 * Marks the IP a missing value falls back to. Values never contain it (header values cannot;
 * query, cookie and attribute values have it replaced), so a client sending an address as the
 * value does not land in the bucket of that address's callers.
 */
const FALLBACK = '\u0000';

function ownValue(value: string): string {
  return value.includes(FALLBACK) ? value.replace(/\u0000/g, '\uFFFD') : value;
}

/**
 * The query of the request's URL, as scripts' `ctx.query` reads it: whatever query parser the
 * host's Express uses (extended, simple, a custom one, or none) plays no part.
 */
function queryOf(req: Request): URLSearchParams {
  const url = (req as { originalUrl?: string }).originalUrl ?? req.url ?? '';
  const i = url.indexOf('?');
  return new URLSearchParams(i < 0 ? '' : url.slice(i + 1));
}

/** A value as key text: strings as they are, other scalars as text, objects and arrays as JSON. */
function toText(value: unknown): string {
  if (value === undefined || value === null) return '';
  if (typeof value === 'string') return value;
  if (typeof value === 'number' || typeof value === 'boolean' || typeof value === 'bigint') return String(value);
  try {
    return JSON.stringify(value) ?? '';
  } catch {
    return '';
  }
}
