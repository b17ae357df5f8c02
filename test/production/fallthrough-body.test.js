'use strict';
// `fallthrough` hands unknown paths to later routes; ctx.body is the bytes the client sent,
// decoded by the declared charset, also behind a host body parser.
const request = require('supertest');
const iconv = require('iconv-lite');
const { makeApp, EXPRESS } = require('../helpers/app');

const routers = [];
afterAll(() => Promise.all(routers.map((r) => r.close())));

const ECHO = 'export function fn(ctx) { return { body: ctx.body, form: ctx.request.getParameter("name") } }';
const apps = { app1: { scripts: { 'main.js': ECHO }, apis: [{ path: 'echo', call: { script: 'main.js', function: 'fn' }, returnType: 'JSON' }] } };

describe.each([4, 5])('fallthrough (Express %i)', (major) => {
  function hostApp(router) {
    const express = EXPRESS[major];
    const { createApiRouter, MemoryRegistry } = require('../..');
    const r = createApiRouter({ registry: new MemoryRegistry({ apps }), workers: 1, ...router });
    routers.push(r);
    const app = express();
    app.use('/api', r);
    app.get('/api/health', (_req, res) => res.json({ healthy: true }));
    app.use((_req, res) => res.status(404).type('text').send('host 404'));
    return app;
  }

  test('fallthrough: true lets later routes and the host 404 answer unknown apps and paths', async () => {
    const app = hostApp({ fallthrough: true });
    const health = await request(app).get('/api/health');
    expect(health.status).toBe(200);
    expect(health.body).toEqual({ healthy: true });
    expect(health.headers['x-request-id']).toBeUndefined();
    const unknownApp = await request(app).get('/api/nope/x');
    expect(unknownApp.status).toBe(404);
    expect(unknownApp.text).toBe('host 404');
    const unknownPath = await request(app).get('/api/app1/missing');
    expect(unknownPath.text).toBe('host 404');
    const known = await request(app).post('/api/app1/echo').type('text').send('hi');
    expect(known.body.body).toBe('hi');
  });

  test('fallthrough: true hands an unknown path on with the X-Request-Id the host set before the router', async () => {
    const express = EXPRESS[major];
    const { createApiRouter, MemoryRegistry } = require('../..');
    const r = createApiRouter({ registry: new MemoryRegistry({ apps }), workers: 1, fallthrough: true });
    routers.push(r);
    const app = express();
    app.use((_req, res, next) => {
      res.setHeader('X-Request-Id', 'host-7');
      next();
    });
    app.use('/api', r);
    app.use((_req, res) => res.status(404).type('text').send('host 404'));
    const unknown = await request(app).get('/api/nope/x');
    expect(unknown.text).toBe('host 404');
    expect(unknown.headers['x-request-id']).toBe('host-7');
    const known = await request(app).post('/api/app1/echo').type('text').send('hi');
    expect(known.body.body).toBe('hi');
    expect(known.headers['x-request-id']).toMatch(/^[0-9a-f-]{36}$/);
  });

  test('default: the JSON 404 of the spec, later routes never see the request', async () => {
    const app = hostApp({});
    const health = await request(app).get('/api/health');
    expect(health.status).toBe(404);
    expect(health.body.code).toBe(270100);
  });

  test('fallthrough must be a boolean', () => {
    expect(() => hostApp({ fallthrough: 'yes' })).toThrow(/invalid fallthrough/);
  });
});

describe('ctx.body is the bytes the client sent', () => {
  function app(setup, router = {}) {
    const x = makeApp({ apps, setup, router });
    routers.push(x.router);
    return x;
  }
  const BIG = '{"big": 12345678901234567890, "x": 1.0}';

  test('behind express.json() with the raw body kept (verify), the script sees the exact text', async () => {
    const express = EXPRESS[5];
    const { app: server } = app((a) => a.use(express.json({ verify: (req, _res, buf) => { req.rawBody = buf; } })));
    const res = await request(server).post('/web0/api/app1/echo').set('content-type', 'application/json').send(BIG);
    expect(res.body.body).toBe(BIG);
  });

  test('behind express.json() without the raw body: the parsed value, and one error line saying to mount the router first', async () => {
    const express = EXPRESS[5];
    const lines = [];
    const logger = { info() {}, warn() {}, error: (m) => lines.push(m) };
    const { app: server } = app((a) => a.use(express.json()), { logger });
    for (let i = 0; i < 2; i++) {
      const res = await request(server).post('/web0/api/app1/echo').set('content-type', 'application/json').send('{"a":1}');
      expect(res.body.body).toBe('{"a":1}');
    }
    expect(lines).toHaveLength(1);
    expect(lines[0]).toMatch(/body parser ran before the router.*rawBody/);
  });

  test('charsets: shift_jis and windows-1252 are decoded with iconv-lite; urlencoded forms percent-encoded in latin1 or shift_jis too', async () => {
    const { app: server } = app();
    const text = '日本語のテキスト';
    const sjis = await request(server).post('/web0/api/app1/echo').set('content-type', 'text/plain; charset=shift_jis').send(iconv.encode(text, 'shift_jis'));
    expect(sjis.body.body).toBe(text);
    const cp = await request(server).post('/web0/api/app1/echo').set('content-type', 'text/plain; charset="windows-1252"').send(iconv.encode('€ café', 'windows-1252'));
    expect(cp.body.body).toBe('€ café');
    const form = await request(server).post('/web0/api/app1/echo').set('content-type', 'application/x-www-form-urlencoded; charset=iso-8859-1').send('name=Jos%E9+Mar%EDa');
    expect(form.body).toEqual({ body: 'name=Jos%E9+Mar%EDa', form: 'José María' });
    const sjisForm = await request(server).post('/web0/api/app1/echo').set('content-type', 'application/x-www-form-urlencoded; charset=shift_jis').send('name=%93%FA%96%7B');
    expect(sjisForm.body.form).toBe('日本');
  });

  test('a form encoded by a browser in shift_jis: trail bytes that are letters are not escaped, and still decode with their lead byte', async () => {
    const { app: server } = app();
    // (a browser escapes every byte but ASCII letters, digits and *-._: 'アイス' is %83A%83C%83X, '表' %95%5C)
    const browserForm = (text) => [...iconv.encode(text, 'shift_jis')].map((b) => (b === 0x20 ? '+' : /[*\-._0-9A-Za-z]/.test(String.fromCharCode(b)) ? String.fromCharCode(b) : `%${b.toString(16).toUpperCase().padStart(2, '0')}`)).join('');
    const body = `name=${browserForm('アイス 表 a&b')}`;
    expect(body).toBe('name=%83A%83C%83X+%95%5C+a%26b');
    const res = await request(server).post('/web0/api/app1/echo').set('content-type', 'application/x-www-form-urlencoded; charset=Shift_JIS').send(body);
    expect(res.body).toEqual({ body, form: 'アイス 表 a&b' });
  });

  test('a form whose escapes decode to half a UTF-16 pair: the half is U+FFFD, as an invalid UTF-8 escape is (not a 500)', async () => {
    const { app: server } = app();
    const res = await request(server).post('/web0/api/app1/echo').set('content-type', 'application/x-www-form-urlencoded; charset=utf-16le').serialize((b) => b).send(Buffer.from('name=%00%D8%41%00', 'utf16le'));
    expect(res.status).toBe(200);
    expect(res.body.form).toBe('\uFFFDA');
  });

  test('an unknown charset is 415 UNSUPPORTED_CHARSET', async () => {
    const { app: server } = app();
    const res = await request(server).post('/web0/api/app1/echo').set('content-type', 'text/plain; charset=klingon-8').send('x');
    expect(res.status).toBe(415);
    expect(res.body).toMatchObject({ code: 270104, message: "Unsupported charset 'klingon-8' in the Content-Type" });
  });

  test("names iconv-lite knows that are not charsets (hex, base64, binary) are 415 UNSUPPORTED_CHARSET, not the body's bytes as hex or base64", async () => {
    const { app: server } = app();
    for (const cs of ['hex', 'base64', 'Base-64', 'binary']) {
      const res = await request(server).post('/web0/api/app1/echo').set('content-type', `text/plain; charset=${cs}`).send('abc');
      expect([cs, res.status, res.body.code]).toEqual([cs, 415, 270104]);
    }
    const form = await request(server).post('/web0/api/app1/echo').set('content-type', 'application/x-www-form-urlencoded; charset=hex').send('name=%41');
    expect(form.status).toBe(415);
  });

  test('a raw body kept by the host is decoded by its charset too', async () => {
    const express = EXPRESS[5];
    const { app: server } = app((a) => a.use(express.raw({ type: 'text/*', verify: (req, _res, buf) => { req.rawBody = buf; } })));
    const res = await request(server).post('/web0/api/app1/echo').set('content-type', 'text/plain; charset=shift_jis').send(iconv.encode('テスト', 'shift_jis'));
    expect(res.body.body).toBe('テスト');
  });
});

describe.each([4, 5])('a host body parser that ran first does not lift bodyLimit (Express %i)', (major) => {
  const express = EXPRESS[major];
  const COUNT = 'export function fn(ctx) { return { len: ctx.body.length } }';
  const counted = { app1: { scripts: { 'main.js': COUNT }, apis: [{ path: 'echo', call: { script: 'main.js', function: 'fn' }, returnType: 'JSON' }] } };
  function app(parser) {
    const x = makeApp({ express: major, apps: counted, router: { bodyLimit: 1000, logger: false }, setup: (a) => a.use(parser) });
    routers.push(x.router);
    return x.app;
  }
  const keep = { verify: (req, _res, buf) => { req.rawBody = buf; } };
  const big = JSON.stringify({ a: 'x'.repeat(5000) });
  test.each([
    ['express.json() with the raw body kept', () => express.json({ limit: '10mb', ...keep }), 'application/json', big],
    ['express.json()', () => express.json({ limit: '10mb' }), 'application/json', big],
    ['express.text()', () => express.text({ limit: '10mb' }), 'text/plain', 'x'.repeat(5000)],
    ['express.raw()', () => express.raw({ limit: '10mb' }), 'application/octet-stream', 'x'.repeat(5000)],
    ['express.urlencoded()', () => express.urlencoded({ limit: '10mb', extended: false }), 'application/x-www-form-urlencoded', `a=${'x'.repeat(5000)}`],
  ])('%s: a body over bodyLimit is 413 BODY_TOO_LARGE, as without it', async (_name, parser, type, body) => {
    const server = app(parser());
    const res = await request(server).post('/web0/api/app1/echo').set('content-type', type).send(body);
    expect(res.status).toBe(413);
    expect(res.body).toMatchObject({ code: 270102, message: 'Request body is larger than 1000 bytes' });
    expect(res.body.requestId).toBe(res.headers['x-request-id']);
    const small = await request(server).post('/web0/api/app1/echo').set('content-type', type).send(type === 'application/json' ? '{"a":"x"}' : 'a=x');
    expect(small.status).toBe(200);
  });
});

describe.each([4, 5])('behind express.urlencoded() without the raw body, the form written back has the fields sent (Express %i)', (major) => {
  const express = EXPRESS[major];
  const FORM = `export function fn(ctx) {
    const r = ctx.request;
    return { body: ctx.body, a: r.getParameterValues('a'), bc: r.getParameter('b[c]'), b: r.getParameter('b'), list: r.getParameterValues('l[0][x]'), names: Object.keys(r.getParameterMap()).sort() };
  }`;
  const forms = { app1: { scripts: { 'main.js': FORM }, apis: [{ path: 'echo', call: { script: 'main.js', function: 'fn' }, returnType: 'JSON' }] } };
  test.each([true, false])('extended: %s', async (extended) => {
    const x = makeApp({ express: major, apps: forms, router: { logger: false }, setup: (a) => a.use(express.urlencoded({ extended })) });
    routers.push(x.router);
    const sent = 'a=1&a=2&b%5Bc%5D=3&l%5B0%5D%5Bx%5D=y&d=x+y';
    const res = await request(x.app).post('/web0/api/app1/echo').type('form').send(sent);
    expect(res.status).toBe(200);
    // (the router's own reading of the same form, with no parser in front)
    const own = makeApp({ express: major, apps: forms, router: { logger: false } });
    routers.push(own.router);
    const plain = await request(own.app).post('/web0/api/app1/echo').type('form').send(sent);
    const fields = ({ body, ...rest }) => ({ ...rest, pairs: [...new URLSearchParams(body)].sort() });
    expect(fields(plain.body)).toEqual({ pairs: [['a', '1'], ['a', '2'], ['b[c]', '3'], ['d', 'x y'], ['l[0][x]', 'y']], a: ['1', '2'], bc: '3', b: null, list: ['y'], names: ['a', 'b[c]', 'd', 'l[0][x]'] });
    expect(fields(res.body)).toEqual(fields(plain.body));
  });
});

describe.each([4, 5])('behind a multipart parser of the host (multer, busboy), its form fields are the parameters (Express %i)', (major) => {
  const busboy = require('busboy');
  const PARTS = `export function fn(ctx) {
    const r = ctx.request;
    return { body: ctx.body, field: r.getParameter('field'), many: r.getParameterValues('many'), parts: ctx.getParts().length };
  }`;
  const forms = { app1: { scripts: { 'main.js': PARTS }, apis: [{ path: 'echo', call: { script: 'main.js', function: 'fn' }, returnType: 'JSON' }] } };
  /** What multer does: the fields into req.body (a repeated one as a list), the files into req.files. */
  const hostMultipart = (req, _res, next) => {
    if (!req.is('multipart/form-data')) return next();
    const bb = busboy({ headers: req.headers });
    req.body = Object.create(null);
    req.files = [];
    bb.on('field', (name, value) => {
      const prev = req.body[name];
      req.body[name] = prev === undefined ? value : [].concat(prev, value);
    });
    bb.on('file', (name, stream) => {
      const chunks = [];
      stream.on('data', (c) => chunks.push(c));
      stream.on('end', () => req.files.push({ fieldname: name, buffer: Buffer.concat(chunks) }));
    });
    bb.on('close', () => next());
    req.pipe(bb);
  };
  test('ctx.body is empty as for any multipart request, getParameter reads the fields, and one error line says the files are not the scripts\'', async () => {
    const lines = [];
    const logger = { info() {}, warn() {}, error: (m) => lines.push(m) };
    const x = makeApp({ express: major, apps: forms, router: { logger }, setup: (a) => a.use(hostMultipart) });
    routers.push(x.router);
    for (let i = 0; i < 2; i++) {
      const res = await request(x.app).post('/web0/api/app1/echo').field('field', 'value').field('many', '1').field('many', '2').attach('file', Buffer.from('hello'), 'a.txt');
      expect(res.status).toBe(200);
      expect(res.body).toEqual({ body: '', field: 'value', many: ['1', '2'], parts: 0 });
    }
    expect(lines).toHaveLength(1);
    expect(lines[0]).toMatch(/multipart.*before the router.*getParts/);
  });

  test('its form fields together over bodyLimit are 413 UPLOAD_TOO_LARGE, as the router\'s own reading has them', async () => {
    const x = makeApp({ express: major, apps: forms, router: { logger: false, bodyLimit: 100 }, setup: (a) => a.use(hostMultipart) });
    routers.push(x.router);
    const res = await request(x.app).post('/web0/api/app1/echo').field('field', 'x'.repeat(200));
    expect(res.status).toBe(413);
    expect(res.body).toMatchObject({ code: 270110, message: 'The form fields together are larger than bodyLimit (100 bytes)' });
  });
});

describe.each([4, 5])('a request without a body behind a host body parser (Express %i)', (major) => {
  const express = EXPRESS[major];
  test.each([
    ['express.json()', () => express.json(), 'application/json'],
    ['express.urlencoded()', () => express.urlencoded({ extended: false }), 'application/x-www-form-urlencoded'],
  ])('%s: ctx.body is empty, as without the parser, and nothing is logged', async (_name, parser, type) => {
    const lines = [];
    const logger = { info() {}, warn() {}, error: (m) => lines.push(m) };
    const x = makeApp({ express: major, apps, router: { logger }, setup: (a) => a.use(parser()) });
    routers.push(x.router);
    const res = await request(x.app).post('/web0/api/app1/echo').set('content-type', type).set('content-length', '0');
    expect(res.status).toBe(200);
    expect(res.body).toEqual({ body: '', form: null });
    expect(lines).toEqual([]);
  });
});
