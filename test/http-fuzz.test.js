'use strict';
// A seeded fuzzer of the HTTP inputs the router reads: methods, paths, query strings, headers
// (repeated, non-ASCII, cookies), Content-Type variants and charsets, Content-Encoding, bodies
// (BOM, invalid UTF-8, deep JSON, huge numbers, duplicate keys, urlencoded __proto__ / constructor /
// bracketed names). Every request of a run goes over ONE keep-alive connection, so that a request
// answered before its body was read (404, 405, 413, 415) that desynchronised the connection fails
// the requests after it. Invariants checked for each: an answer always comes (no hang), never a 5xx;
// a 4xx is the library's JSON error body; a 200 shows the script exactly what was sent; and neither
// the host's nor the sandbox's Object.prototype is polluted. Run against the router in an Express
// app and against the standalone server (`scriptable-api serve`), which also gets byte-level
// mutations of raw requests (each followed by a valid one on its connection). Deterministic: the
// seeds are fixed, and a failure names the case's number and the request.
const http = require('node:http');
const net = require('node:net');
const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');
const zlib = require('node:zlib');
const cookie = require('cookie');
const request = require('supertest');
const { makeApp } = require('./helpers/app');
const { startServer } = require('../dist/cjs/cli/serve');

/** mulberry32: a small seeded PRNG (deterministic runs). */
function prng(seed) {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

const ECHO = `export function fn(ctx) {
  const r = ctx.request;
  return {
    method: ctx.method, url: ctx.url, headers: ctx.headers, cookies: ctx.cookies, query: ctx.query, body: ctx.body,
    params: r.getParameterMap(), queryString: r.getQueryString(), uri: r.getRequestURI(), contentType: r.getContentType(),
    polluted: ({}).polluted !== undefined || Object.prototype.polluted !== undefined || [].polluted !== undefined,
  };
}`;

const QUERY_NAMES = ['a', 'a[]', 'a[b]', '__proto__', '__proto__[polluted]', 'constructor', 'constructor[prototype][polluted]', 'toString', 'hasOwnProperty', 'polluted', 'é', '%', 'x+y', ''];
const QUERY_VALUES = ['1', '', 'x y', '%zz', '%', '%e0%a4%a', '%ff', '%00', '%2F..%2F', 'a=b', '☃', '%E2%98%83', '+', '1e999', '[object Object]'];
const HEADER_VALUES = ['v', '', ' spaced ', 'caf\u00e9', '\u00ff\u00fe', 'a, b', 'a;b', '"quoted"', 'x'.repeat(2000)];
const COOKIES = ['a=1', 'a=2', '__proto__=x', 'constructor=y', 'b=%zz', 'c="q"', 'd', '=v', 'e=%E2%98%83', 'toString=t', 'polluted=1'];
const CHARSETS = [undefined, 'utf-8', 'UTF-8', '"utf-8"', 'iso-8859-1', 'us-ascii', 'utf-16le', 'windows-1252', 'shift_jis'];
const TYPES = ['text/plain', 'application/json', 'application/x-www-form-urlencoded', 'application/octet-stream', 'text/csv', 'APPLICATION/JSON', 'x/y', ''];

function pick(rnd, list) {
  return list[Math.floor(rnd() * list.length)];
}

function bodyText(rnd, type) {
  switch (Math.floor(rnd() * 8)) {
    case 0:
      return '';
    case 1:
      return '\ufeff{"a":1}';
    case 2:
      return `${'['.repeat(3000)}${']'.repeat(3000)}`;
    case 3:
      return '{"n":123456789012345678901234567890,"f":1e400,"a":1,"a":2,"__proto__":{"polluted":1}}';
    case 4: {
      const pairs = [];
      for (let i = 0, n = 1 + Math.floor(rnd() * 6); i < n; i++) pairs.push(`${encodeURIComponent(pick(rnd, QUERY_NAMES))}=${pick(rnd, QUERY_VALUES)}`);
      return pairs.join('&');
    }
    case 5:
      return 'caf\u00e9 \u2603 \ud83d\ude00';
    case 6:
      return type.includes('urlencoded') ? '__proto__[polluted]=1&constructor[prototype][polluted]=1&a[]=1&a[b]=2&a=3' : 'plain';
    default:
      return 'x'.repeat(Math.floor(rnd() * 3000));
  }
}

/** The bytes of a body in a charset as a client would send them (text in the charset, or raw invalid bytes). */
function encodeBody(rnd, text, charset) {
  const cs = charset?.replace(/"/g, '').toLowerCase();
  if (rnd() < 0.1) return Buffer.concat([Buffer.from(text, 'utf8'), Buffer.from([0xff, 0xfe, 0xc3])]); // invalid UTF-8
  if (cs === 'iso-8859-1' || cs === 'windows-1252') return Buffer.from(text.replace(/[^\x00-\xff]/g, '?'), 'latin1');
  if (cs === 'us-ascii') return Buffer.from(text.replace(/[^\x00-\x7f]/g, '?'), 'latin1');
  if (cs === 'utf-16le') return Buffer.from(text, 'utf16le');
  if (cs === 'shift_jis') return Buffer.from(text.replace(/[^\x00-\x7f]/g, '?'), 'latin1');
  return Buffer.from(text, 'utf8');
}

/** What the script must see as ctx.body for these bytes (decoded as the README says). */
function decoded(bytes, charset) {
  const cs = charset?.replace(/"/g, '').toLowerCase();
  if (cs === 'iso-8859-1') return bytes.toString('latin1');
  if (cs === 'us-ascii') return bytes.toString('ascii');
  if (cs === 'utf-16le') return bytes.toString('utf16le');
  if (cs === 'windows-1252' || cs === 'shift_jis') return require('iconv-lite').decode(bytes, cs);
  return bytes.toString('utf8');
}

const ENCODINGS = {
  gzip: (b) => zlib.gzipSync(b),
  'x-gzip': (b) => zlib.gzipSync(b),
  deflate: (b) => zlib.deflateSync(b),
  br: (b) => zlib.brotliCompressSync(b),
  identity: (b) => b,
  GZIP: (b) => zlib.gzipSync(b),
  'gzip, br': (b) => zlib.brotliCompressSync(zlib.gzipSync(b)),
  zstd: (b) => b, // (not one the router decodes: 415)
};

/** The query as the script sees it: URLSearchParams pairs, a repeated name as a list. */
function expectedQuery(qs) {
  const q = {};
  if (!qs) return q;
  for (const [k, v] of new URLSearchParams(qs)) {
    if (!Object.prototype.hasOwnProperty.call(q, k)) Object.defineProperty(q, k, { value: v, enumerable: true, writable: true, configurable: true });
    else if (Array.isArray(q[k])) q[k].push(v);
    else q[k] = [q[k], v];
  }
  return q;
}

/** One random request: { method, path, headers (node's array form for repeats), body?, expect }. */
function makeCase(rnd, i) {
  const method = pick(rnd, ['GET', 'POST', 'POST', 'PUT', 'PATCH', 'DELETE', 'OPTIONS', 'HEAD', 'PROPFIND', 'M-SEARCH', 'TRACE']);
  const route = pick(rnd, ['p', 'p', 'p', 'p', 'post-only', 'missing', 'p/', '%70', 'p%zz', '%E0%A4%A', 'p/../p', 'p;x=1']);
  const pairs = [];
  for (let j = 0, n = Math.floor(rnd() * 6); j < n; j++) {
    const name = pick(rnd, QUERY_NAMES);
    pairs.push(`${rnd() < 0.5 ? encodeURIComponent(name) : name.replace(/[^\x21-\x7e]/g, encodeURIComponent)}=${pick(rnd, QUERY_VALUES).replace(/[^\x21-\x7e]/g, encodeURIComponent)}`);
  }
  const qs = pairs.length ? pairs.join('&') : rnd() < 0.2 ? '' : null;
  const path = `/web0/api/app1/${route}${qs === null ? '' : `?${qs}`}`;
  const headers = { 'x-case': String(i) };
  if (rnd() < 0.5) headers['x-fuzz'] = rnd() < 0.3 ? [pick(rnd, HEADER_VALUES), pick(rnd, HEADER_VALUES)] : pick(rnd, HEADER_VALUES);
  if (rnd() < 0.4) {
    const jar = [];
    for (let j = 0, n = 1 + Math.floor(rnd() * 4); j < n; j++) jar.push(pick(rnd, COOKIES));
    headers.cookie = rnd() < 0.3 ? [jar.join('; '), pick(rnd, COOKIES)] : jar.join('; ');
  }
  let body;
  if (!['GET', 'HEAD', 'OPTIONS', 'TRACE'].includes(method) || rnd() < 0.1) {
    const type = pick(rnd, TYPES);
    const charset = type ? pick(rnd, CHARSETS) : undefined; // (a charset without a type is declared nowhere)
    if (type) headers['content-type'] = charset ? `${type}; charset=${charset}${rnd() < 0.2 ? '; foo=bar' : ''}` : type;
    const text = bodyText(rnd, type);
    body = encodeBody(rnd, text, charset);
    headers['x-charset'] = String(charset ?? '');
    if (method !== 'TRACE' && body.length > 0 && rnd() < 0.25) {
      const enc = pick(rnd, Object.keys(ENCODINGS));
      headers['content-encoding'] = enc;
      headers['x-plain-length'] = String(body.length);
      headers['x-plain'] = body.toString('base64').length < 3000 ? body.toString('base64') : '';
      body = ENCODINGS[enc](body);
    }
    if (rnd() < 0.3) headers['transfer-encoding'] = 'chunked';
    else headers['content-length'] = String(body.length);
  }
  return { method, path, route, qs, headers, body };
}

/** Sends one request on the agent (one keep-alive socket) and reads the answer whole. */
function send(port, agent, c) {
  return new Promise((resolve, reject) => {
    const req = http.request({ host: '127.0.0.1', port, method: c.method, path: c.path, headers: c.headers, agent }, (res) => {
      const chunks = [];
      res.on('data', (d) => chunks.push(d));
      res.on('end', () => resolve({ status: res.statusCode, headers: res.headers, text: Buffer.concat(chunks).toString('utf8') }));
      res.on('error', reject);
    });
    req.on('socket', (s) => (c.socket = s));
    req.on('error', reject);
    req.setTimeout(20_000, () => req.destroy(new Error(`case ${c.headers['x-case']}: no answer in 20 s`)));
    if (c.body !== undefined) {
      if (c.headers['transfer-encoding'] === 'chunked' && c.body.length > 2) {
        req.write(c.body.subarray(0, 1));
        req.end(c.body.subarray(1));
      } else req.end(c.body);
    } else req.end();
  });
}

function checkError(c, r) {
  const err = JSON.parse(r.text);
  expect(typeof err.message).toBe('string');
  expect(Number.isInteger(err.code)).toBe(true);
  expect(err.requestId).toBe(r.headers['x-request-id']);
  expect(r.headers['content-type']).toMatch(/^application\/json/);
  return err;
}

/** What the script must have seen for a request it answered. */
function checkEcho(c, r) {
  const seen = JSON.parse(r.text);
  expect(seen.polluted).toBe(false);
  expect(seen.method).toBe(c.method);
  expect(seen.url).toBe(c.path);
  expect(seen.queryString).toBe(c.qs);
  expect(seen.uri).toBe(c.path.split('?')[0]);
  expect(seen.query).toEqual(expectedQuery(c.qs));
  const fuzz = c.headers['x-fuzz'];
  if (fuzz !== undefined) expect(seen.headers['x-fuzz']).toBe(Array.isArray(fuzz) ? fuzz.map((v) => v.trim()).join(', ') : fuzz.trim());
  expect(seen.contentType).toBe(c.headers['content-type'] ?? null);
  // (cookies: the Cookie headers joined by '; ', each pair decoded by the `cookie` package, the first of a name kept)
  const jar = c.headers.cookie === undefined ? undefined : [].concat(c.headers.cookie).join('; ');
  expect(seen.cookies).toEqual(jar === undefined ? {} : { ...cookie.parse(jar) });
  if (c.body === undefined) return;
  const enc = c.headers['content-encoding'];
  let bytes = c.body;
  if (enc !== undefined && enc.toLowerCase() !== 'identity') {
    if (c.headers['x-plain'] === '') {
      expect(Buffer.byteLength(seen.body, 'utf8')).toBeGreaterThan(0);
      return;
    }
    bytes = Buffer.from(c.headers['x-plain'], 'base64');
  }
  const want = decoded(bytes, c.headers['x-charset'] || undefined);
  if (seen.body !== want) throw new Error(`ctx.body differs from what was sent: ${JSON.stringify(seen.body.slice(0, 80))} for ${JSON.stringify(want.slice(0, 80))}`);
}

const API = (path, extra = {}) => ({ path, call: { script: 'main.js', function: 'fn' }, returnType: 'JSON', ...extra });

/** The router in an Express app of that major version (test/helpers/app.js). */
async function inExpress(express) {
  const x = makeApp({ express, apps: { app1: { scripts: { 'main.js': ECHO }, apis: [API('p'), API('post-only', { methods: ['POST'] })] } }, router: { logger: false, bodyLimit: '8kb' } });
  await x.router.ready();
  const server = http.createServer(x.app);
  await new Promise((r) => server.listen(0, '127.0.0.1', r));
  return {
    port: server.address().port,
    close: async () => {
      await x.router.close();
      await new Promise((r) => server.close(r));
    },
  };
}

/** The router in Express 5 and 4, or the standalone server (`scriptable-api serve`) over a folder of the same app. */
const HOSTS = {
  express: () => inExpress(5),
  express4: () => inExpress(4),
  async serve() {
    const root = fs.mkdtempSync(path.join(os.tmpdir(), 'sapi-fuzz-'));
    const write = (rel, text) => {
      fs.mkdirSync(path.dirname(path.join(root, rel)), { recursive: true });
      fs.writeFileSync(path.join(root, rel), text);
    };
    write('app1/scripts/main.js', ECHO);
    write('app1/apis/p.json', JSON.stringify(API('p')));
    write('app1/apis/post-only.json', JSON.stringify(API('post-only', { methods: ['POST'] })));
    const silent = { debug() {}, info() {}, warn() {}, error() {} };
    const running = await startServer({ root, port: 0, host: '127.0.0.1', mount: '/web0/api', index: true, quiet: false, shutdownTimeoutMs: 10000, router: { workers: 1, bodyLimit: '8kb' } }, silent);
    await running.router.ready();
    return {
      port: running.server.address().port,
      close: async () => {
        await running.shutdown();
        fs.rmSync(root, { recursive: true, force: true });
      },
    };
  },
};

describe.each(Object.keys(HOSTS))('HTTP input fuzzing (seeded), %s', (host) => {
  let port;
  let close;
  beforeAll(async () => {
    ({ port, close } = await HOSTS[host]());
  });
  afterAll(() => close());

  test.each([1, 2, 3])('seed %i: 120 random requests on one keep-alive connection', async (seed) => {
    const rnd = prng(seed * 7919);
    const agent = new http.Agent({ keepAlive: true, maxSockets: 1 });
    const sockets = new Set();
    try {
      for (let i = 0; i < 120; i++) {
        const c = makeCase(rnd, i);
        const r = await send(port, agent, c);
        sockets.add(c.socket);
        const where = `case ${i} (seed ${seed}): ${c.method} ${c.path} ${JSON.stringify({ ...c.headers, 'x-plain': undefined })} → ${r.status} ${r.text.slice(0, 300)}`;
        try {
          expect(r.status).toBeLessThan(500);
          if (c.method === 'HEAD') continue;
          if (c.headers['content-encoding'] === 'zstd' && r.status < 400) throw new Error('a body in an unknown coding was run');
          if (r.status >= 400) checkError(c, r);
          else checkEcho(c, r);
        } catch (e) {
          e.message = `${where}\n${e.message}`;
          throw e;
        }
      }
    } finally {
      agent.destroy();
    }
    expect(sockets.size).toBeLessThanOrEqual(1);
    expect(Object.prototype.polluted).toBeUndefined();
    expect({}.polluted).toBeUndefined();
  });
});

describe('Content-Encoding of a request body', () => {
  let server;
  let port;
  let router;
  beforeAll(async () => {
    const x = makeApp({
      apps: { app1: { scripts: { 'main.js': 'export function fn(ctx) { return { body: ctx.body, a: ctx.request.getParameter("a") } }' }, apis: [{ path: 'p', call: { script: 'main.js', function: 'fn' }, returnType: 'JSON' }] } },
      router: { logger: false, bodyLimit: '64kb' },
    });
    router = x.router;
    server = http.createServer(x.app);
    await new Promise((r) => server.listen(0, '127.0.0.1', r));
    port = server.address().port;
  });
  afterAll(async () => {
    await router.close();
    await new Promise((r) => server.close(r));
  });
  const post = (headers, body) =>
    send(port, false, { method: 'POST', path: '/web0/api/app1/p', headers: { 'content-length': String(body.length), 'x-case': 'ce', ...headers }, body }).then((r) => ({ ...r, json: JSON.parse(r.text) }));

  test('gzip, deflate and br bodies reach the script decoded (JSON, text and forms), as body-parser reads them', async () => {
    const json = await post({ 'content-type': 'application/json', 'content-encoding': 'gzip' }, zlib.gzipSync('{"a":"caf\u00e9"}'));
    expect(json.status).toBe(200);
    expect(json.json.body).toBe('{"a":"caf\u00e9"}');
    const form = await post({ 'content-type': 'application/x-www-form-urlencoded', 'content-encoding': 'Deflate' }, zlib.deflateSync('a=%E2%98%83'));
    expect(form.json).toEqual({ body: 'a=%E2%98%83', a: '\u2603' });
    const br = await post({ 'content-type': 'text/plain; charset=iso-8859-1', 'content-encoding': 'br' }, zlib.brotliCompressSync(Buffer.from('caf\u00e9', 'latin1')));
    expect(br.json.body).toBe('caf\u00e9');
  });

  test('a body that inflates past bodyLimit is 413 (a zip bomb is not inflated whole), one that does not inflate 400', async () => {
    const bomb = zlib.gzipSync(Buffer.alloc(50 * 1024 * 1024));
    expect(bomb.length).toBeLessThan(64 * 1024);
    const big = await post({ 'content-type': 'text/plain', 'content-encoding': 'gzip' }, bomb);
    expect([big.status, big.json.code]).toEqual([413, 270102]);
    const bad = await post({ 'content-type': 'text/plain', 'content-encoding': 'gzip' }, Buffer.from('not gzip at all'));
    expect([bad.status, bad.json.code]).toEqual([400, 270103]);
    expect(bad.json.requestId).toBe(bad.headers['x-request-id']);
  });

  test('a transfer coding before chunked (Transfer-Encoding: gzip, chunked) is undone too; one the router does not know is 415', async () => {
    const agent = new http.Agent({ keepAlive: true, maxSockets: 1 });
    try {
      const gz = await send(port, agent, { method: 'POST', path: '/web0/api/app1/p', headers: { 'content-type': 'text/plain', 'transfer-encoding': 'gzip, chunked' }, body: zlib.gzipSync('caf\u00e9') });
      expect([gz.status, JSON.parse(gz.text).body]).toEqual([200, 'caf\u00e9']);
      // (content coding first, then the transfer coding: undone in the other order)
      const both = await send(port, agent, { method: 'POST', path: '/web0/api/app1/p', headers: { 'content-type': 'text/plain', 'content-encoding': 'br', 'transfer-encoding': 'deflate, chunked' }, body: zlib.deflateSync(zlib.brotliCompressSync('both')) });
      expect([both.status, JSON.parse(both.text).body]).toEqual([200, 'both']);
      const foo = await send(port, agent, { method: 'POST', path: '/web0/api/app1/p', headers: { 'content-type': 'text/plain', 'transfer-encoding': 'foo, chunked' }, body: Buffer.from('hello') });
      expect(foo.status).toBe(415);
      expect(JSON.parse(foo.text)).toMatchObject({ code: 270108, message: "Unsupported Transfer-Encoding 'foo' (gzip, deflate, br or identity)" });
      const after = await send(port, agent, { method: 'POST', path: '/web0/api/app1/p', headers: { 'content-type': 'text/plain', 'transfer-encoding': 'chunked' }, body: Buffer.from('plain') });
      expect(JSON.parse(after.text).body).toBe('plain');
    } finally {
      agent.destroy();
    }
  });

  test('an unknown coding is 415 UNSUPPORTED_ENCODING, and so is a compressed multipart upload; the connection stays in step', async () => {
    const agent = new http.Agent({ keepAlive: true, maxSockets: 1 });
    try {
      const unknown = await send(port, agent, { method: 'POST', path: '/web0/api/app1/p', headers: { 'content-type': 'text/plain', 'content-encoding': 'zstd', 'content-length': '5' }, body: Buffer.from('hello') });
      expect(unknown.status).toBe(415);
      expect(JSON.parse(unknown.text)).toMatchObject({ code: 270108, message: expect.stringContaining("'zstd'") });
      const body = Buffer.from('--b\r\nContent-Disposition: form-data; name="a"\r\n\r\n1\r\n--b--\r\n');
      const multipart = await send(port, agent, { method: 'POST', path: '/web0/api/app1/p', headers: { 'content-type': 'multipart/form-data; boundary=b', 'content-encoding': 'gzip', 'content-length': String(zlib.gzipSync(body).length) }, body: zlib.gzipSync(body) });
      expect([multipart.status, JSON.parse(multipart.text).code]).toEqual([415, 270108]);
      const after = await send(port, agent, { method: 'POST', path: '/web0/api/app1/p', headers: { 'content-type': 'text/plain', 'content-encoding': 'identity', 'content-length': '2' }, body: Buffer.from('ok') });
      expect(JSON.parse(after.text).body).toBe('ok');
    } finally {
      agent.destroy();
    }
  });
});

/** Byte-level mutations of a valid request: what a broken client, a scanner or a smuggling attempt sends. */
const MUTATIONS = [
  (t, r) => t.slice(0, Math.floor(r() * t.length)) + pick(r, ['\r', '\n', '\x00', ' ', '\t', '\x7f', '\xff', ':', '"', '%', '\r\n', '\r\n ', ';', ',']) + t.slice(Math.floor(r() * t.length)),
  (t, r) => t.replace(/\r\n(?=[^\r])/, `\r\n${pick(r, ['Host: other', 'Content-Length: 3', 'Content-Length: -1', 'Content-Length: 1e3', 'Content-Length: 0x10', 'Transfer-Encoding: chunked', 'Transfer-Encoding: xchunked', 'Transfer-Encoding: chunked, identity', 'Transfer-Encoding : chunked', 'Expect: 100-continue', 'Expect: nope', 'Content-Encoding: gzip', 'Connection: Upgrade\r\nUpgrade: h2c', 'X-A: a\r\n\tfolded', 'Cookie: __proto__=1; a=%zz', 'Content-Type: multipart/form-data; boundary=z'])}\r\n`),
  (t) => t.replace('HTTP/1.1', pick(prng(t.length), ['HTTP/1.0', 'HTTP/0.9', 'HTTP/2.0', 'HTTP/1.10', 'http/1.1', 'HTTP/1.1 x'])),
  (t, r) => t.replace(/^[A-Z]+/, pick(r, ['get', 'G ET', 'PRI', 'CONNECT', 'OPTIONS', 'HEAD', 'ACL', 'PURGE', 'X'.repeat(100)])),
  (t, r) => t.replace(/ \/[^ ]*/, ` ${pick(r, ['*', '/web0/api/app1/p#f', '/web0/api/app1\\p', '//web0/api/app1/p', 'http://h/web0/api/app1/p', 'web0/api/app1/p', '/web0/api/app1/p?' + 'a=1&'.repeat(3000), '/web0/api/%', '/web0/api/app1/p%2', '/web0/api/app1/%2e%2e%2fp'])}`),
  (t, r) => t.slice(0, Math.floor(r() * t.length)), // (cut short: the client stops sending)
];

/** The responses on a connection, in order (100 Continue left out); each has a Content-Length or none at all (a body-less 417 or 400 of Node.js). */
function responsesIn(text) {
  const out = [];
  let rest = text;
  for (;;) {
    const start = rest.indexOf('HTTP/1.1 ');
    const end = rest.indexOf('\r\n\r\n', start);
    if (start < 0 || end < 0) return out;
    const [statusLine, ...lines] = rest.slice(start, end).split('\r\n');
    const headers = {};
    for (const line of lines) headers[line.slice(0, line.indexOf(':')).toLowerCase()] = line.slice(line.indexOf(':') + 1).trim();
    const length = headers['transfer-encoding'] === 'chunked' ? rest.indexOf('0\r\n\r\n', end + 4) - end : Number(headers['content-length'] ?? 0);
    const status = Number(statusLine.split(' ')[1]);
    if (status !== 100) out.push({ status, headers, body: rest.slice(end + 4, end + 4 + length) });
    rest = rest.slice(end + 4 + Math.max(0, length));
  }
}

describe.each(['express', 'serve'])('raw request mutations (seeded), %s', (host) => {
  let port;
  let close;
  beforeAll(async () => {
    ({ port, close } = await HOSTS[host]());
  });
  afterAll(() => close());

  /** Writes `data` on a new connection; resolves with what it read once the server closes it (or after 10 s: then `open`). */
  const exchange = (data) =>
    new Promise((resolve) => {
      const socket = net.connect(port, '127.0.0.1');
      let read = '';
      const timer = setTimeout(() => {
        socket.destroy();
        resolve({ read, open: true });
      }, 10_000);
      socket.on('connect', () => socket.write(Buffer.from(data, 'latin1')));
      socket.on('data', (d) => (read += d.toString('latin1')));
      socket.on('error', () => undefined);
      socket.on('close', () => {
        clearTimeout(timer);
        resolve({ read, open: false });
      });
    });

  test('60 mutated requests, each followed by a valid one on its connection: an answer, never a 5xx; a 4xx is the JSON error body (serve: always)', async () => {
    const rnd = prng(4242);
    const valid = (q) => `POST /web0/api/app1/p?m=${q} HTTP/1.1\r\nHost: x\r\nContent-Type: text/plain\r\nContent-Length: 5\r\n\r\nhello`;
    for (let i = 0; i < 60; i++) {
      const mutated = pick(rnd, MUTATIONS)(valid(i), rnd);
      const { read, open } = await exchange(`${mutated}GET /web0/api/app1/p?after=${i} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n`);
      const where = `mutation ${i}: ${JSON.stringify(mutated.slice(0, 300))} → ${JSON.stringify(read.slice(0, 600))}`;
      // (a request cut short waits for the rest until the server's timeout: the connection may stay open)
      const answers = responsesIn(read);
      if (answers.some((a) => a.status >= 500)) throw new Error(`a 5xx: ${where}`);
      if (!open && answers.length === 0 && host === 'serve') throw new Error(`closed without an answer: ${where}`);
      if (host === 'serve' && answers.some((a) => a.status >= 400 && !/^application\/json/.test(a.headers['content-type'] ?? ''))) throw new Error(`a 4xx without the JSON error body: ${where}`);
      if (answers.some((a) => a.status >= 400 && a.headers['content-type']?.startsWith('application/json') && JSON.parse(a.body).requestId !== a.headers['x-request-id'])) throw new Error(`an error body that is not the library's: ${where}`);
    }
    // the server still answers
    const { read } = await exchange('GET /web0/api/app1/p?last=1 HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n');
    expect(read).toMatch(/^HTTP\/1\.1 200 /);
    expect(Object.prototype.polluted).toBeUndefined();
  }, 120_000);
});

describe('the fields of an urlencoded form are bounded as a multipart form\'s are (upload.fields)', () => {
  const routers = [];
  afterAll(() => Promise.all(routers.map((r) => r.close())));
  const app = (upload) => {
    const x = makeApp({ apps: { app1: { scripts: { 'main.js': 'export function fn(ctx) { return Object.keys(ctx.request.getParameterMap()).length }' }, apis: [API('p')] } }, router: { logger: false, ...(upload ? { upload } : {}) } });
    routers.push(x.router);
    return x.app;
  };
  const form = (n) => Array.from({ length: n }, (_, i) => `k${i}=${i}`).join('&');
  const post = (a, body) => request(a).post('/web0/api/app1/p').set('Content-Type', 'application/x-www-form-urlencoded').send(body);

  test('1000 fields (the default, as body-parser\'s parameterLimit) are read; 1001 are 413 BODY_TOO_LARGE before any script runs', async () => {
    const a = app();
    const ok = await post(a, form(1000));
    expect([ok.status, ok.body]).toEqual([200, 1000]);
    // (empty pairs are no fields: URLSearchParams skips them)
    expect((await post(a, `&&${form(1000)}&&`)).body).toBe(1000);
    const over = await post(a, form(1001));
    expect(over.status).toBe(413);
    expect(over.body).toMatchObject({ code: 270102, message: 'The form has more than upload.fields (1000) fields' });
    // (a 1 MB form of 120,000 fields held the host's event loop for about a second: parsed, copied and sent to the worker)
    expect((await post(a, form(120_000).slice(0, 1_000_000))).status).toBe(413);
  });

  test('upload.fields sets the bound', async () => {
    const a = app({ fields: 3 });
    expect((await post(a, 'a=1&b=2&a=3')).body).toBe(2);
    expect((await post(a, 'a=1&b=2&c=3&d=4')).status).toBe(413);
  });
});
