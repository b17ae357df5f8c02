'use strict';
// Framing belongs to the host: whatever a script (or a forged state from the sandbox) sets, the
// response on a keep-alive connection is framed by the host, so the next response on the same
// connection is read correctly. Checked on raw sockets, on both engines.
const net = require('node:net');
const { makeApp } = require('./helpers/app');

const INVALID_RESPONSE = 270304;
const INVALID_RESULT = 270300;

/** Reads exactly one HTTP/1.1 response (Content-Length framed) from a buffer; null if incomplete. */
function parseOne(buf) {
  const end = buf.indexOf('\r\n\r\n');
  if (end < 0) return null;
  const head = buf.subarray(0, end).toString('latin1');
  const [statusLine, ...lines] = head.split('\r\n');
  const headers = {};
  for (const l of lines) {
    const i = l.indexOf(':');
    const k = l.slice(0, i).trim().toLowerCase();
    headers[k] = headers[k] === undefined ? l.slice(i + 1).trim() : `${headers[k]}, ${l.slice(i + 1).trim()}`;
  }
  const status = Number(statusLine.split(' ')[1]);
  if (headers['transfer-encoding']) return { status, headers, body: '', rest: Buffer.alloc(0), chunked: true, raw: buf.toString('latin1') };
  const len = Number(headers['content-length'] ?? 0);
  if (buf.length < end + 4 + len) return null;
  return { status, headers, body: buf.subarray(end + 4, end + 4 + len).toString(), rest: buf.subarray(end + 4 + len) };
}

/** Sends two requests pipelined on one keep-alive connection and parses both answers. */
function twoOnOneConnection(port, first, second) {
  return new Promise((resolve, reject) => {
    const sock = net.connect(port, '127.0.0.1');
    let buf = Buffer.alloc(0);
    const out = [];
    const timer = setTimeout(() => {
      sock.destroy();
      resolve({ out, leftover: buf.toString('latin1') });
    }, 10_000);
    sock.on('data', (d) => {
      buf = Buffer.concat([buf, d]);
      for (let r = parseOne(buf); r; r = parseOne(buf)) {
        out.push(r);
        buf = r.rest;
        if (r.chunked) buf = Buffer.alloc(0);
        if (out.length === 2 || r.chunked) {
          clearTimeout(timer);
          sock.destroy();
          resolve({ out, leftover: buf.toString('latin1') });
          return;
        }
      }
    });
    sock.on('error', reject);
    const req = (path) => `GET /web0/api/${path} HTTP/1.1\r\nHost: x\r\nConnection: keep-alive\r\n\r\n`;
    sock.write(req(first) + req(second));
  });
}

const SCRIPTS = {
  te: "export function fn(ctx) { ctx.response.setHeader('Transfer-Encoding', 'chunked'); return 'x' }",
  teAdd: "export function fn(ctx) { ctx.response.addHeader('transfer-encoding', 'chunked'); ctx.response.getWriter().write('x') }",
  connection: "export function fn(ctx) { ctx.response.setHeader('Connection', 'close'); return 'x' }",
  keepAlive: "export function fn(ctx) { ctx.response.setHeader('Keep-Alive', 'timeout=1'); return 'x' }",
  upgrade: "export function fn(ctx) { ctx.response.setStatus(101); ctx.response.setHeader('Upgrade', 'websocket'); return 'x' }",
  trailer: "export function fn(ctx) { ctx.response.setHeader('Trailer', 'X-A'); return 'x' }",
  te2: "export function fn(ctx) { ctx.response.setHeader('TE', 'trailers'); return 'x' }",
  proxy: "export function fn(ctx) { ctx.response.setHeader('Proxy-Connection', 'keep-alive'); return 'x' }",
  status100: 'export function fn(ctx) { ctx.response.setStatus(100); return "x" }',
  status101: 'export function fn(ctx) { ctx.response.setStatus(101); return "x" }',
  status199: 'export function fn(ctx) { ctx.response.setStatus(199); ctx.response.getWriter().write("x") }',
  status600: 'export function fn(ctx) { ctx.response.setStatus(600); return "x" }',
  sendError100: 'export function fn(ctx) { ctx.response.sendError(100, "x") }',
  contentLength: 'export function fn(ctx) { ctx.response.setContentLength(400); ctx.response.setHeader("Content-Length", "400"); return "four" }',
  ok: 'export function fn(ctx) { return "ok" }',
  // a promise continuation re-entering the adapter's entry point with a forged state
  forged: `export async function fn() { await null; __sa.invoke(c => c.response.sendRedirect('/x'),
    '{"stage":"call","returnType":"JSON","wantValue":false}','{}','{}','{"headers":[["Content-Length","400"]]}','') }`,
  onErrorTe: 'export function fn(ctx) { throw new Error("boom") }',
  handler: "export function h(ctx, e) { ctx.response.setStatus(200); ctx.response.setHeader('Transfer-Encoding', 'chunked'); ctx.response.getWriter().write('handled') }",
  redirJs: 'export function fn(ctx) { return "javascript:alert(1)" }',
  redirTab: 'export function fn(ctx) { return "java\\tscript:alert(1)" }',
  redirSpace: 'export function fn(ctx) { return "  JavaScript:alert(1)" }',
  redirData: 'export function fn(ctx) { return "data:text/html,<script>alert(1)</script>" }',
  redirVb: 'export function fn(ctx) { return "vbscript:x" }',
  redirOk: 'export function fn(ctx) { return ctx.query.to }',
  sendRedirJs: 'export function fn(ctx) { ctx.response.sendRedirect("javascript:alert(document.cookie)") }',
  sendRedirData: 'export function fn(ctx) { ctx.response.sendRedirect("DATA:text/html,x") }',
  sendRedirOk: 'export function fn(ctx) { ctx.response.sendRedirect("/elsewhere?a=1") }',
  headerLocJs: 'export function fn(ctx) { ctx.response.setStatus(302); ctx.response.setHeader("Location", "javascript:alert(1)"); return "x" }',
  headerLocOk: 'export function fn(ctx) { ctx.response.setStatus(301); ctx.response.addHeader("location", "/moved"); return "x" }',
  abort: 'export function fn(ctx) { platform.app.abort("no", Number(ctx.query.s)) }',
  noContent: 'export function fn(ctx) { ctx.response.setStatus(Number(ctx.query.s)); return "x" }',
  noContentWriter: 'export function fn(ctx) { ctx.response.setStatus(Number(ctx.query.s)); ctx.response.getWriter().write("hello") }',
  noContentError: 'export function fn(ctx) { ctx.response.sendError(204, "gone") }',
  badType: 'export function fn(ctx) { ctx.response.setContentType(ctx.query.t); return "x" }',
  // (each distinct header costs the host's event loop: 100,000 of them held every app for seconds)
  manyHeaders: `export function fn(ctx) {
    const n = Number(ctx.query.n), r = ctx.response, how = ctx.query.how;
    let refused = null;
    try {
      for (let i = 0; i < n; i++) {
        if (how === 'set') r.setHeader('X-H' + i, 'v');
        else if (how === 'int') r.addIntHeader('X-H' + i, i);
        else r.addHeader(how === 'same' ? 'Set-Cookie' : 'X-H' + i, 'c' + i + '=1');
      }
    } catch (e) {
      if (ctx.query.uncaught) throw e;
      refused = e.name + ': ' + e.message;
    }
    if (how !== 'same') r.setHeader('X-H0', 'again'); // (replacing a header adds none)
    return JSON.stringify({ refused, count: r.getHeaderNames().length });
  }`,
};

const TYPES = { redirJs: 'Redirect', redirTab: 'Redirect', redirSpace: 'Redirect', redirData: 'Redirect', redirVb: 'Redirect', redirOk: 'Redirect' };

describe.each(['quickjs', 'vm2'])('response framing on the %s engine', (engine) => {
  let server;
  let port;
  let router;
  beforeAll(async () => {
    const apis = Object.keys(SCRIPTS)
      .filter((k) => k !== 'handler')
      .map((k) => ({
        path: k,
        call: { script: `${k}.js`, function: 'fn' },
        returnType: TYPES[k] ?? 'Text',
        ...(k === 'onErrorTe' ? { onError: { script: 'handler.js', function: 'h' } } : {}),
      }));
    apis.push({ path: 'json-te', call: { script: 'te.js', function: 'fn' }, returnType: 'JSON' });
    const scripts = Object.fromEntries(Object.entries(SCRIPTS).map(([k, v]) => [`${k}.js`, v]));
    const made = makeApp({ apps: { a: { scripts, apis } }, router: { engine } });
    router = made.router;
    server = made.app.listen(0, '127.0.0.1');
    await new Promise((r) => server.once('listening', r));
    port = server.address().port;
  });
  afterAll(async () => {
    server.close();
    await router.close();
  });

  test.each([
    ['addHeader', 'add'],
    ['addHeader of one name', 'same'],
    ['setHeader', 'set'],
    ['addIntHeader', 'int'],
  ])('%s: at most 1000 response headers; the next one throws an IllegalStateException in the script', async (_label, how) => {
    const { out } = await twoOnOneConnection(port, `a/manyHeaders?n=100000&how=${how}`, `a/manyHeaders?n=1000&how=${how}`);
    expect(out).toHaveLength(2);
    for (const r of out) {
      expect(r.status).toBe(200);
      expect(Object.keys(r.headers).filter((k) => k.startsWith('x-h')).length).toBe(how === 'same' ? 0 : 1000);
    }
    expect(JSON.parse(out[0].body)).toEqual({ refused: 'IllegalStateException: A script may set at most 1000 response headers', count: how === 'same' ? 1 : 1000 });
    expect(JSON.parse(out[1].body)).toEqual({ refused: null, count: how === 'same' ? 1 : 1000 });
    expect(out[0].headers['set-cookie']?.split(', ').length ?? 0).toBe(how === 'same' ? 1000 : 0);
  });

  test('too many response headers, uncaught: a clean 500 error body, and the next response on the connection is intact', async () => {
    const { out } = await twoOnOneConnection(port, 'a/manyHeaders?n=100000&how=add&uncaught=1', 'a/ok');
    expect(out.map((r) => r.status)).toEqual([500, 200]);
    expect(JSON.parse(out[0].body)).toMatchObject({ message: 'A script may set at most 1000 response headers', code: 270000 });
    expect(Object.keys(out[0].headers).filter((k) => k.startsWith('x-h'))).toEqual([]);
    expect(out[1].body).toBe('ok');
  });

  const refused = ['te', 'teAdd', 'connection', 'keepAlive', 'upgrade', 'trailer', 'te2', 'proxy', 'status100', 'status101', 'status199', 'status600', 'sendError100', 'onErrorTe'];
  test.each(refused)('%s: a clean 500 error body, and the next response on the connection is intact', async (name) => {
    const { out, leftover } = await twoOnOneConnection(port, `a/${name}`, 'a/ok');
    expect(out).toHaveLength(2);
    const [first, second] = out;
    expect(first.status).toBe(500);
    expect(first.headers['transfer-encoding']).toBeUndefined();
    expect(first.headers.upgrade).toBeUndefined();
    expect(first.headers.trailer).toBeUndefined();
    expect(first.headers['proxy-connection']).toBeUndefined();
    const body = JSON.parse(first.body);
    expect(body.code).toBe(INVALID_RESPONSE);
    expect(body.message).toMatch(/host frames the response|status from 200 to 599/);
    expect(second.status).toBe(200);
    expect(second.body).toBe('ok');
    expect(leftover).toBe('');
  });

  test('a forged adapter call cannot set Content-Length: an error, and the next response is intact', async () => {
    const { out, leftover } = await twoOnOneConnection(port, 'a/forged', 'a/ok');
    expect(out).toHaveLength(2);
    // the adapter's entry point is not a global: the script fails on its own name
    expect(out[0].status).toBe(500);
    expect(JSON.parse(out[0].body).message).toMatch(/__sa.* not defined/);
    expect(out[0].headers['content-length']).toBe(String(Buffer.byteLength(out[0].body)));
    expect(out[1].body).toBe('ok');
    expect(leftover).toBe('');
  });

  test('JSON return type: a framing header is refused too', async () => {
    const { out } = await twoOnOneConnection(port, 'a/json-te', 'a/ok');
    expect(out[0].status).toBe(500);
    expect(JSON.parse(out[0].body).code).toBe(INVALID_RESPONSE);
    expect(out[1].body).toBe('ok');
  });

  test('setContentLength is a property the host does not send: the real length goes out', async () => {
    const { out } = await twoOnOneConnection(port, 'a/contentLength', 'a/ok');
    expect(out[0].status).toBe(200);
    expect(out[0].headers['content-length']).toBe('4');
    expect(out[0].body).toBe('four');
    expect(out[1].body).toBe('ok');
  });

  test.each(['redirJs', 'redirTab', 'redirSpace', 'redirData', 'redirVb', 'sendRedirJs', 'sendRedirData', 'headerLocJs'])('%s: a non-http(s) redirect is a 500 INVALID_RESULT', async (name) => {
    const { out } = await twoOnOneConnection(port, `a/${name}`, 'a/ok');
    expect(out[0].status).toBe(500);
    expect(out[0].headers.location).toBeUndefined();
    const body = JSON.parse(out[0].body);
    expect(body.code).toBe(INVALID_RESULT);
    expect(body.message).toMatch(/http\(s\) or relative URL/);
    expect(out[1].body).toBe('ok');
  });

  test('a Location header the script set to an http(s) or relative URL goes out with its status', async () => {
    const { out } = await twoOnOneConnection(port, 'a/headerLocOk', 'a/ok');
    expect([out[0].status, out[0].headers.location, out[1].body]).toEqual([301, '/moved', 'ok']);
  });

  test.each([
    ['https://example.com/a?b=1', 'https://example.com/a?b=1'],
    ['http://example.com/', 'http://example.com/'],
    ['/relative/path', '/relative/path'],
    ['next?x=1', 'next?x=1'],
  ])('Redirect to %s is sent', async (to, expected) => {
    const { out } = await twoOnOneConnection(port, `a/redirOk?to=${encodeURIComponent(to)}`, 'a/ok');
    expect(out[0].status).toBe(302);
    expect(out[0].headers.location).toBe(expected);
    expect(out[1].body).toBe('ok');
  });

  test.each([101, 103, 204, 304, 99, 1000, 399])('platform.app.abort with status %s: a 500 ABORTED error body (an error status is 400-599), the next response intact', async (sc) => {
    const { out, leftover } = await twoOnOneConnection(port, `a/abort?s=${sc}`, 'a/ok');
    expect(out.map((r) => r.status)).toEqual([500, 200]);
    expect(JSON.parse(out[0].body)).toMatchObject({ message: 'no', code: 270001 });
    expect(out[1].body).toBe('ok');
    expect(leftover).toBe('');
  });

  test.each([
    ['noContent?s=204', 204],
    ['noContent?s=304', 304],
    ['noContentWriter?s=204', 204],
    ['noContentWriter?s=205', 205],
    ['noContentError', 204],
  ])('%s: a status without content goes without body or Content-Type (205: Content-Length 0), the next response intact', async (path, status) => {
    const { out, leftover } = await twoOnOneConnection(port, `a/${path}`, 'a/ok');
    expect(out.map((r) => r.status)).toEqual([status, 200]);
    expect(out[0].body).toBe('');
    expect(out[0].headers['content-type']).toBeUndefined();
    expect(out[0].headers['content-length']).toBe(status === 205 ? '0' : undefined);
    expect(out[1].body).toBe('ok');
    expect(leftover).toBe('');
  });

  test('an invalid content type is refused as INVALID_RESPONSE', async () => {
    const { out } = await twoOnOneConnection(port, `a/badType?t=${encodeURIComponent('text/plain\u0001x')}`, 'a/ok');
    expect(out[0].status).toBe(500);
    expect(JSON.parse(out[0].body)).toMatchObject({ code: INVALID_RESPONSE });
    expect(out[1].body).toBe('ok');
  });

  test.each([
    ['/x?a=%2F%26&b=%E9', '/x?a=%2F%26&b=%E9'],
    ['https://login.example.com/authorize?redirect_uri=https%3A%2F%2Fapp.example.com%2Fcb%3Fx%3D1', 'https://login.example.com/authorize?redirect_uri=https%3A%2F%2Fapp.example.com%2Fcb%3Fx%3D1'],
    ['http://[::1]:8080/', 'http://[::1]:8080/'],
    ['/a b/é', '/a%20b/%C3%A9'],
  ])('Redirect to %s: escapes already there are kept, raw characters encoded', async (to, expected) => {
    const { out } = await twoOnOneConnection(port, `a/redirOk?to=${encodeURIComponent(to)}`, 'a/ok');
    expect(out[0].status).toBe(302);
    expect(out[0].headers.location).toBe(expected);
  });

  test('sendRedirect to a relative URL is sent', async () => {
    const { out } = await twoOnOneConnection(port, 'a/sendRedirOk', 'a/ok');
    expect(out[0].status).toBe(302);
    expect(out[0].headers.location).toBe('/elsewhere?a=1');
  });
});

describe('the host checks the state, whatever the sandbox sends', () => {
  const { checkResponseState } = require('../dist/cjs/response/framing');
  const base = () => ({ status: 200, headers: [], contentType: null, characterEncoding: null, contentLength: null, bufferSize: 8192, chunks: [], written: false, committed: false, error: null, redirect: null });
  test.each([
    [{ headers: [['Content-Length', '400']] }, /Content-Length/],
    [{ headers: [['transfer-encoding', 'chunked']] }, /transfer-encoding/],
    [{ headers: [['Proxy-Authenticate', 'x']] }, /Proxy-Authenticate/],
    [{ headers: [['X-A', 'a\r\nSet-Cookie: x=1']] }, /Invalid response header/],
    [{ headers: [['Bad Name', 'a']] }, /Invalid response header/],
    [{ status: 101 }, /Status 101/],
    [{ status: 200.5 }, /Status 200.5/],
    [{ error: { status: 1000, message: null } }, /Status 1000/],
    [{ redirect: 'javascript:alert(1)' }, /javascript:/],
  ])('%o is refused', (patch, message) => {
    expect(() => checkResponseState({ ...base(), ...patch })).toThrow(message);
  });
  test('more than MAX_RESPONSE_HEADERS headers are refused before any is checked', () => {
    const { MAX_RESPONSE_HEADERS } = require('../dist/cjs/response/framing');
    expect(MAX_RESPONSE_HEADERS).toBe(1000);
    const headers = Array.from({ length: MAX_RESPONSE_HEADERS }, (_, i) => [`X-H${i}`, 'v']);
    expect(() => checkResponseState({ ...base(), headers })).not.toThrow();
    headers.push(['Bad Name', 'a']);
    expect(() => checkResponseState({ ...base(), headers })).toThrow('A script may set at most 1000 response headers (1001 were set)');
  });
  test('an ordinary state passes', () => {
    expect(() => checkResponseState({ ...base(), headers: [['X-A', 'b'], ['Set-Cookie', 'a=1']], redirect: '/x' })).not.toThrow();
  });
});

test("a thrown value's long `stack` is read in bounded time: the error answers at once", async () => {
  const request = require('supertest');
  const { app, router } = makeApp({
    apps: { a: { scripts: { 's.js': "export function fn() { throw { message: 'x', stack: '    at ' + 'a ('.repeat(200000) + 'x' } }" }, apis: [{ path: 'p', call: { script: 's.js', function: 'fn' }, returnType: 'JSON' }] } },
  });
  try {
    const t0 = Date.now();
    const res = await request(app).get('/web0/api/a/p');
    expect(res.status).toBe(500);
    expect(res.body.message).toBe('x');
    expect(Date.now() - t0).toBeLessThan(5000); // (reading it as frames took 35 s)
  } finally {
    await router.close();
  }
});
