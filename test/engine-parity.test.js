'use strict';
// Engine parity: the same script on QuickJS (the default) and on vm2 gives the same response and
// the same log lines. Each case runs on both engines and the two are compared, with the one
// difference the README documents taken out: the column of a location (the engine's own).
// The differences docs/script-engine.md lists (built-ins, the engine's own error messages, ...)
// are not in the corpus, or (`compare: false`) are asserted apart at the end.
const request = require('supertest');
const { makeApp } = require('./helpers/app');

const CASES = {
  // values returned
  date: `export function fn() { return { d: new Date(0), bad: new Date(NaN) } }`,
  bigint: `export function fn() { return { b: 10n } }`,
  mapSet: `export function fn() { return { m: new Map([[1, 2]]), s: new Set([1]) } }`,
  typed: `export function fn() { return { t: new Uint8Array([1, 2]), ab: new ArrayBuffer(2) } }`,
  numbers: `export function fn() { return [NaN, Infinity, -Infinity, -0, 1e21] }`,
  undefinedInside: `export function fn() { return { a: [undefined, function () {}, Symbol('x')], u: undefined, f() {}, s: Symbol('y') } }`,
  sparse: `export function fn() { const a = [1]; a[3] = 4; a.x = 2; return a }`,
  getter: `export function fn() { return { get g() { return 5 } } }`,
  classInstance: `class A { constructor() { this.x = 1 } get y() { return 2 } }\nexport function fn() { return new A() }`,
  symbolKey: `export function fn() { return { [Symbol('k')]: 1, a: 2 } }`,
  toJSON: `export function fn() { return { a: { toJSON() { return 'T' } }, b: { toJSON(k) { return k } } } }`,
  cyclic: `export function fn() { const a = {}; a.self = a; return a }`,
  cyclicInArray: `export function fn() { const a = { list: [] }; a.list.push({ up: a }); return a }`,
  cyclicToJSON: `export function fn() {\n  const a = {}; a.self = a;\n  return platform.utils.toJSON(a);\n}`,
  cyclicCaught: `export function fn() { const a = {}; a.self = [a]; try { platform.utils.toJSON(a) } catch (e) { return [e.name, e.message, e instanceof TypeError] } }`,
  tooDeep: `export function fn() { let a = {}; for (let i = 0; i < 150; i++) a = { a }; return a }`,
  large: `export function fn() { return 'x'.repeat(1e6).length }`,
  nothing: `export function fn() {}`,
  boxed: `export function fn() { return [new String('s'), new Number(1), new Boolean(false)] }`,
  nullPrototype: `export function fn() { const o = Object.create(null); o.a = 1; return o }`,
  promiseOf: `export function fn() { return Promise.resolve({ a: 1 }) }`,
  text: { src: `export function fn() { return { toString() { return 'tt' } } }`, returnType: 'Text' },
  textArray: { src: `export function fn() { return [1, [2, 3], null] }`, returnType: 'Text' },
  redirect: { src: `export function fn() { return '/x' }`, returnType: 'Redirect' },
  getterThrows: `export function fn() { return { get g() { throw new Error('getter bad') } } }`,
  toJSONThrows: `export function fn() { return { a: { toJSON() { throw new RangeError('toJSON bad') } } } }`,
  textThrows: { src: `export function fn() { return { toString() { throw new Error('toString bad') } } }`, returnType: 'Text' },
  numbers2: `export function fn() { return [0.1 + 0.2, 1e-7, 123456789012345680000, 5e-324, (1e21).toFixed(2), (255).toString(16), (0.5).toExponential(), (123.456).toPrecision(4)] }`,
  json: `export function fn() { return [JSON.parse('{"__proto__": 1}'), JSON.parse('1e400'), JSON.stringify('\\u2028'), JSON.stringify({ a: [new Date(0)] })] }`,
  dates: `export function fn() { return [Date.parse('2020-01-01'), Date.parse('2020-01-01T00:00:00'), Date.UTC(2020, 0), new Date(0).getTimezoneOffset(), new Date(0).toISOString()] }`,
  // hooks
  beforeAfter: { src: `export function fn() { return 1 }`, before: 'before', after: 'after' },
  beforeAbort: { src: `export function fn() { return 1 }`, before: 'beforeAbort' },
  afterThrow: { src: `export function fn() { return 1 }`, after: 'afterThrow' },
  onError: { src: `export function fn() { throw new RangeError('call bad') }`, onError: 'onError' },
  onErrorAbort: { src: `export function fn() { platform.app.abort('ab', 409) }`, onError: 'onError' },
  onErrorThrow: { src: `export function fn() {\n  throw { code: 5, message: 'plain' };\n}`, onError: 'onErrorThrow' },
  // errors thrown
  errorString: `export function fn() { throw 'a string' }`,
  errorNumber: `export function fn() { throw 42 }`,
  errorObject: `export function fn() { throw { message: 'obj', code: 270401 } }`,
  errorNull: `export function fn() { throw null }`,
  errorSymbol: `export function fn() { throw Symbol('s') }`,
  errorCode: `export function fn() { const e = new Error('coded'); e.code = 123; e.status = 418; throw e }`,
  errorNoMessage: `export function fn() { throw new Error() }`,
  errorSubclass: `class AppError extends Error {\n  constructor(m) { super(m); this.name = 'AppError' }\n}\nclass NotFound extends AppError {}\nexport function fn() {\n  throw new NotFound('missing');\n}`,
  errorSubclassMade: `class AppError extends TypeError {\n  constructor(m) { super(m) }\n}\nfunction make(m) {\n  return new AppError(m);\n}\nexport function fn() {\n  console.log(make('logged'));\n  throw make('thrown');\n}`,
  errorLine: `function inner() {\n  throw new Error('deep');\n}\nexport function fn() {\n  return inner();\n}`,
  asyncRejection: `export async function fn() { await null; throw new TypeError('async bad') }`,
  promiseRejection: `export function fn() { return Promise.reject('rs') }`,
  unhandled: `export function fn() { Promise.reject(new Error('loose')); (async () => { throw new Error('loose2') })(); return 'ok' }`,
  neverSettles: `export function fn() { return new Promise(() => {}) }`,
  // platform.app.abort
  abort: `export function fn() { platform.app.abort() }`,
  abortStatus: `export function fn() { platform.app.abort('msg', 403) }`,
  abortCaught: `export function fn() { try { platform.app.abort('m', 401) } catch (e) { return [e.name, e.message] } }`,
  abortLater: `export async function fn() { await null; platform.app.abort('later', 409) }`,
  // console
  console: `export function fn() { console.log('a', 1, { x: 1 }, [1, 2], null, undefined); console.warn('w'); console.error('e'); console.log(new Date(0), 10n, Symbol('s'), function f() {}, NaN); const c = {}; c.c = c; console.log(c); return 1 }`,
  // response helpers
  response: `export function fn(ctx) { ctx.response.setStatus(201); ctx.response.setHeader('X-A', 'b'); return { ok: 1 } }`,
  writer: `export function fn(ctx) { const w = ctx.response.getWriter(); w.write('a'); w.print(1); w.println({ x: 1 }); w.print(null); w.print(10n); w.print([1, [2]]) }`,
  outputStream: `export function fn(ctx) { const o = ctx.response.getOutputStream(); o.write([104, 105]); o.write(new Uint8Array([33])) }`,
  sendError: `export function fn(ctx) { ctx.response.sendError(404, 'nope') }`,
  sendErrorBad: `export function fn(ctx) { ctx.response.sendError(-0, { a: 1 }) }`,
  sendRedirect: `export function fn(ctx) { ctx.response.sendRedirect(new String('/y')) }`,
  headers: `export function fn(ctx) { const r = ctx.response; r.setHeader('X-N', 1.5); r.addHeader('X-B', true); r.addHeader('Set-Cookie', 'a=1; Path=/'); r.setIntHeader('X-I', 3.7); r.setDateHeader('X-T', 0); r.setContentType('text/x'); return [r.getHeader('X-N'), r.getStatus(), r.getContentType(), r.getHeaderNames()] }`,
  statusBad: `export function fn(ctx) { ctx.response.setStatus(200.5); return 1 }`,
  request: `export function fn(ctx) { const r = ctx.request; return [r.getMethod(), r.getQueryString(), r.getParameterMap(), r.getParameterValues('q'), r.getCookies(), r.getHeader('x-multi'), r.getContentType(), r.getProtocol(), r.isSecure(), r.getPathInfo(), r.getRequestURI(), ctx.query, ctx.cookies, ctx.path, ctx.method] }`,
  // module forms and strict mode
  exportConst: `export const fn = () => 'arrow'`,
  exportAsync: `export const fn = async () => 'async arrow'`,
  exportDefault: `export default function (ctx) { return 'd' }`,
  strict: `export function fn() { const r = [typeof this, (function () { return typeof this })()]; try { undeclared = 1 } catch (e) { r.push(e.name) } return r }`,
  // failures while loading (the module's own code)
  loadThrow: `const ready = true;\nthrow new RangeError('at load');\nexport function fn() { return 1 }`,
  loadThrowString: `throw 'text at load';\nexport function fn() { return 1 }`,
  syntaxError: { src: `export function fn() {\n  return 1 + ;\n}`, compare: false },
  loadTimeout: `while (true) {}\nexport function fn() { return 1 }`,
};

const HOOKS = `export function before(ctx) { ctx.request.setAttribute('t', new Date(0)) }
export function beforeAbort(ctx) { platform.app.abort('no', 401) }
export function after(ctx, value) { return { value, t: ctx.request.getAttribute('t') } }
export function afterThrow(ctx, value) { throw 'after failed' }
export function onError(ctx, err) { return { handled: err.message, code: err.code, keys: Object.keys(err) } }
export function onErrorThrow(ctx, err) {\n  throw new Error('onError bad');\n}`;

/** A response and its log lines, the column of each `name.js:line:column` taken out. */
function comparable(res, lines) {
  const noColumn = (s) => s.replace(/(\.js:\d+):\d+/g, '$1');
  // (the body's length moves with the column's digits: the body itself is compared)
  // (an octet-stream body is a Buffer: its text is compared)
  const text = res.text ?? (Buffer.isBuffer(res.body) ? res.body.toString('latin1') : '');
  const body = noColumn(text.replace(/"requestId":"[^"]*",?/, ''));
  const headers = { ...res.headers };
  for (const h of ['date', 'etag', 'content-length', 'x-request-id', 'connection', 'keep-alive']) delete headers[h];
  return {
    status: res.status,
    headers,
    body,
    logs: lines.map(([level, text, meta]) => [level, noColumn(text.replace(/[0-9a-f-]{36}/g, 'RID')), JSON.parse(noColumn(JSON.stringify({ ...meta, requestId: undefined })))]),
  };
}

async function runAll(engine) {
  const lines = [];
  const log = (level) => (text, meta) => lines.push([level, String(text), meta ?? {}]);
  const logger = { debug: log('debug'), info: log('info'), warn: log('warn'), error: log('error') };
  const scripts = { 'hooks.js': HOOKS };
  const apis = [];
  for (const [name, c] of Object.entries(CASES)) {
    scripts[`${name}.js`] = typeof c === 'string' ? c : c.src;
    const hooks = {};
    for (const stage of ['before', 'after', 'onError']) if (c[stage]) hooks[stage] = { script: 'hooks.js', function: c[stage] };
    apis.push({ path: name, call: { script: `${name}.js`, function: 'fn' }, returnType: c.returnType ?? 'JSON', ...hooks });
  }
  const { app, router } = makeApp({ apps: { a: { scripts, apis } }, router: { engine, logger, exposeErrorLocation: true, scriptTimeoutMs: 5000 } });
  const out = {};
  try {
    for (const name of Object.keys(CASES)) {
      const res = await request(app).get(`/web0/api/a/${name}?q=1&q=2`).set('X-Multi', 'a').set('Cookie', 'c=1; d=2');
      const id = res.headers['x-request-id'];
      // (the request's own lines: its failure line and its console lines carry its id)
      out[name] = comparable(res, lines.filter(([, , meta]) => meta.requestId === id));
    }
  } finally {
    await router.close();
  }
  return out;
}

describe('the same script on QuickJS and vm2', () => {
  const results = {};
  beforeAll(async () => {
    results.quickjs = await runAll('quickjs');
    results.vm2 = await runAll('vm2');
  }, 120000);

  test.each(Object.keys(CASES).filter((name) => CASES[name].compare !== false))('%s', (name) => {
    expect(results.vm2[name]).toEqual(results.quickjs[name]);
  });

  test('an Error subclass\'s failure is located where it was made, not in its constructor', () => {
    expect(JSON.parse(results.quickjs.errorSubclass.body)).toMatchObject({ message: 'missing', location: 'errorSubclass.js:6' });
    expect(results.quickjs.errorSubclass.logs[0][2]).toMatchObject({ errorName: 'AppError', stack: 'at fn (errorSubclass.js:6)' });
    expect(results.quickjs.errorSubclassMade.logs.map((l) => l[1])).toEqual([
      '[a/errorSubclassMade.js] TypeError: logged\n    at make (errorSubclassMade.js:5)\n    at fn (errorSubclassMade.js:8)',
      'request RID a/errorSubclassMade failed in call: 500 270000 thrown at errorSubclassMade.js:5',
    ]);
  });

  test('the cases ran (the corpus compares what they did)', () => {
    expect(results.quickjs.beforeAfter.body).toBe('{"value":1,"t":0}');
    expect(results.quickjs.outputStream.body).toBe('hi!');
    expect(JSON.parse(results.quickjs.request.body).slice(0, 4)).toEqual(['GET', 'q=1&q=2', { q: ['1', '2'] }, ['1', '2']]);
    expect(results.quickjs.headers.headers).toMatchObject({ 'x-n': '1.5', 'x-i': '3', 'set-cookie': ['a=1; Path=/'] });
    expect(results.quickjs.onError.body).toBe('{"handled":"call bad","code":270000,"keys":["requestId","message","code"]}');
    expect(results.quickjs.onErrorThrow.logs[0][2]).toMatchObject({ stage: 'onError', location: 'hooks.js:7', callFailure: { code: 5, message: 'plain' } });
  });

  test('a syntax error is reported as name.js: SyntaxError: … on both engines (the rest of its words are the parser\'s)', () => {
    for (const engine of ['quickjs', 'vm2']) {
      expect(JSON.parse(results[engine].syntaxError.body)).toMatchObject({ code: 270204, location: 'syntaxError.js:2', message: expect.stringMatching(/^syntaxError\.js: SyntaxError: \S/) });
      expect(results[engine].syntaxError.logs[0][2]).toMatchObject({ errorName: 'SyntaxError', location: 'syntaxError.js:2' });
    }
  });

  test('a cycle is named the same on both engines (QuickJS\'s words)', () => {
    expect(JSON.parse(results.vm2.cyclic.body).message).toBe('Result is not JSON-serializable: circular reference');
    expect(results.vm2.cyclicCaught.body).toBe('["TypeError","circular reference",true]');
    expect(JSON.parse(results.vm2.cyclicToJSON.body)).toMatchObject({ message: 'circular reference', code: 270000, location: 'cyclicToJSON.js:3' });
  });
});
