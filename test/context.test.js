'use strict';
// ctx (APIContext), ctx.request and ctx.response end to end: real HTTP requests through Express
// into the default engine and back.
const fs = require('node:fs');
const http = require('node:http');
const net = require('node:net');
const os = require('node:os');
const path = require('node:path');
const request = require('supertest');
const { oneApi } = require('./helpers/app');

const routers = [];
afterAll(() => Promise.all(routers.map((r) => r.close())));
function apiWith(engine, source, def, routerOpts, extra) {
  const x = oneApi(source, def, { engine, ...routerOpts }, extra);
  routers.push(x.router);
  return x;
}

describe.each(['quickjs', 'vm2'])('with the %s engine', (engine) => {
  const api = (source, def, routerOpts, extra) => apiWith(engine, source, def, routerOpts, extra);

  describe('APIContext fields', () => {
    const { app } = api(`export function fn(ctx) {
      return { headers: ctx.headers, cookies: ctx.cookies, query: ctx.query, body: ctx.body, url: ctx.url,
               appId: ctx.appId, path: ctx.path, method: ctx.method, parts: ctx.getParts().length };
    }`);

    test('every field of the spec', async () => {
      const res = await request(app)
        .post('/web0/api/app1/p?a=1&b=x&b=y&nested[k]=v')
        .set('X-Custom', 'Value')
        .set('X_Under', 'dropped')
        .set('Cookie', 'sid=abc; theme=dark')
        .set('Content-Type', 'text/plain')
        .send('raw body text');
      expect(res.status).toBe(200);
      const ctx = res.body;
      expect(ctx.headers['x-custom']).toBe('Value');
      expect(ctx.headers).not.toHaveProperty('x_under');
      expect(ctx.cookies).toEqual({ sid: 'abc', theme: 'dark' });
      expect(ctx.query).toEqual({ a: '1', b: ['x', 'y'], 'nested[k]': 'v' });
      expect(ctx.body).toBe('raw body text');
      expect(ctx.url).toBe('/web0/api/app1/p?a=1&b=x&b=y&nested[k]=v');
      expect(ctx).toMatchObject({ appId: 'app1', path: 'p', method: 'POST', parts: 0 });
    });

    test('ctx.body is the text as sent, in every stage: quotes, backslashes, line separators, NUL, astral characters, and 1 MB of them', async () => {
      // (the body travels to the engine as a text of its own, not inside JSON: nothing may be lost
      // on the way; QuickJS takes texts as C strings, so a NUL must not end it)
      const { app: hooked } = api(
        `export function before(ctx) { ctx.request.setAttribute('before', ctx.body) }
         export function fn(ctx) { return { before: ctx.request.getAttribute('before') === ctx.body, body: ctx.body, n: ctx.body.length, type: ctx.request.getContentType(), uri: ctx.request.getRequestURI() } }
         export function after(ctx, result) { if (ctx.body !== result.body) throw new Error('after saw another body') }`,
        { methods: ['POST'], before: { script: 'main.js', function: 'before' }, after: { script: 'main.js', function: 'after' } },
        { bodyLimit: '4mb' },
      );
      const odd = 'a"b\\c\n\u2028\u2029\u0000\u0001é😀}"';
      for (const body of [odd, '\u0000', odd.replace('\u0000', '').repeat(70000)]) {
        const res = await request(hooked).post('/web0/api/app1/p').set('Content-Type', 'text/plain; charset=utf-8').send(body);
        expect(res.body.message).toBeUndefined();
        expect(res.status).toBe(200);
        expect(res.body.n).toBe(body.length);
        // (the servlet fields come from the rest of the snapshot, which the worker sends without the body)
        expect(res.body).toEqual({ before: true, body, n: body.length, type: 'text/plain; charset=utf-8', uri: '/web0/api/app1/p' });
      }
    });

    test('body is an empty string without a body', async () => {
      const res = await request(app).get('/web0/api/app1/p');
      expect(res.body.body).toBe('');
    });

    test('allowUnderscoreHeaders passes header names with _', async () => {
      const { app: open } = api('export function fn(ctx) { return { v: ctx.headers["x_under"], h: ctx.request.getHeader("X_UNDER") } }', {}, { allowUnderscoreHeaders: true });
      const res = await request(open).get('/web0/api/app1/p').set('X_Under', 'kept');
      expect(res.body).toEqual({ v: 'kept', h: 'kept' });
    });
  });

  describe('names that are members of Object.prototype are ordinary names', () => {
    const { app } = api(`function values(e) { const out = []; while (e.hasMoreElements()) out.push(e.nextElement()); return out; }
    export function fn(ctx) {
      const r = ctx.request;
      return { query: ctx.query, headers: ctx.headers, cookies: ctx.cookies, params: r.getParameterMap(),
               ctor: r.getHeader('constructor'), proto: r.getHeader('__proto__'), ctors: values(r.getHeaders('constructor')),
               toStr: r.getParameter('toString'), len: r.getParameterValues('length') };
    }`, {}, { allowUnderscoreHeaders: true });

    test('in the query and the headers (a header named constructor used to fail the request with a 500)', async () => {
      const res = await request(app)
        .get('/web0/api/app1/p?toString=a&constructor=b&__proto__=x&length=5&length=6')
        .set('Constructor', 'c1')
        .set('Cookie', '__proto__=1; toString=2');
      expect(res.status).toBe(200);
      expect(res.body.query).toEqual({ toString: 'a', constructor: 'b', ['__proto__']: 'x', length: ['5', '6'] });
      expect(Object.keys(res.body.query)).toEqual(['toString', 'constructor', '__proto__', 'length']);
      expect(res.body.headers.constructor).toBe('c1');
      expect(Object.getOwnPropertyDescriptor(res.body.cookies, '__proto__').value).toBe('1');
      expect(res.body.cookies.toString).toBe('2');
      expect(res.body).toMatchObject({ ctor: 'c1', ctors: ['c1'], toStr: 'a', len: ['5', '6'] });
    });

    test('headers named constructor (twice) and __proto__', async () => {
      // (sent with node:http: superagent keeps its headers in a plain object, which drops __proto__)
      const server = app.listen(0);
      await new Promise((resolve) => server.once('listening', resolve));
      try {
        const body = await new Promise((resolve, reject) => {
          const req = http.request({ port: server.address().port, path: '/web0/api/app1/p' }, (res) => {
            let text = '';
            res.setEncoding('utf8');
            res.on('data', (d) => (text += d));
            res.on('end', () => resolve({ status: res.statusCode, ...JSON.parse(text) }));
          });
          req.on('error', reject);
          req.setHeader('Constructor', ['a', 'b']);
          req.setHeader('__proto__', 'p');
          req.end();
        });
        expect(body.status).toBe(200);
        expect(body.headers.constructor).toBe('a, b');
        expect(Object.getOwnPropertyDescriptor(body.headers, '__proto__').value).toBe('p');
        expect(body).toMatchObject({ ctor: 'a', ctors: ['a', 'b'], proto: 'p' });
      } finally {
        await new Promise((resolve) => server.close(resolve));
      }
    });

    test('in an urlencoded and a multipart form', async () => {
      const form = await request(app).post('/web0/api/app1/p').type('form').send('constructor=1&toString=2&__proto__=3&hasOwnProperty=4&toString=5');
      expect(form.status).toBe(200);
      expect(form.body.params).toEqual({ constructor: ['1'], toString: ['2', '5'], ['__proto__']: ['3'], hasOwnProperty: ['4'] });
      const multi = await request(app).post('/web0/api/app1/p').field('constructor', 'm1').field('valueOf', 'm2');
      expect(multi.status).toBe(200);
      expect(multi.body.params).toEqual({ constructor: ['m1'], valueOf: ['m2'] });
    });

    test('a script named toString that the registry lacks is not found, not an Object.prototype member', async () => {
      const { app: missing } = api('export function fn() { return 1 }', { call: { script: 'toString', function: 'fn' } });
      const res = await request(missing).get('/web0/api/app1/p');
      expect(res.status).toBe(500);
      expect(res.body).toMatchObject({ code: 270202, message: "Script 'toString' not found" });
    });
  });

  describe('PlatformHttpRequest', () => {
    const { app } = api(`export function fn(ctx) {
      const r = ctx.request;
      const list = (e) => { const out = []; while (e.hasMoreElements()) out.push(e.nextElement()); return out; };
      return {
        param: r.getParameter('q'), formParam: r.getParameter('f'), missing: r.getParameter('none'),
        values: r.getParameterValues('q'), names: list(r.getParameterNames()).sort(), map: r.getParameterMap(),
        encoding: r.getCharacterEncoding(), protocol: r.getProtocol(), scheme: r.getScheme(), serverName: r.getServerName(),
        serverPort: r.getServerPort(), remoteAddr: r.getRemoteAddr(), remoteHost: r.getRemoteHost(), remotePort: r.getRemotePort(),
        secure: r.isSecure(), contentType: r.getContentType(), authType: r.getAuthType(),
        cookies: (r.getCookies() || []).map((c) => [c.getName(), c.getValue()]),
        header: r.getHeader('X-MULTI'), headers: [...r.getHeaders('x-multi')], headerNames: list(r.getHeaderNames()).includes('x-multi'),
        method: r.getMethod(), pathInfo: r.getPathInfo(), contextPath: r.getContextPath(), servletPath: r.getServletPath(),
        queryString: r.getQueryString(), remoteUser: r.getRemoteUser(), principal: r.getUserPrincipal(), uri: r.getRequestURI(),
        parts: r.getParts().length,
      };
    }`);

    test('every method, with servlet semantics', async () => {
      const res = await request(app)
        .post('/web0/api/app1/p?q=1&q=2')
        .set('Content-Type', 'application/x-www-form-urlencoded; charset=UTF-8')
        .set('Authorization', 'Bearer abc')
        .set('Cookie', 'a=1')
        .set('X-Multi', ['one', 'two'])
        .send('f=form&q=3');
      const r = res.body;
      expect(r).toMatchObject({
        param: '1', formParam: 'form', missing: null, values: ['1', '2', '3'], names: ['f', 'q'],
        map: { q: ['1', '2', '3'], f: ['form'] }, encoding: 'UTF-8', protocol: 'HTTP/1.1', scheme: 'http',
        serverName: '127.0.0.1', secure: false, contentType: 'application/x-www-form-urlencoded; charset=UTF-8', authType: 'Bearer',
        cookies: [['a', '1']], header: 'one', headers: ['one', 'two'], headerNames: true, method: 'POST', pathInfo: '/p',
        contextPath: '/web0/api', servletPath: '/app1', queryString: 'q=1&q=2', remoteUser: null, principal: null,
        uri: '/web0/api/app1/p', parts: 0,
      });
      expect(r.remoteAddr).toMatch(/127\.0\.0\.1/);
      expect(r.remoteHost).toBe(r.remoteAddr);
      expect(typeof r.serverPort).toBe('number');
      expect(r.remotePort).toBeGreaterThan(0);
    });
  });

  describe('PlatformHttpResponse', () => {
    const { app } = api(`export function fn(ctx) {
      const res = ctx.response;
      switch (ctx.query.mode) {
        case 'writer':
          res.setStatus(201); res.setHeader('X-One', 'a'); res.addHeader('X-Many', '1'); res.addHeader('X-Many', '2');
          res.setIntHeader('X-Int', 7); res.setDateHeader('X-Date', 0); res.setContentType('text/csv');
          res.getWriter().write('a,b\\n'); res.getWriter().print('1,2');
          return { ignored: true };
        case 'bytes':
          res.setContentType('application/octet-stream'); res.getOutputStream().write([0, 1, 2, 255]); return;
        case 'sendError': res.getWriter().write('discarded'); res.sendError(403, 'forbidden here'); return;
        case 'redirect': res.sendRedirect('/elsewhere'); return;
        case 'headers-only': res.setStatus(202); res.setHeader('X-Set', 'yes'); return { kept: true };
        case 'introspect':
          res.setHeader('X-A', '1');
          return { has: res.containsHeader('x-a'), get: res.getHeader('X-A'), status: res.getStatus(), committed: res.isCommitted(),
                   enc: res.getCharacterEncoding(), buf: res.getBufferSize(), url: res.encodeURL('/x') };
        case 'reset':
          res.setStatus(500); res.setHeader('X-Gone', '1'); res.getWriter().write('gone'); res.reset(); res.getWriter().write('after reset');
          return;
        case 'committed':
          res.getWriter().write('x'); res.flushBuffer(); res.setStatus(500); res.setHeader('X-Late', '1');
          let threw = false; try { res.reset() } catch (e) { threw = true }
          res.getWriter().write(threw ? ' reset threw' : ' reset did not throw');
          return;
      }
    }`);

    test('status, headers and writer output make the response; the return value is not serialized again', async () => {
      const res = await request(app).get('/web0/api/app1/p?mode=writer');
      expect(res.status).toBe(201);
      expect(res.headers['x-one']).toBe('a');
      expect(res.headers['x-many']).toBe('1, 2');
      expect(res.headers['x-int']).toBe('7');
      expect(res.headers['x-date']).toBe('Thu, 01 Jan 1970 00:00:00 GMT');
      expect(res.headers['content-type']).toMatch(/^text\/csv/);
      expect(res.text).toBe('a,b\n1,2');
    });

    test('getOutputStream writes bytes', async () => {
      const res = await request(app).get('/web0/api/app1/p?mode=bytes').buffer(true).parse((r, cb) => {
        const chunks = [];
        r.on('data', (c) => chunks.push(c));
        r.on('end', () => cb(null, Buffer.concat(chunks)));
      });
      expect([...res.body]).toEqual([0, 1, 2, 255]);
    });

    test('getOutputStream takes a multi-megabyte byte array whole, within the call memory limit', async () => {
      // 5 MiB of bytes: building their text a byte at a time took about 20 bytes of the call's
      // memory a byte on vm2 (out of memory at the default limit) and copied the text as it grew on QuickJS
      const n = 5 * 1024 * 1024;
      const big = api(`export function fn(ctx) {
        const n = ${n}; const b = new Uint8Array(n);
        for (let i = 0; i < n; i++) b[i] = (i * 7) & 255;
        const o = ctx.response.getOutputStream();
        o.write(b, 1, n - 2);
        o.write([321, -1, 3.9]);
        o.write(new Uint8Array([9, 8]).buffer);
        o.write('\\u00e9\\u{1F600}'.repeat(300000) + '\\ud800');
      }`, {}, { scriptMemoryLimitMb: 64, contextBudgetMb: 64, scriptTimeoutMs: 60_000 });
      const res = await request(big.app).get('/web0/api/app1/p').buffer(true).parse((r, cb) => {
        const chunks = [];
        r.on('data', (c) => chunks.push(c));
        r.on('end', () => cb(null, Buffer.concat(chunks)));
      });
      expect(res.status).toBe(200);
      const bytes = Buffer.alloc(n - 2 + 5);
      for (let i = 1; i < n - 1; i++) bytes[i - 1] = (i * 7) & 255;
      bytes.set([321 & 255, 255, 3, 9, 8], n - 2);
      const want = Buffer.concat([bytes, Buffer.from('\u00e9\u{1F600}'.repeat(300000) + '\ufffd')]);
      expect(res.body.length).toBe(want.length);
      expect(res.body.equals(want)).toBe(true);
    }, 120_000);

    test("getOutputStream's bytes do not depend on builtins the script patched", async () => {
      const patched = api(`export function fn(ctx) {
        Object.defineProperty(Object.getPrototypeOf(Uint8Array.prototype), 'length', { get() { return 1e8 }, configurable: true });
        Array.prototype.join = () => 'patched';
        String.fromCharCode = () => 'X';
        ctx.response.getOutputStream().write([104, 105, 0x2028]);
      }`);
      const res = await request(patched.app).get('/web0/api/app1/p').buffer(true).parse((r, cb) => {
        const chunks = [];
        r.on('data', (c) => chunks.push(c));
        r.on('end', () => cb(null, Buffer.concat(chunks)));
      });
      expect(res.status).toBe(200);
      expect([...res.body]).toEqual([104, 105, 0x28]);
    });

    test('sendError clears the buffer and answers with the status', async () => {
      const res = await request(app).get('/web0/api/app1/p?mode=sendError');
      expect(res.status).toBe(403);
      expect(res.body).toMatchObject({ message: 'forbidden here', code: 403, requestId: res.headers['x-request-id'] });
    });

    test('sendRedirect', async () => {
      const res = await request(app).get('/web0/api/app1/p?mode=redirect').redirects(0);
      expect(res.status).toBe(302);
      expect(res.headers.location).toBe('/elsewhere');
    });

    test('status and headers without a body apply to the serialized result', async () => {
      const res = await request(app).get('/web0/api/app1/p?mode=headers-only');
      expect(res.status).toBe(202);
      expect(res.headers['x-set']).toBe('yes');
      expect(res.body).toEqual({ kept: true });
    });

    test('introspection methods', async () => {
      const res = await request(app).get('/web0/api/app1/p?mode=introspect');
      expect(res.body).toEqual({ has: true, get: '1', status: 200, committed: false, enc: 'UTF-8', buf: 8192, url: '/x' });
    });

    test('reset clears status, headers and buffer; after flushBuffer the response is committed', async () => {
      const reset = await request(app).get('/web0/api/app1/p?mode=reset');
      expect(reset.status).toBe(200);
      expect(reset.headers).not.toHaveProperty('x-gone');
      expect(reset.text).toBe('after reset');
      const committed = await request(app).get('/web0/api/app1/p?mode=committed');
      expect(committed.status).toBe(200);
      expect(committed.headers).not.toHaveProperty('x-late');
      expect(committed.text).toBe('x reset threw');
    });
  });

  describe('platform helpers', () => {
    test('getAccountByToken (async host function, sync in the script), toJSON, stringToBytes', async () => {
      const { app } = api(`export async function fn(ctx) {
        var account = platform.system.getAccountByToken(ctx.query.token);
        var awaited = await platform.system.getAccountByToken('nobody');
        return { account, awaited, json: platform.utils.toJSON({ d: new Date(9) }),
                 utf8: platform.utils.stringToBytes('é€'), latin1: platform.utils.stringToBytes('é', 'ISO-8859-1') };
      }`, {}, {
        accounts: { getAccountByToken: async (t) => (t === 'good' ? { id: 'u1', userName: 'ada' } : null) },
      });
      const res = await request(app).get('/web0/api/app1/p?token=good');
      expect(res.body).toEqual({
        account: { id: 'u1', userName: 'ada' }, awaited: null, json: '{"d":9}',
        utf8: [0xc3, 0xa9, 0xe2, 0x82, 0xac], latin1: [0xe9],
      });
    });

    test('stringToBytes: the documented charsets; a character a one-byte charset lacks is "?"; names that are not charsets are refused', async () => {
      const { app } = api(`export function fn(ctx) {
        const refused = (cs) => { try { platform.utils.stringToBytes('hi', cs); return 'encoded' } catch (e) { return e.name } };
        return { latin1: platform.utils.stringToBytes('é€😀', 'ISO-8859-1'), ascii: platform.utils.stringToBytes('aé', 'US-ASCII'),
                 utf16: platform.utils.stringToBytes('é', 'UTF-16LE'), hex: refused('hex'), base64: refused('base64'), nope: refused('EBCDIC') };
      }`);
      const res = await request(app).get('/web0/api/app1/p');
      expect(res.body).toEqual({ latin1: [0xe9, 63, 63], ascii: [0x61, 63], utf16: [0xe9, 0], hex: 'RangeError', base64: 'RangeError', nope: 'RangeError' });
    });

    test('console output goes to the logger tagged with app, script and request id', async () => {
      const lines = [];
      const logger = { info: (m, meta) => lines.push([m, meta]), warn: (m, meta) => lines.push([m, meta]), error: (m, meta) => lines.push([m, meta]) };
      const { app } = api('export function fn(ctx) { console.log("hello", { a: 1 }); console.error("bad"); return 1 }', {}, { logger });
      const res = await request(app).get('/web0/api/app1/p');
      await new Promise((r) => setTimeout(r, 50));
      expect(lines.map((l) => l[0])).toEqual(['[app1/main.js] hello {"a":1}', '[app1/main.js] bad']);
      expect(lines[0][1]).toEqual({ appId: 'app1', script: 'main.js', requestId: res.headers['x-request-id'] });
    });

    test("an Error given to console prints its name, message and the script's frames (not the adapter's)", async () => {
      const lines = [];
      let logged;
      const first = new Promise((resolve) => (logged = resolve));
      const push = (m) => (lines.push(m), logged());
      const logger = { info: push, warn: push, error: push };
      const { app } = api('export function fn(ctx) {\n  console.error(new TypeError("bad input"));\n  return 1\n}', {}, { logger });
      expect((await request(app).get('/web0/api/app1/p')).status).toBe(200);
      await first;
      expect(lines[0]).toMatch(/^\[app1\/main\.js\] TypeError: bad input\n\s+at fn \(.*main\.js:2:\d+\)/);
      expect(lines[0]).not.toMatch(/adapter/);
    });
  });

  describe('files', () => {
    const root = fs.mkdtempSync(path.join(os.tmpdir(), 'sapi-files-'));
    const sandboxDir = path.join(root, 'sandbox');
    const storageDir = path.join(root, 'storage');
    fs.mkdirSync(path.join(sandboxDir, 'app1', 'docs'), { recursive: true });
    fs.mkdirSync(path.join(storageDir, 'app1'), { recursive: true });
    fs.writeFileSync(path.join(sandboxDir, 'app1', 'docs', 'a.txt'), 'local file');
    fs.writeFileSync(path.join(storageDir, 'app1', 'b.pdf'), 'shared file');
    fs.writeFileSync(path.join(root, 'secret.txt'), 'outside');
    afterAll(() => fs.rmSync(root, { recursive: true, force: true }));

    const { app } = api('export function fn(ctx) { return JSON.parse(ctx.query.r) }', { returnType: 'File' }, { sandboxDir, storageDir });
    const get = (r) => request(app).get('/web0/api/app1/p').query({ r: JSON.stringify(r) });

    test('path streams the local file as an attachment with its name', async () => {
      const res = await get({ path: 'docs/a.txt', name: 'report €.txt' });
      expect(res.status).toBe(200);
      expect(res.text).toBe('local file');
      expect(res.headers['content-disposition']).toBe(`attachment; filename="report _.txt"; filename*=UTF-8''report%20%E2%82%AC.txt`);
      expect(res.headers['content-type']).toBe('text/plain; charset=utf-8');
      expect(res.headers['content-length']).toBe('10');
    });

    test('storagePath, inline, and path wins over storagePath', async () => {
      const shared = await get({ storagePath: 'b.pdf', contentDisposition: 'inline' });
      expect(shared.headers['content-type']).toBe('application/pdf');
      expect(shared.headers['content-disposition']).toBe('inline; filename=b.pdf');
      const both = await get({ path: 'docs/a.txt', storagePath: 'b.pdf' });
      expect(both.text).toBe('local file');
    });

    test('empty path or a missing file: 404; a path out of the sandbox is refused', async () => {
      expect((await get({ path: '' })).status).toBe(404);
      expect((await get({ path: 'docs/missing.txt' })).status).toBe(404);
      const out = await get({ path: '../../secret.txt' });
      expect(out.status).toBe(400);
      expect(out.body.code).toBe(270302);
      expect(out.text).not.toContain('outside');
    });

    test('uploaded parts save into the sandbox and shared storage', async () => {
      const x = api('', { call: { script: 'upload.js', function: 'up' } }, { sandboxDir, storageDir }, {
        scripts: {
          'upload.js': `export function up(ctx) {
            return ctx.getParts().map((p) => ({ name: p.name, file: p.submittedFileName, type: p.contentType, size: p.size,
              saved: p.name === 'doc' ? p.save('uploads/' + p.submittedFileName) : p.saveStorage('shared/' + p.submittedFileName) }));
          }`,
        },
      });
      const res = await request(x.app).post('/web0/api/app1/p')
        .attach('doc', Buffer.from('hello part'), { filename: 'h.txt', contentType: 'text/plain' })
        .attach('img', Buffer.from([1, 2, 3]), { filename: 'i.bin', contentType: 'application/octet-stream' });
      expect(res.status).toBe(200);
      expect(res.body).toEqual([
        { name: 'doc', file: 'h.txt', type: 'text/plain', size: 10, saved: { path: 'uploads/h.txt', size: 10 } },
        { name: 'img', file: 'i.bin', type: 'application/octet-stream', size: 3, saved: { path: 'shared/i.bin', size: 3 } },
      ]);
      expect(fs.readFileSync(path.join(sandboxDir, 'app1', 'uploads', 'h.txt'), 'utf8')).toBe('hello part');
      expect([...fs.readFileSync(path.join(storageDir, 'app1', 'shared', 'i.bin'))]).toEqual([1, 2, 3]);
    });
  });
});

test('console output is capped per request so a chatty script cannot flood the host log', async () => {
  const lines = [];
  const logger = { info: (m) => lines.push(m), warn: (m) => lines.push(m), error: (m) => lines.push(m) };
  const { app } = apiWith('quickjs', 'export function fn() { for (let i = 0; i < 5000; i++) console.log("line " + i); return 1 }', {}, { logger });
  const res = await request(app).get('/web0/api/app1/p');
  expect(res.status).toBe(200);
  await new Promise((r) => setTimeout(r, 100));
  expect(lines).toHaveLength(201);
  expect(lines[199]).toBe('[app1/main.js] line 199');
  expect(lines[200]).toBe(`[app1] 4800 more console lines of request ${res.headers['x-request-id']} were dropped`);
});

describe('behind a proxy the app trusts (`trust proxy`), the server is the one the client asked for', () => {
  const SOURCE = `export function fn(ctx) { const r = ctx.request;
    return { name: r.getServerName(), port: r.getServerPort(), scheme: r.getScheme(), secure: r.isSecure(), addr: r.getRemoteAddr(), url: r.getRequestURL() } }`;
  const get = (app, headers) => request(app).get('/web0/api/app1/p').set(headers);

  test('name, port and scheme come from the forwarded host and protocol together', async () => {
    const { app, router } = apiWith('quickjs', SOURCE, {}, {}, { setup: (a) => a.set('trust proxy', true) });
    await router.ready();
    const behind = { Host: '10.0.0.5:8080', 'X-Forwarded-For': '203.0.113.9', 'X-Forwarded-Proto': 'https' };
    expect((await get(app, { ...behind, 'X-Forwarded-Host': 'api.example.com' })).body).toEqual({
      name: 'api.example.com', port: 443, scheme: 'https', secure: true, addr: '203.0.113.9', url: 'https://api.example.com/web0/api/app1/p',
    });
    expect((await get(app, { ...behind, 'X-Forwarded-Host': 'api.example.com:8443' })).body).toMatchObject({ name: 'api.example.com', port: 8443, url: 'https://api.example.com:8443/web0/api/app1/p' });
    expect((await get(app, { ...behind, 'X-Forwarded-Host': '[2001:db8::1]:9443, inner.example' })).body).toMatchObject({ name: '[2001:db8::1]', port: 9443 });
    // (a proxy that keeps the client's Host and says only the protocol: the port is the protocol's, not the proxy's hop)
    expect((await get(app, { Host: 'api.example.com', 'X-Forwarded-Proto': 'https' })).body).toMatchObject({ port: 443, url: 'https://api.example.com/web0/api/app1/p' });
    expect((await get(app, { Host: 'api.example.com', 'X-Forwarded-Proto': 'http' })).body).toMatchObject({ port: 80, url: 'http://api.example.com/web0/api/app1/p' });
  });

  test.each([
    ['quickjs', 5],
    ['vm2', 4],
  ])('a trust function returning a truthy value that is not `true` is trusted, as Express trusts it (%s, Express %d)', async (engine, express) => {
    // (`ip.match(...)` gives an array or null: Express's req.ip, req.protocol and req.hostname all trust it)
    let host;
    const { app, router } = apiWith(engine, SOURCE, {}, {}, {
      express,
      setup: (a) => {
        a.set('trust proxy', (ip) => ip.match(/^(::ffff:)?127\./));
        a.use((req, _res, next) => ((host = { ip: req.ip, hostname: req.hostname, protocol: req.protocol }), next()));
      },
    });
    await router.ready();
    const res = await get(app, { Host: '10.0.0.5:8080', 'X-Forwarded-For': '203.0.113.9', 'X-Forwarded-Proto': 'https', 'X-Forwarded-Host': 'api.example.com' });
    expect(host).toEqual({ ip: '203.0.113.9', hostname: 'api.example.com', protocol: 'https' });
    expect(res.body).toEqual({
      name: 'api.example.com', port: 443, scheme: 'https', secure: true, addr: '203.0.113.9', url: 'https://api.example.com/web0/api/app1/p',
    });
  });

  test('without trust, the forwarded headers are ignored', async () => {
    const { app, router } = apiWith('quickjs', SOURCE);
    await router.ready();
    const res = await get(app, { Host: '10.0.0.5:8080', 'X-Forwarded-Host': 'api.example.com', 'X-Forwarded-Proto': 'https', 'X-Forwarded-For': '203.0.113.9' });
    expect(res.body).toMatchObject({ name: '10.0.0.5', port: 8080, scheme: 'http', secure: false, url: 'http://10.0.0.5:8080/web0/api/app1/p' });
    expect(res.body.addr).toMatch(/127\.0\.0\.1/);
  });
});

test('a Latin-1 header value goes out as the same bytes whatever the return type (JSON and Text sent it as UTF-8)', async () => {
  const { app, router } = apiWith('quickjs', `export function fn(ctx) {
    ctx.response.setHeader('X-Name', 'José'); ctx.response.setContentType(ctx.query.t + '; title=Café');
    if (ctx.query.w) ctx.response.getWriter().write('written');
    return ctx.query.t === 'text/plain' ? 'text' : { json: true };
  }`);
  await router.ready();
  const server = app.listen(0, '127.0.0.1');
  await new Promise((resolve) => server.once('listening', resolve));
  const head = (query) => new Promise((resolve, reject) => {
    http.get(`http://127.0.0.1:${server.address().port}/web0/api/app1/p?${query}`, (res) => {
      res.resume();
      // (node:http reads header bytes as Latin-1, as browsers do)
      res.on('end', () => resolve([res.statusCode, res.headers['x-name'], res.headers['content-type']]));
    }).on('error', reject);
  });
  try {
    for (const query of ['t=application/json', 't=text/plain', 't=text/plain&w=1']) {
      expect(await head(query)).toEqual([200, 'José', `${query.slice(2, query.indexOf('&') >= 0 ? query.indexOf('&') : undefined)};title=Café`]);
    }
  } finally {
    await new Promise((resolve) => server.close(resolve));
  }
});

test('getCookies returns every cookie the client sent, a name sent twice included; ctx.cookies keeps the first', async () => {
  const { app, router } = apiWith('quickjs', `export function fn(ctx) {
    return { list: (ctx.request.getCookies() || []).map((c) => [c.getName(), c.getValue()]), map: ctx.cookies };
  }`);
  await router.ready();
  const res = await request(app).get('/web0/api/app1/p').set('Cookie', 'session=new; theme=dark; session=old; c=%E9; d=%41');
  expect(res.status).toBe(200);
  expect(res.body.list).toEqual([['session', 'new'], ['theme', 'dark'], ['session', 'old'], ['c', '%E9'], ['d', 'A']]);
  expect(res.body.map).toEqual({ session: 'new', theme: 'dark', c: '%E9', d: 'A' });
  const single = await request(app).get('/web0/api/app1/p').set('Cookie', 'a=1; b=2');
  expect(single.body.list).toEqual([['a', '1'], ['b', '2']]);
});

test('a request sent in absolute form (`GET http://host/path`): ctx.url and getRequestURI are its path, as in origin form', async () => {
  const { app, router } = apiWith('quickjs', `export function fn(ctx) {
    const r = ctx.request;
    return { url: ctx.url, uri: r.getRequestURI(), query: r.getQueryString(), full: r.getRequestURL(), q: ctx.query };
  }`);
  await router.ready();
  const server = app.listen(0, '127.0.0.1');
  await new Promise((resolve) => server.once('listening', resolve));
  try {
    const body = await new Promise((resolve, reject) => {
      const sock = net.connect(server.address().port, '127.0.0.1', () => sock.write('GET http://api.example.com/web0/api/app1/p?x=1 HTTP/1.1\r\nHost: api.example.com\r\nConnection: close\r\n\r\n'));
      let text = '';
      sock.on('data', (d) => (text += d));
      sock.on('end', () => resolve(JSON.parse(text.slice(text.indexOf('\r\n\r\n') + 4))));
      sock.on('error', reject);
    });
    expect(body).toEqual({ url: '/web0/api/app1/p?x=1', uri: '/web0/api/app1/p', query: 'x=1', full: `http://api.example.com:${server.address().port}/web0/api/app1/p`, q: { x: '1' } });
  } finally {
    await new Promise((resolve) => server.close(resolve));
  }
});

test('a query key repeated many times is read in linear time (a 16 KB URL of `a=&a=&…` held the event loop ~120 ms)', () => {
  const { parseQuery } = require('../dist/cjs/context/request.js');
  const n = 50_000;
  const t0 = performance.now();
  const query = parseQuery(Array(n).fill('a=1').join('&') + '&b=2');
  const ms = performance.now() - t0;
  expect(query.a).toHaveLength(n);
  expect(query.b).toBe('2');
  expect(ms).toBeLessThan(2000); // (linear: a few ms; copying the list at each value: tens of seconds)
}, 120_000);

test.each([
  ['quickjs', 5],
  ['vm2', 4],
])('a Host header sent twice: the server is named by the first, as Node.js, Express and getHeader("host") read it (%s, Express %d)', async (engine, express) => {
  let hostname;
  const { app, router } = apiWith(engine, 'export function fn(ctx) { const r = ctx.request; return [r.getServerName(), r.getServerPort(), r.getRequestURL(), r.getHeader("host")] }', {}, {}, {
    express,
    setup: (a) => a.use((req, _res, next) => ((hostname = req.hostname), next())),
  });
  await router.ready();
  const server = app.listen(0, '127.0.0.1');
  await new Promise((resolve) => server.once('listening', resolve));
  try {
    const body = await new Promise((resolve, reject) => {
      const sock = net.connect(server.address().port, '127.0.0.1', () =>
        sock.write('GET /web0/api/app1/p HTTP/1.1\r\nHost: api.example.com:8080\r\nHost: evil.example\r\nConnection: close\r\n\r\n'));
      let text = '';
      sock.on('data', (d) => (text += d));
      sock.on('end', () => resolve(JSON.parse(text.slice(text.indexOf('\r\n\r\n') + 4))));
      sock.on('error', reject);
    });
    expect(hostname).toBe('api.example.com');
    expect(body).toEqual(['api.example.com', 8080, 'http://api.example.com:8080/web0/api/app1/p', 'api.example.com:8080']);
  } finally {
    await new Promise((resolve) => server.close(resolve));
  }
});

test('a request without a Host header (HTTP/1.0): the server name is the address the connection was accepted on', async () => {
  const { app, router } = apiWith('quickjs', 'export function fn(ctx) { const r = ctx.request; return [r.getServerName(), r.getServerPort(), r.getRequestURL()] }');
  await router.ready();
  const server = app.listen(0, '127.0.0.1');
  await new Promise((resolve) => server.once('listening', resolve));
  try {
    const body = await new Promise((resolve, reject) => {
      const sock = net.connect(server.address().port, '127.0.0.1', () => sock.write('GET /web0/api/app1/p HTTP/1.0\r\n\r\n'));
      let text = '';
      sock.on('data', (d) => (text += d));
      sock.on('end', () => resolve(JSON.parse(text.slice(text.indexOf('\r\n\r\n') + 4))));
      sock.on('error', reject);
    });
    const port = server.address().port;
    expect(body).toEqual(['127.0.0.1', port, `http://127.0.0.1:${port}/web0/api/app1/p`]);
  } finally {
    await new Promise((resolve) => server.close(resolve));
  }
});

test.each([
  ['text/plain; charset = ISO-8859-1', 'ISO-8859-1', 'caf\u00c3\u00a9'],
  ['text/plain; charset=" utf-8 "', 'utf-8', 'caf\u00e9'],
  ['text/plain;charset=windows-1252', 'windows-1252', 'caf\u00c3\u00a9'],
  ['text/plain; format=flowed', null, 'caf\u00e9'],
  ['text/plain; xcharset=latin1', null, 'caf\u00e9'],
])('getCharacterEncoding() names the charset ctx.body was decoded by (%s)', async (contentType, encoding, body) => {
  const { app } = apiWith('quickjs', 'export function fn(ctx) { return [ctx.request.getCharacterEncoding(), ctx.body] }');
  // (café in UTF-8: read as ISO-8859-1 or windows-1252, its é is two characters, Ã©)
  const res = await request(app).post('/web0/api/app1/p').set('Content-Type', contentType).send(Buffer.from('caf\u00e9', 'utf8'));
  expect(res.status).toBe(200);
  expect(res.body).toEqual([encoding, body]);
});

test('a Content-Type sent twice: getContentType() and getCharacterEncoding() name the first, the one ctx.body was decoded by (not the two joined)', async () => {
  const { app, router } = apiWith('quickjs', 'export function fn(ctx) { const r = ctx.request; return [r.getContentType(), r.getCharacterEncoding(), ctx.body] }');
  await router.ready();
  const server = app.listen(0, '127.0.0.1');
  await new Promise((resolve) => server.once('listening', resolve));
  const post = (first, second) =>
    new Promise((resolve, reject) => {
      const head = `POST /web0/api/app1/p HTTP/1.1\r\nHost: x\r\nConnection: close\r\nContent-Type: ${first}\r\nContent-Type: ${second}\r\nContent-Length: 5\r\n\r\n`;
      const sock = net.connect(server.address().port, '127.0.0.1', () => sock.write(Buffer.concat([Buffer.from(head), Buffer.from('caf\u00e9', 'utf8')])));
      const chunks = [];
      sock.on('data', (d) => chunks.push(d));
      sock.on('end', () => {
        const text = Buffer.concat(chunks).toString('utf8');
        resolve(JSON.parse(text.slice(text.indexOf('\r\n\r\n') + 4)));
      });
      sock.on('error', reject);
    });
  try {
    // (café in UTF-8: read as ISO-8859-1, its é is two characters, Ã©)
    expect(await post('text/plain', 'text/plain; charset=iso-8859-1')).toEqual(['text/plain', null, 'caf\u00e9']);
    expect(await post('text/plain; charset=iso-8859-1', 'application/json')).toEqual(['text/plain; charset=iso-8859-1', 'iso-8859-1', 'caf\u00c3\u00a9']);
  } finally {
    await new Promise((resolve) => server.close(resolve));
  }
});
