'use strict';
/** The scripts bench/server.js registers. Every one answers `{"ok":true}`. */

/** The trivial call: a JSON result. */
const MAIN = 'export function fn(ctx) { return { ok: true } }';

/**
 * Hooks that do a little work: before reads a header and sets an attribute, after reads it back
 * and sets a response header (the body stays `{"ok":true}`).
 */
const HOOKS = [
  'export function before(ctx) { ctx.request.setAttribute("t", ctx.request.getHeader("host") ? 1 : 0) }',
  'export function after(ctx, result) { ctx.response.setHeader("X-Hooked", String(ctx.request.getAttribute("t"))) }',
].join('\n');

/** A call that writes a 10 KB CSV through the response's writer (the after hook of HOOKS then sets a header on it). */
const CSV = 'id,sku,qty\n' + Array.from({ length: 600 }, (_, i) => `${i},SKU-${100000 + i},${(i % 7) + 1}\n`).join('');
const WRITER = `const CSV = ${JSON.stringify(CSV)};
export function fn(ctx) { ctx.response.setContentType('text/csv'); ctx.response.getWriter().write(CSV) }`;

/** A call that waits on an upstream, in the spec's synchronous style. */
const ioSync = (upstream) => `export function fn(ctx) {
  var res = platform.http.request({ url: ${JSON.stringify(upstream)} });
  return res.json();
}`;

/** The same call written with `await`. */
const ioAwait = (upstream) => `export async function fn(ctx) {
  const res = await platform.http.request({ url: ${JSON.stringify(upstream)} });
  return res.json();
}`;

/** App number `n`'s own script: a source of its own, so nothing compiled is shared between apps. */
const tenant = (n) => `export function fn(ctx) { var app = ${n}; return { ok: app >= 0 } }`;

/** The request snapshot the router makes of wrk's `GET /web0/api/bench/p` (two headers), for the benches that run without HTTP. */
const WRK_REQUEST = {
  headers: { host: '127.0.0.1:37423', 'user-agent': 'wrk' },
  headerLists: {},
  cookies: {},
  query: {},
  form: {},
  requestId: '3657c877-9998-4058-8e16-9a04f5549191',
  appId: 'bench',
  path: 'p',
  method: 'GET',
  url: '/web0/api/bench/p',
  queryString: null,
  body: '',
  protocol: 'HTTP/1.1',
  scheme: 'http',
  serverName: '127.0.0.1',
  serverPort: 37423,
  remoteAddr: '127.0.0.1',
  remoteHost: '127.0.0.1',
  remotePort: 35322,
  contentType: null,
  characterEncoding: null,
  authType: null,
  contextPath: '/web0/api',
  servletPath: '/bench',
  pathInfo: '/p',
  requestURI: '/web0/api/bench/p',
  parts: [],
};

module.exports = { MAIN, HOOKS, WRITER, ioSync, ioAwait, tenant, WRK_REQUEST };
