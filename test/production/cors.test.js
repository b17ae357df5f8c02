'use strict';
// CORS per API and per router: preflights are the router's, never the script's; actual responses
// (errors too) carry the Access-Control-* headers.
const request = require('supertest');
const { makeApp } = require('../helpers/app');
const { MemoryRegistry, ConfigError } = require('../..');

const routers = [];
afterAll(() => Promise.all(routers.map((r) => r.close())));

// The script counts its runs in a header-less way: each run returns the number of runs so far.
const COUNTER = 'let runs = 0; export function fn(ctx) { runs++; return { runs, method: ctx.method } }';
const THROWS = 'export function fn() { throw new Error("boom") }';
const ORIGIN = 'https://app.example.com';

function setup(routerCors, apis) {
  const x = makeApp({
    router: routerCors === undefined ? {} : { cors: routerCors },
    apps: { app1: { scripts: { 'main.js': COUNTER, 'throws.js': THROWS }, apis } },
  });
  routers.push(x.router);
  return x;
}

const api = (path, extra = {}) => ({ path, call: { script: 'main.js', function: 'fn' }, returnType: 'JSON', ...extra });

function preflight(app, path, method = 'POST', headers = 'content-type, x-token', origin = ORIGIN) {
  return request(app).options(path).set('Origin', origin).set('Access-Control-Request-Method', method).set('Access-Control-Request-Headers', headers);
}

test('a preflight on an API that allows every method is answered by the router (204), and the script never runs', async () => {
  const { app } = setup(undefined, [api('all', { cors: { origins: [ORIGIN], maxAge: 600, credentials: true } })]);
  const pre = await preflight(app, '/web0/api/app1/all');
  expect(pre.status).toBe(204);
  expect(pre.headers['access-control-allow-origin']).toBe(ORIGIN);
  expect(pre.headers['access-control-allow-credentials']).toBe('true');
  expect(pre.headers['access-control-allow-methods']).toBe('GET,HEAD,PUT,PATCH,POST,DELETE');
  expect(pre.headers['access-control-allow-headers']).toBe('content-type, x-token');
  expect(pre.headers['access-control-max-age']).toBe('600');
  expect(pre.headers.vary).toMatch(/Origin/);
  expect(pre.text).toBe('');
  // the script's own counter shows it ran once, for this request only
  const res = await request(app).post('/web0/api/app1/all').set('Origin', ORIGIN);
  expect(res.body).toEqual({ runs: 1, method: 'POST' });
  expect(res.headers['access-control-allow-origin']).toBe(ORIGIN);
  expect(res.headers['access-control-expose-headers']).toMatch(/X-Request-Id/);
  // a plain OPTIONS request (not a preflight) still reaches the script
  const plain = await request(app).options('/web0/api/app1/all');
  expect(plain.body).toEqual({ runs: 2, method: 'OPTIONS' });
});

test('a preflight on a GET-only API gets 204 (not 405) with the API methods; the actual POST is 405 with CORS headers', async () => {
  const { app } = setup({ origins: '*' }, [api('get', { methods: ['GET'] })]);
  const pre = await preflight(app, '/web0/api/app1/get', 'GET');
  expect(pre.status).toBe(204);
  expect(pre.headers['access-control-allow-origin']).toBe('*');
  expect(pre.headers['access-control-allow-methods']).toBe('GET');
  const post = await request(app).post('/web0/api/app1/get').set('Origin', ORIGIN);
  expect(post.status).toBe(405);
  expect(post.body.code).toBe(270101);
  expect(post.headers['access-control-allow-origin']).toBe('*');
});

test('errors carry CORS headers: 404 (router default), 429, 500', async () => {
  const { app } = setup({ origins: [ORIGIN] }, [
    api('limited', { rateLimit: { requestsPerSecond: 0.001, identifier: 'global' } }),
    { path: 'throws', call: { script: 'throws.js', function: 'fn' }, returnType: 'JSON' },
  ]);
  const missing = await request(app).get('/web0/api/app1/nope').set('Origin', ORIGIN);
  expect(missing.status).toBe(404);
  expect(missing.headers['access-control-allow-origin']).toBe(ORIGIN);
  expect((await request(app).get('/web0/api/app1/limited').set('Origin', ORIGIN)).status).toBe(200);
  const limited = await request(app).get('/web0/api/app1/limited').set('Origin', ORIGIN);
  expect(limited.status).toBe(429);
  expect(limited.headers['access-control-allow-origin']).toBe(ORIGIN);
  const failed = await request(app).get('/web0/api/app1/throws').set('Origin', ORIGIN);
  expect(failed.status).toBe(500);
  expect(failed.headers['access-control-allow-origin']).toBe(ORIGIN);
  // an origin not in the list gets no Access-Control-Allow-Origin
  const other = await request(app).get('/web0/api/app1/throws').set('Origin', 'https://evil.example');
  expect(other.headers['access-control-allow-origin']).toBeUndefined();
});

test('per-API settings override the router default field by field; cors: false turns it off; wildcard subdomains', async () => {
  const { app } = setup({ origins: ['https://*.example.com'], exposeHeaders: ['X-Request-Id'] }, [
    api('default'),
    api('own', { cors: { origins: ['https://other.test'], credentials: true } }),
    api('off', { cors: false }),
  ]);
  const sub = await request(app).get('/web0/api/app1/default').set('Origin', 'https://a.b.example.com');
  expect(sub.headers['access-control-allow-origin']).toBe('https://a.b.example.com');
  expect((await request(app).get('/web0/api/app1/default').set('Origin', 'https://example.com.evil')).headers['access-control-allow-origin']).toBeUndefined();
  const own = await request(app).get('/web0/api/app1/own').set('Origin', 'https://other.test');
  expect(own.headers['access-control-allow-origin']).toBe('https://other.test');
  expect(own.headers['access-control-allow-credentials']).toBe('true');
  expect(own.headers['access-control-expose-headers']).toBe('X-Request-Id'); // from the router default
  const off = await request(app).get('/web0/api/app1/off').set('Origin', 'https://a.example.com');
  expect(off.status).toBe(200);
  expect(off.headers['access-control-allow-origin']).toBeUndefined();
  const offPre = await preflight(app, '/web0/api/app1/off', 'GET', 'x-a', 'https://a.example.com');
  expect(offPre.status).toBe(204); // still the router's, without permission: the browser refuses
  expect(offPre.headers['access-control-allow-origin']).toBeUndefined();
});

test('without any CORS configuration, no Access-Control headers and preflights still never reach the script', async () => {
  const { app } = setup(undefined, [api('p')]);
  const pre = await preflight(app, '/web0/api/app1/p');
  expect(pre.status).toBe(204);
  expect(pre.headers['access-control-allow-origin']).toBeUndefined();
  const res = await request(app).get('/web0/api/app1/p').set('Origin', ORIGIN);
  expect(res.body.runs).toBe(1);
  expect(res.headers['access-control-allow-origin']).toBeUndefined();
});

test('credentials with any origin echo the caller (browsers refuse * with credentials)', async () => {
  const { app } = setup({ origins: '*', credentials: true }, [api('p')]);
  const res = await request(app).get('/web0/api/app1/p').set('Origin', 'https://x.test');
  expect(res.headers['access-control-allow-origin']).toBe('https://x.test');
  expect(res.headers['access-control-allow-credentials']).toBe('true');
});

test('invalid cors settings are ConfigErrors naming the field', () => {
  const reg = new MemoryRegistry();
  const bad = (cors) => () => reg.putApi('a', api('p', { cors }));
  expect(bad({ origins: 'https://x.test' })).toThrow(ConfigError);
  expect(bad({ origins: 'https://x.test' })).toThrow(/api 'p'\.cors\.origins/);
  expect(bad({ origins: ['https://x.test/path'] })).toThrow(/cors\.origins/);
  expect(bad({ maxAge: -1 })).toThrow(/cors\.maxAge/);
  expect(bad({ methods: 'GET' })).toThrow(/cors\.methods/);
  expect(bad({ credentials: 'yes' })).toThrow(/cors\.credentials/);
  expect(bad({ origin: '*' })).toThrow(/cors\.origin: is not a field \(did you mean 'origins'\?\)/);
  expect(bad(true)).toThrow(/cors/);
  const { createApiRouter } = require('../..');
  expect(() => createApiRouter({ registry: reg, cors: false })).toThrow(/invalid cors: must be an object/);
  expect(() => createApiRouter({ registry: reg, cors: { headers: ['bad header'] } })).toThrow(/invalid cors\.headers/);
  // with credentials a browser reads '*' as a name (Fetch standard): nothing would be allowed or exposed
  expect(bad({ credentials: true, headers: ['x-token', '*'] })).toThrow(/api 'p'\.cors\.headers: cannot hold '\*' with credentials/);
  expect(bad({ credentials: true, methods: ['*'] })).toThrow(/cors\.methods: cannot hold '\*' with credentials/);
  expect(bad({ credentials: true, exposeHeaders: ['*'] })).toThrow(/cors\.exposeHeaders: cannot hold '\*' with credentials/);
  expect(() => createApiRouter({ registry: reg, cors: { credentials: true, exposeHeaders: ['*'] } })).toThrow(/invalid cors\.exposeHeaders: cannot hold/);
  expect(() => reg.putApi('a', api('p', { cors: { headers: ['*'], methods: ['*'], exposeHeaders: ['*'] } }))).not.toThrow();
});

test("an API's cors that is right alone but not with the router's (credentials and '*' from different levels) answers INVALID_API_DEFINITION naming both", async () => {
  const logged = [];
  const logger = { info() {}, warn() {}, error: (m) => logged.push(String(m)) };
  const x = makeApp({
    router: { cors: { credentials: true, origins: [ORIGIN] }, logger },
    apps: {
      app1: {
        scripts: { 'main.js': COUNTER },
        apis: [api('star', { cors: { methods: ['*'] } }), api('ok', { cors: { methods: ['GET', 'POST'] } }), api('off', { cors: { methods: ['*'], credentials: false } })],
      },
    },
  });
  routers.push(x.router);
  const star = await request(x.app).get('/web0/api/app1/star').set('Origin', ORIGIN);
  expect(star.status).toBe(500);
  expect(star.body.code).toBe(270600);
  expect(logged.join('\n')).toMatch(/api 'star'\.cors\.methods: cannot hold '\*' with credentials \(the router's cors\.credentials\)/);
  const pre = await preflight(x.app, '/web0/api/app1/star');
  expect(pre.status).toBe(500);
  // the same API with its own list, or turning credentials off, is served
  expect((await request(x.app).get('/web0/api/app1/ok').set('Origin', ORIGIN)).body).toEqual({ runs: 1, method: 'GET' });
  const off = await request(x.app).get('/web0/api/app1/off').set('Origin', ORIGIN);
  expect(off.status).toBe(200);
  expect(off.headers['access-control-allow-credentials']).toBeUndefined();

  // the reverse: '*' on the router, credentials on the API
  const y = makeApp({
    router: { cors: { headers: ['*'] }, logger },
    apps: { app1: { scripts: { 'main.js': COUNTER }, apis: [api('cred', { cors: { credentials: true, origins: [ORIGIN] } })] } },
  });
  routers.push(y.router);
  const cred = await request(y.app).get('/web0/api/app1/cred').set('Origin', ORIGIN);
  expect(cred.body.code).toBe(270600);
  expect(logged.at(-1)).toMatch(/cors\.headers: cannot hold '\*' with credentials \(api 'cred'\.cors\.credentials\)/);
});

test("a script's Vary header is added to the router's `Vary: Origin`, not put in its place", async () => {
  const x = makeApp({
    apps: {
      app1: {
        scripts: { 'v.js': 'export function fn(ctx) { ctx.response.setHeader("Vary", "Accept-Encoding"); return 1 }' },
        apis: [{ path: 'v', call: { script: 'v.js', function: 'fn' }, returnType: 'JSON', cors: { origins: [ORIGIN, 'https://b.example'] } }],
      },
    },
  });
  routers.push(x.router);
  const res = await request(x.app).get('/web0/api/app1/v').set('Origin', ORIGIN);
  expect(res.headers['access-control-allow-origin']).toBe(ORIGIN);
  expect(res.headers.vary.split(/,\s*/).sort()).toEqual(['Accept-Encoding', 'Origin']);
});

test("a script's Vary value that is not a list of header names goes out as set, as it does without CORS (it was a 500 HOST_ERROR)", async () => {
  const x = makeApp({
    apps: {
      app1: {
        scripts: { 'v.js': 'export function fn(ctx) { ctx.response.setHeader("X-A", "1"); ctx.response.setHeader("Vary", ctx.query.v); return 1 }' },
        apis: [
          { path: 'cors', call: { script: 'v.js', function: 'fn' }, returnType: 'JSON', cors: { origins: [ORIGIN] } },
          { path: 'plain', call: { script: 'v.js', function: 'fn' }, returnType: 'JSON' },
        ],
      },
    },
  });
  routers.push(x.router);
  for (const v of ['Accept-Encoding User-Agent', 'Accept;q=1', '@']) {
    const plain = await request(x.app).get('/web0/api/app1/plain').query({ v }).set('Origin', ORIGIN);
    expect([plain.status, plain.headers.vary]).toEqual([200, v]);
    const res = await request(x.app).get('/web0/api/app1/cors').query({ v }).set('Origin', ORIGIN);
    expect([res.status, res.headers.vary, res.headers['x-a'], res.headers['access-control-allow-origin']]).toEqual([200, `Origin, ${v}`, '1', ORIGIN]);
    expect(res.body).toBe(1);
  }
});

test('a custom registry that changes an API definition in place: its CORS is what the definition says at each request', async () => {
  const def = api('p', { cors: { origins: [ORIGIN] } });
  const x = makeApp({ registry: { getApi: () => def, getScript: () => COUNTER } });
  routers.push(x.router);
  const first = await preflight(x.app, '/web0/api/app1/p');
  expect([first.status, first.headers['access-control-allow-origin']]).toEqual([204, ORIGIN]);
  def.cors = { origins: ['https://other.example.com'] };
  const moved = await preflight(x.app, '/web0/api/app1/p', 'POST', 'content-type', 'https://other.example.com');
  expect([moved.status, moved.headers['access-control-allow-origin']]).toEqual([204, 'https://other.example.com']);
  expect((await request(x.app).get('/web0/api/app1/p').set('Origin', ORIGIN)).headers['access-control-allow-origin']).toBeUndefined();
  def.methods = ['PUT'];
  const put = await preflight(x.app, '/web0/api/app1/p', 'PUT', 'content-type', 'https://other.example.com');
  expect([put.status, put.headers['access-control-allow-methods']]).toEqual([204, 'PUT']);
});

test.each(['quickjs', 'vm2'])("a File response that fails after the script set Access-Control-* headers carries the router's CORS headers, not none (%s)", async (engine) => {
  const fs = require('node:fs');
  const os = require('node:os');
  const path = require('node:path');
  const sandboxDir = fs.mkdtempSync(path.join(os.tmpdir(), 'cors-file-'));
  fs.mkdirSync(path.join(sandboxDir, 'app1'));
  fs.writeFileSync(path.join(sandboxDir, 'app1', 'a.txt'), 'hello');
  try {
    const x = makeApp({
      router: { engine, sandboxDir, cors: { origins: [ORIGIN] } },
      apps: {
        app1: {
          scripts: {
            'f.js': `export function fn(ctx) {
              ctx.response.setHeader('Access-Control-Allow-Origin', ctx.headers.origin);
              ctx.response.setHeader('Access-Control-Expose-Headers', 'Content-Disposition, X-Request-Id');
              return { path: ctx.query.p, name: 'a.txt' };
            }`,
          },
          apis: [{ path: 'f', call: { script: 'f.js', function: 'fn' }, returnType: 'File' }],
        },
      },
    });
    routers.push(x.router);
    const ok = await request(x.app).get('/web0/api/app1/f').query({ p: 'a.txt' }).set('Origin', ORIGIN);
    expect([ok.status, ok.headers['access-control-allow-origin'], ok.headers['access-control-expose-headers']]).toEqual([200, ORIGIN, 'Content-Disposition, X-Request-Id']);
    const missing = await request(x.app).get('/web0/api/app1/f').query({ p: 'nope.txt' }).set('Origin', ORIGIN);
    expect([missing.status, missing.body.code]).toEqual([404, 270301]);
    expect(missing.headers['access-control-allow-origin']).toBe(ORIGIN);
    expect(missing.headers['access-control-expose-headers']).toBe('X-Request-Id,Retry-After,RateLimit,RateLimit-Policy');
    expect(missing.headers.vary).toBe('Origin');
    const failed = await request(x.app).get('/web0/api/app1/f').query({ p: 'a.txt' }).set('Origin', ORIGIN).set('If-Match', '"other"');
    expect(failed.status).toBe(412);
    expect(failed.headers['access-control-allow-origin']).toBe(ORIGIN);
    expect(failed.headers['access-control-expose-headers']).toBe('X-Request-Id,Retry-After,RateLimit,RateLimit-Policy');
  } finally {
    fs.rmSync(sandboxDir, { recursive: true, force: true });
  }
});

test("origins are compared in the form browsers send: a default port, capitals or an international name in the list still match; a query, fragment or user name is refused", async () => {
  const { app } = setup({ origins: ['HTTPS://App.Example.com:443', 'http://localhost:80', 'https://bücher.example', 'https://*.Example.org:443', 'capacitor://localhost'] }, [api('p')]);
  for (const origin of ['https://app.example.com', 'http://localhost', 'https://xn--bcher-kva.example', 'https://a.example.org', 'capacitor://localhost']) {
    const res = await request(app).get('/web0/api/app1/p').set('Origin', origin);
    expect([origin, res.headers['access-control-allow-origin'], res.headers.vary]).toEqual([origin, origin, 'Origin']);
    const pre = await preflight(app, '/web0/api/app1/p', 'PUT', 'x-a', origin);
    expect([origin, pre.status, pre.headers['access-control-allow-origin']]).toEqual([origin, 204, origin]);
  }
  for (const origin of ['https://app.example.com:8443', 'http://app.example.com', 'https://example.org']) {
    expect((await request(app).get('/web0/api/app1/p').set('Origin', origin)).headers['access-control-allow-origin']).toBeUndefined();
  }
  const reg = new MemoryRegistry();
  for (const origin of ['https://app.example.com?x=1', 'https://app.example.com#top', 'https://user@app.example.com', 'https://user:pw@app.example.com', 'https://app.example.com:99999']) {
    expect(() => reg.putApi('a', api('p', { cors: { origins: [origin] } }))).toThrow(/api 'p'\.cors\.origins/);
  }
});
