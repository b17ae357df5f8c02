/**
 * Which destinations `platform.http.request` may reach: address classification (loopback,
 * private, link-local, reserved... in IPv4, IPv6 and IPv6 forms that embed an IPv4 address)
 * and `allowHosts` matching. Pure functions, no I/O.
 */
import { isIP, isIPv4, isIPv6 } from 'node:net';

/** [network, prefix length, reason] — reasons complete "destination X is ...". */
const V4_RULES: ReadonlyArray<readonly [string, number, string]> = [
  ['169.254.169.254', 32, 'a link-local (cloud metadata) address'],
  ['255.255.255.255', 32, 'a broadcast address'],
  ['0.0.0.0', 8, 'an unspecified address'],
  ['10.0.0.0', 8, 'a private address'],
  ['100.64.0.0', 10, 'a shared (CGNAT) address'],
  ['127.0.0.0', 8, 'a loopback address'],
  ['169.254.0.0', 16, 'a link-local address'],
  ['172.16.0.0', 12, 'a private address'],
  ['192.0.0.0', 24, 'a reserved address'],
  ['192.0.2.0', 24, 'a reserved (documentation) address'],
  ['192.88.99.0', 24, 'a reserved (6to4 relay) address'],
  ['192.168.0.0', 16, 'a private address'],
  ['198.18.0.0', 15, 'a reserved (benchmarking) address'],
  ['198.51.100.0', 24, 'a reserved (documentation) address'],
  ['203.0.113.0', 24, 'a reserved (documentation) address'],
  ['224.0.0.0', 4, 'a multicast address'],
  ['240.0.0.0', 4, 'a reserved address'],
];

/** Dotted-quad IPv4 to an unsigned 32-bit number (input must pass `isIPv4`). */
function v4ToInt(ip: string): number {
  return ip.split('.').reduce((acc, part) => ((acc << 8) | Number(part)) >>> 0, 0);
}

const V4_TABLE = V4_RULES.map(([net, len, reason]) => {
  const mask = len === 0 ? 0 : (0xffffffff << (32 - len)) >>> 0;
  return { base: (v4ToInt(net) & mask) >>> 0, mask, reason };
});

function v4Reason(n: number): string | null {
  for (const r of V4_TABLE) if (((n & r.mask) >>> 0) === r.base) return r.reason;
  return null;
}

/** IPv6 text (validated by `isIPv6`, zone id allowed) to its eight 16-bit groups. */
function v6Groups(ip: string): number[] {
  let s = ip.split('%')[0];
  const lastColon = s.lastIndexOf(':');
  const tail = s.slice(lastColon + 1);
  if (tail.includes('.')) {
    const n = v4ToInt(tail);
    s = `${s.slice(0, lastColon + 1)}${(n >>> 16).toString(16)}:${(n & 0xffff).toString(16)}`;
  }
  const toNums = (part: string) => (part === '' ? [] : part.split(':').map((g) => parseInt(g, 16)));
  const halves = s.split('::');
  if (halves.length === 1) return toNums(s);
  const head = toNums(halves[0]);
  const rest = toNums(halves[1]);
  return [...head, ...new Array<number>(8 - head.length - rest.length).fill(0), ...rest];
}

/** The reason an embedded IPv4 address is blocked, tagged with the embedding form. */
function embedded(hi: number, lo: number, form: string): string | null {
  const reason = v4Reason(((hi << 16) | lo) >>> 0);
  return reason === null ? null : `${reason} (${form})`;
}

function v6Reason(g: number[]): string | null {
  const zeroUpTo = (n: number) => g.slice(0, n).every((x) => x === 0);
  if (zeroUpTo(8)) return 'an unspecified address';
  if (zeroUpTo(7) && g[7] === 1) return 'a loopback address';
  if (zeroUpTo(5) && g[5] === 0xffff) return embedded(g[6], g[7], 'IPv4-mapped IPv6');
  if (zeroUpTo(6)) return embedded(g[6], g[7], 'IPv4-compatible IPv6');
  if (zeroUpTo(4) && g[4] === 0xffff && g[5] === 0) return embedded(g[6], g[7], 'IPv4-translated IPv6');
  if (g[0] === 0x64 && g[1] === 0xff9b) {
    if (g[2] === 0 && g[3] === 0 && g[4] === 0 && g[5] === 0) return embedded(g[6], g[7], 'NAT64 IPv6');
    if (g[2] === 1) return 'a reserved (local-use NAT64) address';
  }
  if (g[0] < 0x100) return 'a reserved address';
  if (g[0] === 0x100 && g[1] === 0 && g[2] === 0 && g[3] === 0) return 'a reserved (discard-only) address';
  if (g[0] === 0x2001 && g[1] === 0) return 'a reserved (Teredo) address';
  if (g[0] === 0x2001 && g[1] === 2 && g[2] === 0) return 'a reserved (benchmarking) address';
  if ((g[0] === 0x2001 && g[1] === 0xdb8) || (g[0] === 0x3fff && g[1] < 0x1000)) return 'a reserved (documentation) address';
  if (g[0] === 0x2002) return embedded(g[1], g[2], '6to4 IPv6');
  if ((g[0] & 0xfe00) === 0xfc00) return 'a unique-local address';
  if ((g[0] & 0xffc0) === 0xfe80) return 'a link-local address';
  if ((g[0] & 0xffc0) === 0xfec0) return 'a site-local address';
  if ((g[0] & 0xff00) === 0xff00) return 'a multicast address';
  return null;
}

/**
 * Canonical form of a host name or IP literal, as a URL parser (and so a resolver) reads it:
 * lower case, punycode, IPv6 without brackets, and odd IPv4 spellings (`2130706433`, `0x7f.1`,
 * `127.1`) as dotted quads. Null when the text is not a valid host.
 */
export function normalizeHost(host: string): string | null {
  if (typeof host !== 'string' || host === '' || /[\s/\\?#@]/.test(host)) return null;
  const bare = host.startsWith('[') && host.endsWith(']') ? host.slice(1, -1) : host;
  if (isIPv6(bare)) {
    // Zone ids are not URL syntax; keep them out of the URL parser.
    const [addr, zone] = bare.split('%');
    try {
      const h = new URL(`http://[${addr}]/`).hostname.slice(1, -1);
      return zone === undefined ? h : `${h}%${zone}`;
    } catch {
      return null;
    }
  }
  if (bare.includes(':')) return null;
  try {
    return new URL(`http://${bare}/`).hostname;
  } catch {
    return null;
  }
}

/**
 * Why an IP address may not be called, e.g. `"a loopback address"`, or null when it is a public
 * address. Accepts IPv4, IPv6 (brackets and zone ids allowed) and the odd IPv4 spellings
 * resolvers accept. Text that is not an IP address is refused (`"not a valid IP address"`).
 */
export function addressBlockReason(ip: string): string | null {
  let addr = typeof ip === 'string' ? ip.trim() : '';
  if (addr.startsWith('[') && addr.endsWith(']')) addr = addr.slice(1, -1);
  if (isIP(addr) === 0) addr = normalizeHost(addr) ?? '';
  if (isIPv4(addr)) return v4Reason(v4ToInt(addr));
  if (isIPv6(addr)) return v6Reason(v6Groups(addr));
  return 'not a valid IP address';
}

/**
 * True when `ip` is loopback, unspecified, private (RFC 1918), CGNAT, link-local (incl. cloud
 * metadata), unique-local, multicast, broadcast or reserved — in IPv4 or IPv6, including IPv6
 * forms that embed such an IPv4 address (mapped, compatible, NAT64, 6to4). Non-IP text is blocked.
 */
export function isBlockedAddress(ip: string): boolean {
  return addressBlockReason(ip) !== null;
}

function hostKey(host: string): string | null {
  const h = normalizeHost(host.trim());
  return h === null ? null : h.replace(/\.$/, '');
}

/**
 * Whether `host` matches `allowHosts`: an entry is an exact host name or IP literal, or
 * `*.example.com`, which matches any subdomain of example.com (at any depth) but not
 * example.com itself and never an IP literal. Case-insensitive; a trailing dot is ignored.
 * `allowHosts` undefined means every host is allowed; an empty list allows none.
 */
export function hostAllowed(host: string, allowHosts: readonly string[] | undefined): boolean {
  if (allowHosts === undefined) return true;
  const h = hostKey(host);
  if (h === null) return false;
  const hostIsIp = isIP(h.split('%')[0]) !== 0;
  for (const entry of allowHosts) {
    if (typeof entry !== 'string') continue;
    const pattern = entry.trim();
    if (pattern.startsWith('*.')) {
      const suffix = hostKey(pattern.slice(2));
      if (!hostIsIp && suffix !== null && h.endsWith(`.${suffix}`)) return true;
    } else if (hostKey(pattern) === h) {
      return true;
    }
  }
  return false;
}
