'use strict';
// Every failed call logs one structured line naming the stage and the script line, on both
// engines; the error body carries the location only with `exposeErrorLocation`.
const { Writable } = require('node:stream');
const request = require('supertest');
const pino = require('pino');
const winston = require('winston');
const { makeApp } = require('../helpers/app');
const { defaultLogger } = require('../../dist/cjs/logging');

const routers = [];
afterAll(() => Promise.all(routers.map((r) => r.close())));

/** A logger in the (message, meta) shape that keeps every call. */
function recorder() {
  const lines = [];
  const at = (level) => (message, meta) => lines.push({ level, message, meta });
  return { lines, logger: { debug: at('debug'), info: at('info'), warn: at('warn'), error: at('error') } };
}

function app(engine, scripts, apis, router = {}) {
  const x = makeApp({ router: { engine, ...router }, apps: { app1: { scripts, apis } } });
  routers.push(x.router);
  return x;
}

const api = (path, script, fn = 'fn', extra = {}) => ({ path, call: { script, function: fn }, returnType: 'JSON', ...extra });

const THROWS = ['export function fn(ctx) {', '  const o = null;', '  return helper(o);', '}', 'function helper(o) {', '  return o.x;', '}'].join('\n');

describe.each(['quickjs', 'vm2'])('%s engine', (engine) => {
  test('a thrown error: one error line with stage, code, status, script:line:column and only script frames; the body has no location', async () => {
    const { lines, logger } = recorder();
    const { app: server } = app(engine, { 'orders.js': THROWS }, [api('orders/list', 'orders.js')], { logger });
    const res = await request(server).get('/web0/api/app1/orders/list');
    expect(res.status).toBe(500);
    expect(res.body.code).toBe(270000);
    expect(res.body).not.toHaveProperty('location');
    const failures = lines.filter((l) => l.meta && l.meta.stage);
    expect(failures).toHaveLength(1);
    const [{ level, message, meta }] = failures;
    expect(level).toBe('error');
    expect(meta).toMatchObject({ requestId: res.body.requestId, appId: 'app1', apiPath: 'orders/list', stage: 'call', script: 'orders.js', code: 270000, status: 500, errorName: 'TypeError' });
    expect(meta.message).toBe(res.body.message);
    expect(meta.location).toMatch(/^orders\.js:6:\d+$/);
    expect(message).toContain(`at ${meta.location}`);
    const frames = meta.stack.split('\n');
    expect(frames.length).toBeGreaterThanOrEqual(2); // helper, then fn
    for (const f of frames) expect(f).toMatch(/^at (\S+ \()?orders\.js:\d+:\d+\)?$/);
    expect(frames[1]).toMatch(/orders\.js:3:\d+/);
    expect(meta.stack).not.toMatch(/scriptable-api:|node:|\/work|node_modules/);
  });

  test('exposeErrorLocation: true adds `location` to the error body', async () => {
    const { app: server } = app(engine, { 'orders.js': THROWS }, [api('o', 'orders.js')], { exposeErrorLocation: true });
    const res = await request(server).get('/web0/api/app1/o');
    expect(res.body.location).toMatch(/^orders\.js:6:\d+$/);
    expect(Object.keys(res.body).sort()).toEqual(['code', 'location', 'message', 'requestId']);
  });

  test('syntax errors name their line (JavaScript and TypeScript); a throw while loading too', async () => {
    const { lines, logger } = recorder();
    const scripts = {
      'syntax.js': 'export function fn() {\n  let a = 1;\n  const b = ;\n  return b;\n}',
      'types.ts': 'export function fn(ctx: any): number {\n  const n: number = 1;\n  return n +;\n}',
      'top.js': 'const x = 1;\nthrow new Error("boom at load");\nexport function fn() {}',
    };
    const { app: server } = app(engine, scripts, [api('s', 'syntax.js'), api('t', 'types.ts'), api('l', 'top.js')], { logger, exposeErrorLocation: true });
    const s = await request(server).get('/web0/api/app1/s');
    expect(s.body.code).toBe(270204);
    expect(s.body.location).toMatch(/^syntax\.js:3:\d+$/);
    const t = await request(server).get('/web0/api/app1/t');
    expect(t.body.code).toBe(270204);
    expect(t.body.location).toMatch(/^types\.ts:3:\d+$/);
    const l = await request(server).get('/web0/api/app1/l');
    expect(l.body.code).toBe(270204);
    expect(l.body.location).toMatch(/^top\.js:2:\d+$/);
    const metas = lines.filter((x) => x.meta && x.meta.stage).map((x) => x.meta);
    expect(metas.map((m) => [m.stage, m.code, m.location])).toEqual([
      ['call', 270204, s.body.location],
      ['call', 270204, t.body.location],
      ['call', 270204, l.body.location],
    ]);
  });

  test('a host call that fails is located at its call in the script, also where the rewrite awaits it', async () => {
    const { lines, logger } = recorder();
    const scripts = {
      // async mode (the rewrite awaits the call), uncaught; then caught, its stack read by the script
      'out.js': 'export function fn(ctx) {\n  const x = 1;\n  const r = platform.http.request({ url: "http://127.0.0.1:1/" });\n  return r.status;\n}',
      'caught.js': 'export function fn(ctx) {\n  try {\n    platform.http.request({ url: "http://127.0.0.1:1/" });\n  } catch (e) {\n    return { name: e.name, code: e.code, stack: e.stack };\n  }\n}',
      // blocking mode (a host call in a callback): the same place
      'cb.js': 'export function fn(ctx) {\n  const x = 1;\n  [1].forEach(() => platform.http.request({ url: "http://127.0.0.1:1/" }));\n}',
    };
    const { app: server } = app(engine, scripts, [api('o', 'out.js'), api('c', 'caught.js'), api('b', 'cb.js')], { logger, exposeErrorLocation: true });
    const o = await request(server).get('/web0/api/app1/o');
    expect([o.status, o.body.code]).toEqual([500, 270500]);
    expect(o.body.location).toMatch(/^out\.js:3:\d+$/);
    const c = await request(server).get('/web0/api/app1/c');
    expect(c.body).toMatchObject({ name: 'ApiError', code: 270500 });
    expect(c.body.stack).toMatch(/at fn \(caught\.js:3:\d+\)/);
    const b = await request(server).get('/web0/api/app1/b');
    expect(b.body.location).toMatch(/^cb\.js:3:\d+$/);
    const [meta] = lines.filter((x) => x.meta && x.meta.stage === 'call').map((x) => x.meta);
    expect(meta).toMatchObject({ script: 'out.js', errorName: 'ApiError', location: o.body.location });
    expect(meta.stack).toMatch(/^at fn \(out\.js:3:\d+\)$/);
  });

  test("a syntax error's column is the offending token's: `const b = ;` points at the ';' (column 13), in JavaScript and TypeScript", async () => {
    const scripts = {
      'syntax.js': 'export function fn() {\n  let a = 1;\n  const b = ;\n  return b;\n}',
      'types.ts': 'export function fn(): number {\n  let a: number = 1;\n  const b = ;\n  return b;\n}',
    };
    const { app: server } = app(engine, scripts, [api('s', 'syntax.js'), api('t', 'types.ts')], { exposeErrorLocation: true });
    expect((await request(server).get('/web0/api/app1/s')).body.location).toBe('syntax.js:3:13');
    expect((await request(server).get('/web0/api/app1/t')).body.location).toBe('types.ts:3:13');
  });

  test('a column on a line that starts with export points inside that line (vm2 lowers exports to CommonJS)', async () => {
    const scripts = { 'one.js': 'export function fn() { return null.x; }', 'two.js': 'const a = 1; export class K { m() { return null.y; } }\nexport function fn() { return new K().m(); }' };
    const { app: server } = app(engine, scripts, [api('one', 'one.js'), api('two', 'two.js')], { exposeErrorLocation: true });
    const one = await request(server).get('/web0/api/app1/one');
    const column = Number(one.body.location.split(':')[2]);
    expect(one.body.location).toMatch(/^one\.js:1:/);
    expect(column).toBeGreaterThanOrEqual(scripts['one.js'].indexOf('null.x') + 1);
    expect(column).toBeLessThanOrEqual(scripts['one.js'].indexOf('null.x') + 'null.x'.length);
    const two = await request(server).get('/web0/api/app1/two');
    const col2 = Number(two.body.location.split(':')[2]);
    expect(two.body.location).toMatch(/^two\.js:1:/);
    expect(col2).toBeGreaterThanOrEqual(scripts['two.js'].indexOf('null.y') + 1);
    expect(col2).toBeLessThanOrEqual(scripts['two.js'].indexOf('null.y') + 'null.y'.length);
  });

  test("a thrown message or name longer than a console line is cut in the log, as console lines are; the error body keeps the message", async () => {
    // (a tenant's throw must not write megabytes into the host's log per request: console.* is capped at 8 KiB)
    const { lines, logger } = recorder();
    const script = 'export function fn() {\n  const e = new Error("m".repeat(50000));\n  e.name = "N".repeat(10000);\n  throw e;\n}';
    const { app: server } = app(engine, { 'big.js': script }, [api('big', 'big.js')], { logger });
    const res = await request(server).get('/web0/api/app1/big');
    expect(res.body.message === "m".repeat(50000)).toBe(true);
    const [{ message, meta }] = lines.filter((l) => l.meta && l.meta.stage);
    // (lengths, not the texts: a failure would print them whole)
    expect([meta.message.length, meta.message === `${'m'.repeat(8191)}…`]).toEqual([8192, true]);
    expect([meta.errorName.length, meta.errorName === `${'N'.repeat(8191)}…`]).toEqual([8192, true]);
    expect(message.length).toBeLessThan(9000);
  });

  test('an error with a long message (V8 heads its stack with it) is still located', async () => {
    const { lines, logger } = recorder();
    const script = 'export function fn(ctx) {\n  throw new Error("a response body: " + "b".repeat(20000));\n}';
    const { app: server } = app(engine, { 'long.js': script }, [api('long', 'long.js')], { logger });
    await request(server).get('/web0/api/app1/long');
    const [{ meta }] = lines.filter((l) => l.meta && l.meta.stage);
    expect(meta.location).toMatch(/^long\.js:2:\d+$/);
    expect(meta.stack).toMatch(/^at fn \(long\.js:2:\d+\)$/);
  });

  test('a hook failure names its stage and script', async () => {
    const { lines, logger } = recorder();
    const scripts = { 'main.js': 'export function fn() { return 1 }', 'hooks.js': 'export function before(ctx) {\n  undefinedThing();\n}' };
    const { app: server } = app(engine, scripts, [api('h', 'main.js', 'fn', { before: { script: 'hooks.js', function: 'before' } })], { logger });
    const res = await request(server).get('/web0/api/app1/h');
    expect(res.status).toBe(500);
    const [meta] = lines.filter((x) => x.meta && x.meta.stage).map((x) => x.meta);
    expect(meta).toMatchObject({ stage: 'before', script: 'hooks.js', errorName: 'ReferenceError' });
    expect(meta.location).toMatch(/^hooks\.js:2:\d+$/);
  });

  test('a BigInt result is INVALID_RESULT (270300), not a script error', async () => {
    const { lines, logger } = recorder();
    const { app: server } = app(engine, { 'big.js': 'export function fn() { return { n: 10n } }' }, [api('b', 'big.js')], { logger });
    const res = await request(server).get('/web0/api/app1/b');
    expect(res.status).toBe(500);
    expect(res.body.code).toBe(270300);
    expect(res.body.message).toMatch(/BigInt/i);
    expect(lines.find((x) => x.meta && x.meta.stage).meta).toMatchObject({ code: 270300, stage: 'call' });
  });
});

describe('host-side failures', () => {
  test('an unknown path (info), a rate limit rejection (info) and an abort with a status each log one line', async () => {
    const { lines, logger } = recorder();
    const scripts = { 'main.js': 'export function fn() { return 1 }', 'deny.js': 'export function fn() { platform.app.abort("no token", 401) }' };
    const apis = [api('rl', 'main.js', 'fn', { rateLimit: { requestsPerSecond: 0.001, identifier: 'global' } }), api('deny', 'deny.js')];
    const { app: server } = app('quickjs', scripts, apis, { logger });
    expect((await request(server).get('/web0/api/app1/nope')).status).toBe(404);
    expect((await request(server).get('/web0/api/app1/rl')).status).toBe(200);
    const limited = await request(server).get('/web0/api/app1/rl');
    expect(limited.status).toBe(429);
    const denied = await request(server).get('/web0/api/app1/deny');
    expect(denied.status).toBe(401);
    const failures = lines.filter((x) => x.meta && x.meta.stage);
    expect(failures.map((f) => [f.level, f.meta.stage, f.meta.status, f.meta.code])).toEqual([
      ['info', 'route', 404, 270100],
      ['info', 'rateLimit', 429, 270400],
      ['info', 'call', 401, 270001],
    ]);
    expect(failures[0].meta).toMatchObject({ appId: 'app1', apiPath: 'nope' });
    expect(failures[1].meta.requestId).toBe(limited.body.requestId);
  });

  test('an upload over a limit is logged at stage body, as a body over bodyLimit; an invalid automation at stage definition, as an invalid API definition', async () => {
    const { MemoryRegistry } = require('../..');
    const { lines, logger } = recorder();
    const registry = new MemoryRegistry({
      apps: {
        app1: {
          scripts: { 'main.js': 'export function fn(ctx) { return ctx.getParts().length }' },
          apis: [api('up', 'main.js', 'fn', { methods: ['POST'] }), { path: 'auto', call: { automation: 'steps' }, returnType: 'JSON' }],
        },
      },
    });
    // (a registry of one's own: MemoryRegistry refuses both when they are put)
    const getApi = registry.getApi.bind(registry);
    registry.getApi = (appId, path, stage) => (path === 'bad' ? { path: 'bad', returnType: 'JSON' } : getApi(appId, path, stage));
    registry.getAutomation = () => ({ id: 'steps', steps: [{ type: 'dialog' }] });
    const x = makeApp({ registry, router: { logger, bodyLimit: 64, upload: { fileSize: 10 } } });
    routers.push(x.router);
    const stageOf = (res) => lines.find((l) => l.meta && l.meta.requestId === res.body.requestId).meta.stage;
    const upload = await request(x.app).post('/web0/api/app1/up').attach('f', Buffer.alloc(100), 'f.bin');
    expect([upload.status, upload.body.code]).toEqual([413, 270110]);
    expect(stageOf(upload)).toBe('body');
    const body = await request(x.app).post('/web0/api/app1/up').set('Content-Type', 'text/plain').send('x'.repeat(100));
    expect([body.status, body.body.code]).toEqual([413, 270102]);
    expect(stageOf(body)).toBe('body');
    const automation = await request(x.app).get('/web0/api/app1/auto');
    expect([automation.status, automation.body.code]).toEqual([500, 270604]);
    expect(stageOf(automation)).toBe('definition');
    const definition = await request(x.app).get('/web0/api/app1/bad');
    expect([definition.status, definition.body.code]).toEqual([500, 270600]);
    expect(stageOf(definition)).toBe('definition');
  });

  test('an invalid API or automation definition logs one line, the failure line with its request id, not a second line without one', async () => {
    const { MemoryRegistry } = require('../..');
    const { lines, logger } = recorder();
    const registry = new MemoryRegistry({ apps: { app1: { scripts: {}, apis: [{ path: 'auto', call: { automation: 'steps' }, returnType: 'JSON' }] } } });
    const getApi = registry.getApi.bind(registry);
    registry.getApi = (appId, path, stage) => (path === 'bad' ? { path: 'bad', returnType: 'JSON' } : getApi(appId, path, stage));
    registry.getAutomation = () => ({ id: 'steps', steps: [{ type: 'dialog' }] });
    const x = makeApp({ registry, router: { logger } });
    routers.push(x.router);
    for (const [p, code] of [['bad', 270600], ['auto', 270604]]) {
      lines.length = 0;
      const res = await request(x.app).get(`/web0/api/app1/${p}`);
      expect([p, res.body.code]).toEqual([p, code]);
      expect(lines.map((l) => [l.level, l.meta && l.meta.requestId])).toEqual([['error', res.body.requestId]]);
      expect(lines[0].message).toContain(res.body.message);
    }
  });

  test("a request a closing router refuses (503 SHUTTING_DOWN) is logged at stage engine, as the README says, not as a host failure", async () => {
    const { lines, logger } = recorder();
    const x = makeApp({ router: { logger }, apps: { app1: { scripts: { 'main.js': 'export function fn() { return 1 }' }, apis: [api('p', 'main.js')] } } });
    await x.router.close();
    const res = await request(x.app).get('/web0/api/app1/p');
    expect([res.status, res.headers['retry-after'], res.body.code]).toEqual([503, '1', 270208]);
    const line = lines.find((l) => l.meta && l.meta.requestId === res.body.requestId);
    expect([line.level, line.meta.stage]).toEqual(['error', 'engine']);
  });

  test("an unexpected host failure (a registry that throws) is logged as the body says it, with the error as its cause", async () => {
    const { lines, logger } = recorder();
    const registry = {
      getApi: () => {
        throw new Error('connect ECONNREFUSED 10.0.0.5:5432');
      },
      getScript: () => undefined,
    };
    const x = makeApp({ registry, router: { logger } });
    routers.push(x.router);
    const res = await request(x.app).get('/web0/api/app1/p');
    expect(res.body).toEqual({ requestId: res.headers['x-request-id'], message: 'A host service failed', code: 270602 });
    const line = lines.find((l) => l.meta && l.meta.requestId === res.body.requestId);
    expect(line.meta).toMatchObject({ stage: 'host', code: 270602, status: 500, message: res.body.message, cause: 'connect ECONNREFUSED 10.0.0.5:5432', hostStack: expect.stringMatching(/at getApi/) });
    expect(line.message).toMatch(/failed in host: 500 270602 A host service failed \(connect ECONNREFUSED 10\.0\.0\.5:5432\)$/);
  });

  test("a host failure's cause (a preview authorize that throws, a storage that fails) is in its log line, never in the body", async () => {
    const { lines, logger } = recorder();
    const scripts = { 'main.js': 'export function fn() { return 1 }', 'file.js': 'export function fn() { return { storagePath: "report.pdf" } }' };
    const authorize = () => {
      throw new Error('authorization backend down: connect ECONNREFUSED 10.0.0.9:443');
    };
    const down = () => Promise.reject(new Error('S3 GetObject: connect ETIMEDOUT 10.0.0.7:9000'));
    const storage = { put: down, get: down, stat: down, delete: down };
    const apis = [api('p', 'main.js'), { ...api('f', 'file.js'), returnType: 'File' }];
    const { app: server } = app('quickjs', scripts, apis, { logger, storage, preview: { authorize } });
    const res = await request(server).get('/web0/api/preview/app1/p');
    expect(res.status).toBe(500);
    expect(res.body).toEqual({ requestId: res.body.requestId, message: 'The preview authorization failed', code: 270602 });
    const line = lines.find((l) => l.meta && l.meta.requestId === res.body.requestId);
    expect(line.message).toMatch(/failed in host: 500 270602 The preview authorization failed \(authorization backend down: connect ECONNREFUSED 10\.0\.0\.9:443\)/);
    expect(line.meta.cause).toBe('authorization backend down: connect ECONNREFUSED 10.0.0.9:443');
    expect(line.meta.hostStack).toMatch(/at authorize/);

    const file = await request(server).get('/web0/api/app1/f');
    expect(file.status).toBe(500);
    expect(file.body).toEqual({ requestId: file.body.requestId, message: "File 'report.pdf' cannot be read", code: 270602 });
    const fileLine = lines.find((l) => l.meta && l.meta.requestId === file.body.requestId);
    expect(fileLine.meta.cause).toBe('S3 GetObject: connect ETIMEDOUT 10.0.0.7:9000');
  });

  test('a registry or a preview authorize that throws a value that cannot be read (a stack getter that throws, a revoked proxy) gets its 500 HOST_ERROR and its line; the process lives', async () => {
    const { lines, logger } = recorder();
    const unreadableStack = () => Object.defineProperty(new Error('pool exhausted'), 'stack', { get() { throw new Error('no stack'); } });
    const revoked = () => {
      const { proxy, revoke } = Proxy.revocable({}, {});
      revoke();
      return proxy;
    };
    const registry = {
      getApi: (_appId, path) => {
        throw path === 'stack' ? unreadableStack() : revoked();
      },
      getScript: () => undefined,
    };
    const authorize = () => {
      throw unreadableStack();
    };
    for (const fallthrough of [false, true]) {
      const x = makeApp({ registry, router: { logger, fallthrough, preview: { authorize } } });
      routers.push(x.router);
      for (const [path, message] of [
        ['/web0/api/app1/stack', 'A host service failed'],
        ['/web0/api/app1/revoked', 'A host service failed'],
        ['/web0/api/preview/app1/p', 'The preview authorization failed'],
      ]) {
        // (without an answer, the request waits for good: the router's handler threw as it answered)
        const res = await request(x.app).get(path).timeout(10_000);
        expect([res.status, res.body]).toEqual([500, { requestId: res.headers['x-request-id'], message, code: 270602 }]);
        const line = lines.find((l) => l.meta && l.meta.requestId === res.body.requestId);
        expect(line.meta).toMatchObject({ stage: 'host', code: 270602, status: 500, message });
      }
    }
    expect(lines.find((l) => l.meta && l.meta.cause === 'pool exhausted')).toBeDefined();
  });
});

describe('logger call shapes', () => {
  const SCRIPT = 'export function fn(ctx) { console.log("hello from the script"); return null.x }';

  test('pino (meta first): failure fields and console lines land in the JSON record', async () => {
    const records = [];
    const dest = new Writable({ write(chunk, _enc, cb) { for (const l of String(chunk).split('\n')) if (l) records.push(JSON.parse(l)); cb(); } });
    const logger = pino({ level: 'debug' }, dest);
    const { app: server } = app('quickjs', { 'main.js': SCRIPT }, [api('p', 'main.js')], { logger });
    const res = await request(server).get('/web0/api/app1/p');
    await new Promise((r) => setImmediate(r));
    const consoleLine = records.find((r) => /hello from the script/.test(r.msg));
    expect(consoleLine).toMatchObject({ appId: 'app1', script: 'main.js', requestId: res.body.requestId, level: 30 });
    const failure = records.find((r) => r.stage === 'call');
    expect(failure).toMatchObject({ level: 50, requestId: res.body.requestId, code: 270000, status: 500, apiPath: 'p' });
    expect(failure.location).toMatch(/^main\.js:1:\d+$/);
    expect(failure.msg).toMatch(/failed in call/);
  });

  test('winston (message first): meta fields land in the record', async () => {
    const records = [];
    const logger = winston.createLogger({
      level: 'debug',
      format: winston.format.json(),
      transports: [new winston.transports.Stream({ stream: new Writable({ write(chunk, _e, cb) { records.push(JSON.parse(String(chunk))); cb(); } }) })],
    });
    const { app: server } = app('quickjs', { 'main.js': SCRIPT }, [api('w', 'main.js')], { logger });
    const res = await request(server).get('/web0/api/app1/w');
    await new Promise((r) => setImmediate(r));
    expect(records.find((r) => /hello from the script/.test(r.message))).toMatchObject({ level: 'info', appId: 'app1', script: 'main.js', requestId: res.body.requestId });
    expect(records.find((r) => r.stage === 'call')).toMatchObject({ level: 'error', code: 270000, requestId: res.body.requestId });
  });

  test.each(['quickjs', 'vm2'])('winston: a message holding a printf token (%%d, %%o, %%s) keeps its fields in the record (%s)', async (engine) => {
    const records = [];
    const logger = winston.createLogger({
      level: 'debug',
      format: winston.format.json(),
      transports: [new winston.transports.Stream({ stream: new Writable({ write(chunk, _e, cb) { records.push(JSON.parse(String(chunk))); cb(); } }) })],
    });
    // (winston leaves the meta of `(message, meta)` out of the record when the message has a token)
    const src = 'export function fn(ctx) { console.log("sale: 10%off"); throw new Error("at 5%done") }';
    const { app: server } = app(engine, { 'main.js': src }, [api('w', 'main.js')], { logger });
    const res = await request(server).get('/web0/api/app1/w');
    const unknown = await request(server).get('/web0/api/a%25s/x');
    await new Promise((r) => setImmediate(r));
    expect(records.find((r) => /sale: 10%off/.test(r.message))).toMatchObject({ level: 'info', message: '[app1/main.js] sale: 10%off', appId: 'app1', script: 'main.js', requestId: res.body.requestId });
    const failure = records.find((r) => /at 5%done/.test(r.message));
    expect(failure).toMatchObject({ level: 'error', stage: 'call', code: 270000, status: 500, requestId: res.body.requestId, appId: 'app1', apiPath: 'w', script: 'main.js' });
    expect(failure.message).toMatch(/^request \S+ app1\/w failed in call: 500 270000 at 5%done at main\.js:1:\d+$/);
    expect(records.find((r) => /a%s\/x/.test(r.message))).toMatchObject({ level: 'info', stage: 'route', status: 404, appId: 'a%s', requestId: unknown.body.requestId });
  });

  test('console as the logger: a script message holding a format token (%c, %o) neither drops nor swallows the fields', async () => {
    const util = require('node:util');
    const spy = jest.spyOn(console, 'info').mockImplementation(() => {});
    try {
      const { app: server } = app('quickjs', { 'main.js': 'export function fn(ctx) { console.log("%c%o hidden"); return 1 }' }, [api('c', 'main.js')], { logger: console });
      const res = await request(server).get('/web0/api/app1/c');
      await new Promise((r) => setImmediate(r));
      const printed = spy.mock.calls.map((args) => util.format(...args));
      const line = printed.find((l) => l.includes('hidden'));
      expect(line).toMatch(/^\[app1\/main\.js\] %c%o hidden \{/);
      expect(line).toContain(`requestId: '${res.headers['x-request-id']}'`);
    } finally {
      spy.mockRestore();
    }
  });

  test('a Console of the host\'s own (new Console(stream), a log file) as the logger: a format token (%c, %o) in a script\'s message neither drops nor swallows the fields', async () => {
    const { Console } = require('node:console');
    let out = '';
    const sink = new Writable({ write(chunk, _e, cb) { out += chunk; cb(); } });
    const logger = new Console({ stdout: sink, stderr: sink });
    const source = 'export function fn(ctx) { console.log("50%c off"); throw new Error("done 5%o") }';
    const { app: server } = app('quickjs', { 'main.js': source }, [api('c', 'main.js')], { logger });
    const res = await request(server).get('/web0/api/app1/c');
    expect(res.status).toBe(500);
    await new Promise((r) => setImmediate(r));
    const id = res.headers['x-request-id'];
    // (each line keeps its text as the script wrote it, then its fields)
    expect(out).toMatch(new RegExp(`^\\[app1/main\\.js\\] 50%c off \\{[^}]*requestId: '${id}'`, 'm'));
    expect(out).toMatch(new RegExp(`failed in call: 500 270000 done 5%o at main\\.js:1:\\d+ \\{[^}]*requestId: '${id}'`));
  });

  test("loggerStyle: 'meta-first' for a logger that is not recognised; a bad value is a ConfigError", () => {
    const calls = [];
    const logger = { info: (...a) => calls.push(a), warn: () => {}, error: () => {} };
    const { adaptLogger } = require('../../dist/cjs/logging');
    adaptLogger(logger, 'meta-first').info('m', { a: 1 });
    expect(calls).toEqual([[{ a: 1 }, 'm']]);
    const { createApiRouter, MemoryRegistry } = require('../..');
    expect(() => createApiRouter({ registry: new MemoryRegistry(), loggerStyle: 'json' })).toThrow(/invalid loggerStyle/);
    // (it says how to call a logger of one's own: without one it would do nothing)
    expect(() => createApiRouter({ registry: new MemoryRegistry(), loggerStyle: 'meta-first' })).toThrow('invalid loggerStyle: says how to call a logger of your own: give it with `logger`');
    expect(() => createApiRouter({ registry: new MemoryRegistry(), logger: false, loggerStyle: 'meta-first' })).toThrow('(false turns logging off)');
  });

  test('the default console logger keeps meta (request id, app, script) on the line', () => {
    const spy = jest.spyOn(console, 'info').mockImplementation(() => {});
    try {
      defaultLogger('production').info('[app1/main.js] hi', { appId: 'app1', script: 'main.js', requestId: 'r-1' });
      expect(spy).toHaveBeenCalledWith('scriptable-api [app1/main.js] hi {"appId":"app1","script":"main.js","requestId":"r-1"}');
    } finally {
      spy.mockRestore();
    }
    expect(defaultLogger('test')).toBeUndefined();
  });

  test('the default console logger writes one line per message: line breaks and other control characters are escaped', () => {
    const spy = jest.spyOn(console, 'info').mockImplementation(() => {});
    try {
      // (an app id from a request path `%0A`, or a script's message, must not forge a line of its own)
      defaultLogger('production').info("No API 'y' in app 'x\n2026-01-01T00:00:00.000Z GET /admin 200'\r\u001b[2J\u0085\u2028", { appId: 'x\ny' });
      expect(spy).toHaveBeenCalledWith(
        'scriptable-api No API \'y\' in app \'x\\n2026-01-01T00:00:00.000Z GET /admin 200\'\\r\\u001b[2J\\u0085\\u2028 {"appId":"x\\ny"}',
      );
      defaultLogger('production').info('tabs\tstay');
      expect(spy).toHaveBeenLastCalledWith('scriptable-api tabs\tstay');
    } finally {
      spy.mockRestore();
    }
  });
});

test('a logger that throws (a transport down) fails no request: the error body and the next requests go out', async () => {
  const failing = () => {
    throw new Error('log transport is down');
  };
  const { app: a } = app('quickjs', { 'main.js': THROWS, 'ok.js': 'export function fn(ctx) { console.error("noted"); return { ok: true } }' }, [api('p', 'main.js'), api('ok', 'ok.js')], {
    logger: { debug: failing, info: failing, warn: failing, error: failing },
  });
  const failed = await request(a).get('/web0/api/app1/p').timeout(10000);
  expect([failed.status, failed.body.code]).toEqual([500, 270000]);
  const unknown = await request(a).get('/web0/api/app1/nope').timeout(10000);
  expect(unknown.status).toBe(404);
  const ok = await request(a).get('/web0/api/app1/ok').timeout(10000);
  expect([ok.status, ok.body]).toEqual([200, { ok: true }]);
});

describe.each(['quickjs', 'vm2'])('%s: an onError hook that throws', (engine) => {
  test("the client gets onError's failure; the log line keeps the call's own failure it was handling", async () => {
    const { lines, logger } = recorder();
    const scripts = {
      'c.js': 'export function fn(ctx) {\n  const x = 1;\n  throw new Error("the call broke");\n}',
      'h.js': 'export function onError(ctx, error) {\n  null.handled;\n}',
    };
    const { app: server } = app(engine, scripts, [api('p', 'c.js', 'fn', { onError: { script: 'h.js', function: 'onError' } })], { logger });
    const res = await request(server).get('/web0/api/app1/p');
    expect(res.status).toBe(500);
    expect(res.body).toEqual({ requestId: res.headers['x-request-id'], message: expect.stringMatching(/null/), code: 270000 });
    const [line] = lines.filter((l) => l.meta && l.meta.stage === 'onError');
    expect(line.meta).toMatchObject({ script: 'h.js', location: expect.stringMatching(/^h\.js:2:\d+$/), callFailure: { code: 270000, message: 'the call broke', script: 'c.js', location: expect.stringMatching(/^c\.js:3:\d+$/) } });
    expect(line.message).toMatch(/failed in onError: 500 270000 .* at h\.js:2:\d+ \(handling the call's failure: 270000 the call broke at c\.js:3:\d+\)$/);
    expect(JSON.stringify(res.body)).not.toMatch(/the call broke/);
  });
});

describe.each(['quickjs', 'vm2'])('%s: an onError answer the host refuses', (engine) => {
  test("its log line (stage response) names the call's failure the hook was handling: a framing header, a missing file", async () => {
    const { lines, logger } = recorder();
    const scripts = {
      'c.js': 'export function fn(ctx) {\n  throw new Error("the call broke");\n}',
      'h.js': 'export function header(ctx, error) { ctx.response.setHeader("Connection", "close"); return { error } }\nexport function file(ctx, error) { return { path: "gone.txt" } }',
    };
    const os = require('node:os');
    const fs = require('node:fs');
    const path = require('node:path');
    const sandboxDir = fs.mkdtempSync(path.join(os.tmpdir(), 'sapi-onerror-answer-'));
    const apis = [
      api('header', 'c.js', 'fn', { onError: { script: 'h.js', function: 'header' } }),
      { ...api('file', 'c.js', 'fn', { onError: { script: 'h.js', function: 'file' } }), returnType: 'File' },
    ];
    const { app: server } = app(engine, scripts, apis, { logger, sandboxDir });
    for (const [p, status, code] of [['header', 500, 270304], ['file', 404, 270301]]) {
      const res = await request(server).get(`/web0/api/app1/${p}`);
      expect([p, res.status, res.body.code]).toEqual([p, status, code]);
      const line = lines.find((l) => l.meta && l.meta.requestId === res.body.requestId);
      expect(line.meta).toMatchObject({ stage: 'response', code, callFailure: { code: 270000, message: 'the call broke', script: 'c.js', location: expect.stringMatching(/^c\.js:2:\d+$/) } });
      expect(line.message).toMatch(/\(handling the call's failure: 270000 the call broke at c\.js:2:\d+\)$/);
      expect(JSON.stringify(res.body)).not.toMatch(/the call broke/);
    }
    // (a response the call answered itself has nothing to name)
    const plain = await request(server).get('/web0/api/app1/nope');
    expect(lines.find((l) => l.meta && l.meta.requestId === plain.body.requestId).meta.callFailure).toBeUndefined();
    fs.rmSync(sandboxDir, { recursive: true, force: true });
  });
});

describe('a File download cut short', () => {
  const http = require('node:http');
  const { Readable } = require('node:stream');
  /** A storage whose `fail.bin` breaks after its first KiB and whose `slow.bin` trickles until destroyed. */
  const storage = {
    async put() {
      throw new Error('read-only');
    },
    async delete() {},
    async stat() {
      return { size: 1_000_000, modified: new Date(0), etag: '"x"' };
    },
    async get(_appId, p) {
      let n = 0;
      const stream = new Readable({
        read() {
          if (n++ === 0) this.push(Buffer.alloc(1024));
          else if (p === 'fail.bin') setImmediate(() => this.destroy(new Error('the disk went away')));
          else setTimeout(() => this.push(Buffer.alloc(16)), 50);
        },
      });
      return { size: 1_000_000, modified: new Date(0), etag: '"x"', stream };
    },
  };
  const get = (server, p, leave) =>
    new Promise((resolve) => {
      const req = http.get({ host: '127.0.0.1', port: server.address().port, path: `/web0/api/app1/${p}`, agent: false }, (res) => {
        res.on('data', () => {
          if (leave) req.destroy();
        });
        res.on('error', () => undefined);
        res.on('close', () => resolve({ status: res.statusCode, requestId: res.headers['x-request-id'], complete: res.complete }));
      });
      req.on('error', () => undefined);
    });

  test("a storage that fails mid-stream is logged and counted as the server's failure (500), a client that leaves as 499", async () => {
    const { lines, logger } = recorder();
    const fileApi = (p) => ({ path: p, call: { script: 'f.js', function: 'fn' }, returnType: 'File' });
    const { app: a, router } = app('quickjs', { 'f.js': 'export function fn(ctx) { return { storagePath: ctx.path + ".bin" } }' }, [fileApi('fail'), fileApi('slow')], { logger, storage });
    const server = await new Promise((resolve) => {
      const s = a.listen(0, '127.0.0.1', () => resolve(s));
    });
    try {
      const failed = await get(server, 'fail', false);
      expect([failed.status, failed.complete]).toEqual([200, false]);
      const left = await get(server, 'slow', true);
      expect(left.status).toBe(200);
      // (the router counts a response when it closes)
      const until = Date.now() + 10_000;
      const count = async (api, status) => {
        const text = await router.metrics.text();
        const line = text.split('\n').find((l) => l.startsWith('scriptable_api_requests_total{') && l.includes(`api="${api}"`) && l.includes(`status="${status}"`));
        return line === undefined ? 0 : Number(line.slice(line.lastIndexOf(' ') + 1));
      };
      while ((await count('slow', 499)) === 0 && Date.now() < until) await new Promise((r) => setTimeout(r, 20));
      expect([await count('fail', 500), await count('fail', 499)]).toEqual([1, 0]);
      expect(await count('slow', 499)).toBe(1);
      const failures = lines.filter((l) => l.meta && l.meta.stage);
      expect(failures).toHaveLength(1);
      expect(failures[0]).toMatchObject({ level: 'error', meta: { requestId: failed.requestId, appId: 'app1', apiPath: 'fail', stage: 'response', status: 500, message: 'A host service failed', cause: expect.stringMatching(/the disk went away/) } });
      expect(failures[0].message).toMatch(/the disk went away/);
    } finally {
      await new Promise((r) => server.close(r));
    }
  });
});
