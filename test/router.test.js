'use strict';
// The processing order and response rules of the spec, end to end through a real Express app,
// run against both engines.
const request = require('supertest');
const { makeApp, oneApi } = require('./helpers/app');

const routers = [];
afterAll(() => Promise.all(routers.map((r) => r.close())));
function track(x) {
  routers.push(x.router);
  return x;
}

describe.each(['quickjs', 'vm2'])('router with the %s engine', (engine) => {
  const api = (source, def, routerOpts, extra) => track(oneApi(source, def, { engine, ...routerOpts }, extra));

  test('JSON: serializes the result with the spec content type and an X-Request-Id', async () => {
    const { app } = api('export function fn(ctx) { return { ok: true, n: 1, list: [1, "a"] } }');
    const res = await request(app).get('/web0/api/app1/p');
    expect(res.status).toBe(200);
    expect(res.headers['content-type']).toBe('application/json;charset=UTF-8');
    expect(res.body).toEqual({ ok: true, n: 1, list: [1, 'a'] });
    expect(res.headers['x-request-id']).toMatch(/^[0-9a-f-]{36}$/);
  });

  test('JSON: Dates created in the sandbox become integer timestamps, nested and top level', async () => {
    const { app, registry } = api('export function fn() { return { at: new Date(1700000000123), deep: { list: [new Date(5)] }, bad: new Date(NaN) } }');
    registry.putScript('app1', 'top.js', 'export default () => new Date(42)');
    registry.putApi('app1', { path: 'top', call: { script: 'top.js', function: 'default' }, returnType: 'JSON' });
    const res = await request(app).get('/web0/api/app1/p');
    expect(res.body).toEqual({ at: 1700000000123, deep: { list: [5] }, bad: null });
    const top = await request(app).get('/web0/api/app1/top');
    expect(top.text).toBe('42');
  });

  test('export forms: named, async, default', async () => {
    const { app, registry } = api('export async function fn() { await null; return { async: true } }');
    registry.putScript('app1', 'd.js', 'export default async function (ctx) { return { def: ctx.method } }');
    registry.putApi('app1', { path: 'd', call: { script: 'd.js', function: 'default' }, returnType: 'JSON' });
    expect((await request(app).get('/web0/api/app1/p')).body).toEqual({ async: true });
    expect((await request(app).post('/web0/api/app1/d')).body).toEqual({ def: 'POST' });
  });

  test('a script starting with a hashbang line runs, and its errors keep their line numbers', async () => {
    const { app } = api('#!/usr/bin/env node\nexport function fn(ctx) {\n  if (ctx.query.fail) null.x;\n  return { ok: 1 }\n}\n', {}, { exposeErrorLocation: true });
    const res = await request(app).get('/web0/api/app1/p');
    expect([res.status, res.body]).toEqual([200, { ok: 1 }]);
    const failed = await request(app).get('/web0/api/app1/p?fail=1');
    expect(failed.status).toBe(500);
    expect(failed.body.location).toMatch(/^main\.js:3:\d+$/);
  });

  test('export forms: several declarators in one export, an export list before its bindings, an export list over lines', async () => {
    const { app, registry } = api(
      [
        'export { fn, helper as named };',
        '// a comma, in a comment',
        'export const A = 1 /* , */, B = [2, 3], { c: C } = { c: 4 };',
        'export let n = 0, m;',
        'const fn = (ctx) => ({ A, B, C, n: ++n, m: m ?? null, v: value() });',
        'const helper = () => "named";',
        'function value() { return V; }',
        'export {',
        '  V, // the value',
        '  fn as default',
        '}',
        'const V = "v";',
      ].join('\n'),
    );
    registry.putApi('app1', { path: 'named', call: { script: 'main.js', function: 'named' }, returnType: 'Text' });
    registry.putApi('app1', { path: 'def', call: { script: 'main.js', function: 'default' }, returnType: 'JSON' });
    expect((await request(app).get('/web0/api/app1/p')).body).toEqual({ A: 1, B: [2, 3], C: 4, n: 1, m: null, v: 'v' });
    expect((await request(app).get('/web0/api/app1/named')).text).toBe('named');
    expect((await request(app).get('/web0/api/app1/def')).body).toMatchObject({ A: 1, v: 'v' });
  });

  test('an error in a script with rewritten exports names its own line', async () => {
    const { app } = api('export const a = 1, b = 2;\nexport { fn };\nconst fn = () => {\n  return a + b + missing;\n};', {}, { exposeErrorLocation: true });
    const res = await request(app).get('/web0/api/app1/p');
    expect(res.body.code).toBe(270000);
    expect(res.body.location).toMatch(/^main\.js:4:\d+$/);
  });

  test('Text: toString of objects, empty for null, text/plain content type', async () => {
    const { app, registry } = api('export function fn() { return { toString() { return "custom text" } } }', { returnType: 'Text' });
    registry.putScript('app1', 'n.js', 'export function f() { return null }');
    registry.putApi('app1', { path: 'n', call: { script: 'n.js', function: 'f' }, returnType: 'Text' });
    const res = await request(app).get('/web0/api/app1/p');
    expect(res.headers['content-type']).toBe('text/plain;charset=UTF-8');
    expect(res.text).toBe('custom text');
    const empty = await request(app).get('/web0/api/app1/n');
    expect(empty.status).toBe(200);
    expect(empty.text).toBe('');
  });

  test('Text: a result with no string form (no toString, valueOf or Symbol.toPrimitive) is INVALID_RESULT, as a JSON result with no JSON form is; a toString that throws stays its script error', async () => {
    const { app, registry } = api('export function fn() { var o = Object.create(null); o.a = 1; return o }', { returnType: 'Text' });
    registry.putScript('app1', 't.js', 'export function f() { return { toString() { var e = new Error("no text"); e.code = 4001; throw e } } }');
    registry.putApi('app1', { path: 't', call: { script: 't.js', function: 'f' }, returnType: 'Text' });
    const bare = await request(app).get('/web0/api/app1/p');
    expect([bare.status, bare.body.code, bare.body.message]).toEqual([500, 270300, 'Text return type needs a value with a string form, got an object without toString']);
    const thrown = await request(app).get('/web0/api/app1/t');
    expect([thrown.status, thrown.body.code, thrown.body.message]).toEqual([500, 4001, 'no text']);
  });

  test('JSON: a getter or toJSON of the result that throws is the script error (its code kept, onError sees it), as a Text result\'s toString; a BigInt, a cycle or a value too deep stays INVALID_RESULT', async () => {
    const { app, registry } = api(`
      function fail() { var e = new Error('order 7 is archived'); e.code = 4004; throw e }
      export function fn(ctx) {
        if (ctx.query.m === 'getter') return { id: 7, a: {}, get lines() { fail() } };
        if (ctx.query.m === 'toJSON') return { id: 7, order: { toJSON: fail } };
        if (ctx.query.m === 'bigint') return { id: 7n };
        if (ctx.query.m === 'cycle') { var o = { a: [1] }; o.a.push(o); return o }
        var d = {}; for (var i = 0, c = d; i < 150; i++) c = c.n = {}; return d;
      }
      export function e(ctx, error) { return { handled: error.code, message: error.message } }`);
    registry.putApi('app1', { path: 'e', call: { script: 'main.js', function: 'fn' }, returnType: 'JSON', onError: { script: 'main.js', function: 'e' } });
    for (const m of ['getter', 'toJSON']) {
      const res = await request(app).get(`/web0/api/app1/p?m=${m}`);
      expect([m, res.status, res.body]).toEqual([m, 500, { requestId: res.headers['x-request-id'], message: 'order 7 is archived', code: 4004 }]);
      const handled = await request(app).get(`/web0/api/app1/e?m=${m}`);
      expect([m, handled.status, handled.body]).toEqual([m, 200, { handled: 4004, message: 'order 7 is archived' }]);
    }
    for (const [m, message] of [['bigint', /BigInt/], ['cycle', /circular reference/], ['deep', /more than 100 levels deep/]]) {
      const res = await request(app).get(`/web0/api/app1/p?m=${m}`);
      expect([m, res.status, res.body.code]).toEqual([m, 500, 270300]);
      expect(res.body.message).toMatch(message);
    }
  });

  test("Text: an object whose toString and valueOf give objects (no primitive, so no string form) is INVALID_RESULT on both engines, not the engine's TypeError ('toPrimitive' on QuickJS)", async () => {
    const { app } = api(
      `export function fn(ctx) {
        if (ctx.query.m === 'both') return { toString() { return {} }, valueOf() { return [] } };
        if (ctx.query.m === 'prim') return { [Symbol.toPrimitive]() { return {} } };
        if (ctx.query.m === 'valueOf') return { toString() { return {} }, valueOf() { return 7 } };
        return { toString() { return {} } };
      }`,
      { returnType: 'Text' },
    );
    for (const m of ['toString', 'both', 'prim']) {
      const res = await request(app).get(`/web0/api/app1/p?m=${m}`);
      expect([m, res.status, res.body.code, res.body.message]).toEqual([m, 500, 270300, 'Text return type needs a value with a string form, got an object whose toString and valueOf give no primitive']);
    }
    // (String() falls back to valueOf when toString gives an object, as the language does)
    const fallback = await request(app).get('/web0/api/app1/p?m=valueOf');
    expect([fallback.status, fallback.text]).toEqual([200, '7']);
  });

  test('Redirect: a 302 also when the script set another status (the spec: status 302); its headers go out', async () => {
    const { app } = api('export function fn(ctx) { ctx.response.setStatus(301); ctx.response.setHeader("X-Kept", "1"); return "https://example.com/moved" }', { returnType: 'Redirect' });
    const res = await request(app).get('/web0/api/app1/p').redirects(0);
    expect([res.status, res.headers.location, res.headers['x-kept']]).toEqual([302, 'https://example.com/moved', '1']);
  });

  test('Redirect: a string gives a 302; anything else is a 500 error body', async () => {
    const { app, registry } = api('export function fn(ctx) { return "https://example.com/next?q=" + ctx.query.q }', { returnType: 'Redirect' });
    registry.putScript('app1', 'bad.js', 'export function f() { return { url: "x" } }');
    registry.putApi('app1', { path: 'bad', call: { script: 'bad.js', function: 'f' }, returnType: 'Redirect' });
    const res = await request(app).get('/web0/api/app1/p?q=1').redirects(0);
    expect(res.status).toBe(302);
    expect(res.headers.location).toBe('https://example.com/next?q=1');
    const bad = await request(app).get('/web0/api/app1/bad').redirects(0);
    expect(bad.status).toBe(500);
    expect(bad.body).toMatchObject({ code: 270300, requestId: bad.headers['x-request-id'] });
    expect(bad.body.message).toMatch(/Redirect/);
  });

  test('a thrown error is a 500 with the default error body; a numeric code is kept', async () => {
    const { app, registry } = api('export function fn() { throw new Error("boom") }');
    registry.putScript('app1', 'c.js', 'export function f() { const e = new Error("business"); e.code = 4001; throw e }');
    registry.putApi('app1', { path: 'c', call: { script: 'c.js', function: 'f' }, returnType: 'JSON' });
    const res = await request(app).get('/web0/api/app1/p');
    expect(res.status).toBe(500);
    expect(res.headers['content-type']).toBe('application/json;charset=UTF-8');
    expect(res.body).toEqual({ requestId: res.headers['x-request-id'], message: 'boom', code: 270000 });
    const coded = await request(app).get('/web0/api/app1/c');
    expect(coded.body).toEqual({ requestId: coded.headers['x-request-id'], message: 'business', code: 4001 });
    // (the spec's APIError.code is an Integer: a fractional code is not kept)
    registry.putScript('app1', 'f.js', 'export function f() { const e = new Error("fraction"); e.code = 12.5; throw e }');
    registry.putApi('app1', { path: 'f', call: { script: 'f.js', function: 'f' }, returnType: 'JSON' });
    const fraction = await request(app).get('/web0/api/app1/f');
    expect(fraction.body).toEqual({ requestId: fraction.headers['x-request-id'], message: 'fraction', code: 270000 });
    // (nor one past what a JSON reader holds exactly: 1e21 went out as 1e+21)
    registry.putScript('app1', 'h.js', 'export function f() { const e = new Error("huge"); e.code = 1e21; throw e }');
    registry.putApi('app1', { path: 'h', call: { script: 'h.js', function: 'f' }, returnType: 'JSON' });
    const huge = await request(app).get('/web0/api/app1/h');
    expect(huge.text).not.toMatch(/e\+21/);
    expect(huge.body).toEqual({ requestId: huge.headers['x-request-id'], message: 'huge', code: 270000 });
  });

  test('before: a returned value is the response and the call does not run', async () => {
    const { app } = api('export function fn() { throw new Error("must not run") }', { before: { script: 'hooks.js', function: 'before' } }, {}, {
      scripts: { 'hooks.js': 'export function before(ctx) { if (ctx.query.stop) return { stoppedBy: "before" } }' },
    });
    const res = await request(app).get('/web0/api/app1/p?stop=1');
    expect(res.status).toBe(200);
    expect(res.body).toEqual({ stoppedBy: 'before' });
    const through = await request(app).get('/web0/api/app1/p');
    expect(through.body.message).toBe('must not run');
  });

  test('before: throwing or abort ends the call with the error body; abort gives 270001', async () => {
    const { app } = api('export function fn() { return { ran: true } }', { before: { script: 'hooks.js', function: 'before' } }, {}, {
      scripts: {
        'hooks.js': `export function before(ctx) {
          if (ctx.query.mode === 'throw') throw new Error('denied');
          if (ctx.query.mode === 'abort') platform.app.abort('token missing');
          if (ctx.query.mode === 'status') platform.app.abort('unauthorized', 401);
          if (ctx.query.mode === 'caught') { try { platform.app.abort('still aborted') } catch (e) {} return undefined }
        }`,
      },
    });
    const thrown = await request(app).get('/web0/api/app1/p?mode=throw');
    expect(thrown.status).toBe(500);
    expect(thrown.body.message).toBe('denied');
    const aborted = await request(app).get('/web0/api/app1/p?mode=abort');
    expect(aborted.status).toBe(500);
    expect(aborted.body).toEqual({ requestId: aborted.headers['x-request-id'], message: 'token missing', code: 270001 });
    const withStatus = await request(app).get('/web0/api/app1/p?mode=status');
    expect(withStatus.status).toBe(401);
    expect(withStatus.body.code).toBe(270001);
    const caught = await request(app).get('/web0/api/app1/p?mode=caught');
    expect(caught.body).toMatchObject({ message: 'still aborted', code: 270001 });
    expect((await request(app).get('/web0/api/app1/p')).body).toEqual({ ran: true });
  });

  test('after: a returned value replaces the result, undefined keeps it, a throw is an error', async () => {
    const { app } = api('export function fn(ctx) { return { n: 1, at: new Date(7) } }', { after: { script: 'hooks.js', function: 'after' } }, {}, {
      scripts: {
        'hooks.js': `export function after(ctx, result) {
          if (ctx.query.mode === 'replace') return { wrapped: result };
          if (ctx.query.mode === 'throw') throw new Error('after failed');
        }`,
      },
    });
    expect((await request(app).get('/web0/api/app1/p?mode=replace')).body).toEqual({ wrapped: { n: 1, at: 7 } });
    expect((await request(app).get('/web0/api/app1/p')).body).toEqual({ n: 1, at: 7 });
    const failed = await request(app).get('/web0/api/app1/p?mode=throw');
    expect(failed.status).toBe(500);
    expect(failed.body.message).toBe('after failed');
  });

  test('onError: runs on an error of the call and its response wins; writing nothing gives the default error', async () => {
    const { app } = api(
      'export function fn(ctx) { const e = new Error("no stock"); e.code = 42; throw e }',
      { onError: { script: 'hooks.js', function: 'onError' } },
      {},
      {
        scripts: {
          'hooks.js': `export function onError(ctx, error) {
            if (ctx.query.mode === 'silent') return;
            ctx.response.setStatus(200);
            ctx.response.setContentType('application/json;charset=UTF-8');
            ctx.response.getWriter().write(JSON.stringify({ success: false, error }));
          }`,
        },
      },
    );
    const res = await request(app).get('/web0/api/app1/p');
    expect(res.status).toBe(200);
    expect(res.body).toEqual({ success: false, error: { requestId: res.headers['x-request-id'], message: 'no stock', code: 42 } });
    const silent = await request(app).get('/web0/api/app1/p?mode=silent');
    expect(silent.status).toBe(500);
    expect(silent.body).toMatchObject({ message: 'no stock', code: 42 });
  });

  test('onError that writes nothing gives the default error also when the call wrote, redirected or sent an error before it threw', async () => {
    const { app } = api(
      `export function fn(ctx) {
        ctx.response.setHeader('X-Call', '1');
        if (ctx.query.m === 'write') ctx.response.getWriter().write('half a page');
        if (ctx.query.m === 'redirect') ctx.response.sendRedirect('/elsewhere');
        if (ctx.query.m === 'sendError') ctx.response.sendError(409, 'conflict');
        throw new Error('failed after ' + ctx.query.m);
      }`,
      { onError: { script: 'hooks.js', function: 'onError' }, returnType: 'Text' },
      {},
      { scripts: { 'hooks.js': 'export function onError(ctx, error) { console.info("seen " + error.message) }' } },
    );
    for (const m of ['write', 'redirect', 'sendError']) {
      const res = await request(app).get(`/web0/api/app1/p?m=${m}`).redirects(0);
      expect([res.status, res.body]).toEqual([500, { requestId: res.headers['x-request-id'], message: `failed after ${m}`, code: 270000 }]);
    }
  });

  test('onError that only sets headers gives the default error (README: it answers with a status, content type or body it writes); a status alone is its answer', async () => {
    const { app } = api(
      'export function fn(ctx) { throw new Error("failed") }',
      { onError: { script: 'hooks.js', function: 'onError' } },
      {},
      {
        scripts: {
          'hooks.js': `export function onError(ctx, error) {
            ctx.response.setHeader('X-Error-Id', error.requestId);
            if (ctx.query.m === 'status') ctx.response.setStatus(503);
            if (ctx.query.m === 'type') ctx.response.setContentType('text/plain');
          }`,
        },
      },
    );
    const headerOnly = await request(app).get('/web0/api/app1/p');
    expect([headerOnly.status, headerOnly.body]).toEqual([500, { requestId: headerOnly.headers['x-request-id'], message: 'failed', code: 270000 }]);
    const status = await request(app).get('/web0/api/app1/p?m=status');
    expect([status.status, status.text, status.headers['x-error-id']]).toEqual([503, '', status.headers['x-request-id']]);
    const type = await request(app).get('/web0/api/app1/p?m=type');
    expect([type.status, type.headers['content-type'], type.text]).toEqual([200, 'text/plain', '']);
  });

  test('onError that sets the status or content type the response already had (setStatus(200) to swallow the error) answers with it', async () => {
    const { app } = api(
      `export function fn(ctx) { if (ctx.query.m === 'type') ctx.response.setContentType('text/plain'); if (ctx.query.m === 'status') ctx.response.setStatus(503); throw new Error("failed") }
      export function e(ctx, error) {
        ctx.response.setHeader('X-Error-Code', error.code);
        if (ctx.query.m === 'type') ctx.response.setContentType('text/plain');
        else if (ctx.query.m === 'status') ctx.response.setStatus(503);
        else ctx.response.setStatus(200);
      }`,
      { onError: { script: 'main.js', function: 'e' } },
    );
    const ok = await request(app).get('/web0/api/app1/p');
    expect([ok.status, ok.text, ok.headers['x-error-code']]).toEqual([200, '', '270000']);
    const status = await request(app).get('/web0/api/app1/p?m=status');
    expect([status.status, status.text, status.headers['x-error-code']]).toEqual([503, '', '270000']);
    const type = await request(app).get('/web0/api/app1/p?m=type');
    expect([type.status, type.headers['content-type'], type.text, type.headers['x-error-code']]).toEqual([200, 'text/plain', '', '270000']);
  });

  test("onError after a call that wrote and threw: headers alone give the default error, a status alone goes with an empty body (never the failed call's partial body)", async () => {
    const { app } = api(
      'export function fn(ctx) { ctx.response.getWriter().write("half a page"); throw new Error("failed") }',
      { onError: { script: 'hooks.js', function: 'onError' }, returnType: 'Text' },
      {},
      {
        scripts: {
          'hooks.js': `export function onError(ctx, error) {
            ctx.response.setHeader('X-Error-Id', error.requestId);
            if (ctx.query.m === 'status') ctx.response.setStatus(503);
            if (ctx.query.m === 'write') ctx.response.getWriter().write(' handled');
          }`,
        },
      },
    );
    const headerOnly = await request(app).get('/web0/api/app1/p');
    expect([headerOnly.status, headerOnly.body]).toEqual([500, { requestId: headerOnly.headers['x-request-id'], message: 'failed', code: 270000 }]);
    const status = await request(app).get('/web0/api/app1/p?m=status');
    expect([status.status, status.text, status.headers['x-error-id']]).toEqual([503, '', status.headers['x-request-id']]);
    const written = await request(app).get('/web0/api/app1/p?m=write');
    expect([written.status, written.headers['x-error-id']]).toEqual([200, written.headers['x-request-id']]);
  });

  test("onError that writes its own body after a call that wrote part of one and failed: the body is onError's alone (the README's JSON handler stays JSON), for a script call and an automation", async () => {
    const { app, registry } = api(
      `export function fn(ctx) { ctx.response.getWriter().write("id,qty\\n1,"); ctx.response.getOutputStream().write([0x32]); throw new Error("failed") }
      export function step(ctx) { ctx.response.getWriter().write("half a page") }
      export function handle(ctx, error) {
        ctx.response.setStatus(200);
        ctx.response.setContentType('application/json;charset=UTF-8');
        ctx.response.getWriter().write(JSON.stringify({ success: false, error: error }));
      }`,
      { onError: { script: 'main.js', function: 'handle' }, returnType: 'Text' },
    );
    registry.putAutomation('app1', { id: 'half', steps: [{ type: 'script', script: 'main.js', function: 'step' }, { type: 'abort', message: "'stopped'" }] });
    registry.putApi('app1', { path: 'auto', call: { automation: 'half' }, returnType: 'JSON', onError: { script: 'main.js', function: 'handle' } });
    const script = await request(app).get('/web0/api/app1/p');
    expect([script.status, script.headers['content-type'], JSON.parse(script.text)]).toEqual([
      200,
      'application/json;charset=UTF-8',
      { success: false, error: { requestId: script.headers['x-request-id'], message: 'failed', code: 270000 } },
    ]);
    const auto = await request(app).get('/web0/api/app1/auto');
    expect([auto.status, JSON.parse(auto.text)]).toEqual([200, { success: false, error: { requestId: auto.headers['x-request-id'], message: 'stopped', code: 270001 } }]);
  });

  test("onError after a call that committed its response and failed (a flush, a body past the buffer, sendError, sendRedirect): nothing of it was sent, so onError's status, content type and body are the answer", async () => {
    const { app } = api(
      `export function fn(ctx) {
        var r = ctx.response;
        if (ctx.query.m === 'flush') { r.setContentType('text/csv'); r.getWriter().write('id,qty\\n'); r.flushBuffer(); }
        if (ctx.query.m === 'big') { r.setStatus(202); r.getWriter().write('x'.repeat(9000)); }
        if (ctx.query.m === 'sendError') r.sendError(409, 'conflict');
        if (ctx.query.m === 'redirect') r.sendRedirect('/elsewhere');
        throw new Error('failed after ' + ctx.query.m);
      }
      export function handle(ctx, error) {
        if (ctx.query.status) return void ctx.response.setStatus(Number(ctx.query.status));
        ctx.response.setStatus(200);
        ctx.response.setContentType('application/json;charset=UTF-8');
        ctx.response.getWriter().write(JSON.stringify({ success: false, error: error }));
      }`,
      { onError: { script: 'main.js', function: 'handle' } },
    );
    for (const m of ['flush', 'big', 'sendError', 'redirect']) {
      const res = await request(app).get(`/web0/api/app1/p?m=${m}`).redirects(0);
      expect([m, res.status, res.headers['content-type'], res.headers.location, JSON.parse(res.text)]).toEqual([
        m,
        200,
        'application/json;charset=UTF-8',
        undefined,
        { success: false, error: { requestId: res.headers['x-request-id'], message: `failed after ${m}`, code: 270000 } },
      ]);
      // (a status alone is its answer too, with an empty body)
      const status = await request(app).get(`/web0/api/app1/p?m=${m}&status=503`).redirects(0);
      expect([m, status.status, status.text, status.headers.location]).toEqual([m, 503, '', undefined]);
    }
  });

  test("onError that returns a value after the call's sendRedirect or sendError and throw: the value goes out as a 200, not under the call's 302 (without its Location) or error status", async () => {
    const { app } = api(
      `export function fn(ctx) {
        if (ctx.query.m === 'redirect') ctx.response.sendRedirect('/elsewhere');
        if (ctx.query.m === 'sendError') ctx.response.sendError(409, 'conflict');
        throw new Error('failed after ' + ctx.query.m);
      }`,
      { onError: { script: 'hooks.js', function: 'onError' } },
      {},
      { scripts: { 'hooks.js': 'export function onError(ctx, error) { return { handled: error.message } }' } },
    );
    for (const m of ['redirect', 'sendError']) {
      const res = await request(app).get(`/web0/api/app1/p?m=${m}`).redirects(0);
      expect([res.status, res.headers.location, res.body]).toEqual([200, undefined, { handled: `failed after ${m}` }]);
    }
  });

  test("platform.app.abort() without a message answers the error table's ABORTED message, as an automation's abort step does", async () => {
    const { app, registry } = api('export function fn() { platform.app.abort() }');
    registry.putAutomation('app1', { id: 'stop', steps: [{ type: 'abort' }] });
    registry.putApi('app1', { path: 'step', call: { automation: 'stop' }, returnType: 'JSON' });
    const script = await request(app).get('/web0/api/app1/p');
    const step = await request(app).get('/web0/api/app1/step');
    expect([script.status, script.body.message, script.body.code]).toEqual([500, 'The call was aborted', 270001]);
    expect([step.status, step.body.message, step.body.code]).toEqual([500, 'The call was aborted', 270001]);
  });

  test("an abort in a getter or toJSON of the result (run as the result is written) ends the call, caught or not, as anywhere in the script", async () => {
    const { app, registry } = api(`
      export function fn(ctx) { return { id: 1, get secret() { try { platform.app.abort('denied', 403) } catch (e) {} return 's3cret' } } }
      export function json(ctx) { return { id: 1, secret: { toJSON() { platform.app.abort('denied', 403) } } } }
      export function text(ctx) { return { toString() { try { platform.app.abort('denied', 403) } catch (e) {} return 's3cret' } } }
      export function attr(ctx) { ctx.request.setAttribute('a', { toJSON() { try { platform.app.abort('denied', 403) } catch (e) {} return 1 } }); return { id: 1 } }`);
    registry.putApi('app1', { path: 'json', call: { script: 'main.js', function: 'json' }, returnType: 'JSON' });
    registry.putApi('app1', { path: 'text', call: { script: 'main.js', function: 'text' }, returnType: 'Text' });
    registry.putApi('app1', { path: 'attr', call: { script: 'main.js', function: 'attr' }, returnType: 'JSON' });
    for (const path of ['p', 'json', 'text', 'attr']) {
      const res = await request(app).get(`/web0/api/app1/${path}`);
      expect([path, res.status, res.body]).toEqual([path, 403, { requestId: res.headers['x-request-id'], message: 'denied', code: 270001 }]);
    }
  });

  test('platform.app.abort takes a status only when it is a whole number from 400 to 599, as an automation abort step does (404.5 is no status: 500)', async () => {
    const { app, registry } = api('export function fn(ctx) { platform.app.abort("m", Number(ctx.query.s)) }');
    registry.putAutomation('app1', { id: 'stop', steps: [{ type: 'abort', message: "'m'", status: 'double(ctx.query.s)' }] });
    registry.putApi('app1', { path: 'step', call: { automation: 'stop' }, returnType: 'JSON' });
    for (const [s, status] of [['404', 404], ['404.5', 500], ['599.9', 500], ['400', 400]]) {
      const script = await request(app).get(`/web0/api/app1/p?s=${s}`);
      const step = await request(app).get(`/web0/api/app1/step?s=${s}`);
      expect([s, script.status, step.status]).toEqual([s, status, status]);
    }
  });

  test('onError does not run for an error in before', async () => {
    const { app } = api('export function fn() { return 1 }', { before: { script: 'h.js', function: 'b' }, onError: { script: 'h.js', function: 'e' } }, {}, {
      scripts: { 'h.js': 'export function b() { throw new Error("in before") }\nexport function e(ctx) { ctx.response.getWriter().write("handled") }' },
    });
    const res = await request(app).get('/web0/api/app1/p');
    expect(res.status).toBe(500);
    expect(res.body.message).toBe('in before');
  });

  test('onError runs when the call returns nothing where its return type needs a value (Redirect, File), as for null or a number', async () => {
    const { app, registry } = api(
      `export function fn(ctx) { if (ctx.query.r === 'null') return null; if (ctx.query.r === 'wrote') ctx.response.sendRedirect('/w') }
      export function e(ctx, error) { ctx.response.setContentType('application/json'); ctx.response.getWriter().write(JSON.stringify({ handled: error.code, message: error.message })) }`,
      { returnType: 'Redirect', onError: { script: 'main.js', function: 'e' } },
    );
    registry.putApi('app1', { path: 'file', call: { script: 'main.js', function: 'fn' }, returnType: 'File', onError: { script: 'main.js', function: 'e' } });
    registry.putAutomation('app1', { id: 'nothing', steps: [{ type: 'return' }] });
    registry.putApi('app1', { path: 'auto', call: { automation: 'nothing' }, returnType: 'Redirect', onError: { script: 'main.js', function: 'e' } });
    for (const url of ['/web0/api/app1/p', '/web0/api/app1/p?r=null', '/web0/api/app1/file', '/web0/api/app1/auto']) {
      const res = await request(app).get(url);
      expect([url, res.status, res.body.handled]).toEqual([url, 200, 270300]);
      expect(res.body.message).toMatch(/needs a (URL string|file result object), got (undefined|null)/);
    }
    // a response the call wrote (sendRedirect) is its answer: nothing failed
    const wrote = await request(app).get('/web0/api/app1/p?r=wrote');
    expect([wrote.status, wrote.headers.location]).toEqual([302, '/w']);
  });

  test('onError runs when the call returns nothing where its return type needs a value and the after hook gives none either, as for null; an after hook that gives one answers', async () => {
    const { app, registry } = api(
      `export function fn(ctx) { if (ctx.query.r === 'null') return null }
      export function after(ctx, result) { ctx.response.setHeader('X-After', String(result)); if (ctx.query.give) return '/given' }
      export function e(ctx, error) { ctx.response.setContentType('application/json'); ctx.response.getWriter().write(JSON.stringify({ handled: error.code, message: error.message })) }`,
      { returnType: 'Redirect', after: { script: 'main.js', function: 'after' }, onError: { script: 'main.js', function: 'e' } },
    );
    registry.putApi('app1', { path: 'file', call: { script: 'main.js', function: 'fn' }, after: { script: 'main.js', function: 'after' }, returnType: 'File', onError: { script: 'main.js', function: 'e' } });
    for (const url of ['/web0/api/app1/p', '/web0/api/app1/p?r=null', '/web0/api/app1/file']) {
      const res = await request(app).get(url).redirects(0);
      expect([url, res.status, res.body.handled]).toEqual([url, 200, 270300]);
      expect(res.body.message).toMatch(/needs a (URL string|file result object), got (undefined|null)/);
    }
    const given = await request(app).get('/web0/api/app1/p?give=1').redirects(0);
    expect([given.status, given.headers.location, given.headers['x-after']]).toEqual([302, '/given', 'undefined']);
  });

  test("a Redirect result that is no http(s) or relative URL (javascript:, data:) is the call's INVALID_RESULT: onError runs, as for null", async () => {
    const logged = [];
    const { app, registry } = api(
      `export function fn(ctx) { return ctx.query.to }
      export function e(ctx, error) { ctx.response.setContentType('application/json'); ctx.response.getWriter().write(JSON.stringify({ handled: error.code, message: error.message })) }
      export function keep(ctx, result) { }`,
      { returnType: 'Redirect', onError: { script: 'main.js', function: 'e' } },
      { logger: { info() {}, warn() {}, error: (m) => logged.push(String(m)) } },
    );
    registry.putApi('app1', { path: 'after', call: { script: 'main.js', function: 'fn' }, after: { script: 'main.js', function: 'keep' }, returnType: 'Redirect', onError: { script: 'main.js', function: 'e' } });
    registry.putAutomation('app1', { id: 'to', steps: [{ type: 'return', value: 'ctx.query.to' }] });
    registry.putApi('app1', { path: 'auto', call: { automation: 'to' }, returnType: 'Redirect', onError: { script: 'main.js', function: 'e' } });
    for (const p of ['p', 'after', 'auto']) {
      for (const to of ['javascript:alert(1)', 'data:text/html,<script>x</script>']) {
        const res = await request(app).get(`/web0/api/app1/${p}`).query({ to }).redirects(0);
        expect([p, res.status, res.headers.location, res.body.handled]).toEqual([p, 200, undefined, 270300]);
        expect(res.body.message).toMatch(/^Redirect location must be an http\(s\) or relative URL, got a '(javascript|data):' URL$/);
      }
      const ok = await request(app).get(`/web0/api/app1/${p}`).query({ to: '/next?a=1' }).redirects(0);
      expect([p, ok.status, ok.headers.location]).toEqual([p, 302, '/next?a=1']);
    }
    // without onError: the default error, logged as the call's failure (not the response's)
    registry.putApi('app1', { path: 'plain', call: { script: 'main.js', function: 'fn' }, returnType: 'Redirect' });
    const plain = await request(app).get('/web0/api/app1/plain').query({ to: 'javascript:x' }).redirects(0);
    expect([plain.status, plain.body.code, plain.headers.location]).toEqual([500, 270300, undefined]);
    expect(logged.filter((l) => l.includes(plain.headers['x-request-id']))).toEqual([expect.stringContaining('app1/plain failed in call: 500 270300')]);
  });

  test("sendRedirect to a location that is no http(s) or relative URL fails its stage with INVALID_RESULT: the call's runs onError, as a Redirect result's does", async () => {
    const logged = [];
    const { app, registry } = api(
      `export function fn(ctx) { ctx.response.sendRedirect(ctx.query.to) }
      export function b(ctx) { ctx.response.sendRedirect('javascript:alert(1)') }
      export function e(ctx, error) { return { handled: error.code, message: error.message } }`,
      { returnType: 'JSON', onError: { script: 'main.js', function: 'e' } },
      { logger: { info() {}, warn() {}, error: (m) => logged.push(String(m)) } },
    );
    registry.putApi('app1', { path: 'plain', call: { script: 'main.js', function: 'fn' }, returnType: 'JSON' });
    registry.putApi('app1', { path: 'before', before: { script: 'main.js', function: 'b' }, call: { script: 'main.js', function: 'fn' }, returnType: 'JSON', onError: { script: 'main.js', function: 'e' } });
    const handled = await request(app).get('/web0/api/app1/p').query({ to: 'javascript:alert(1)' }).redirects(0);
    expect([handled.status, handled.headers.location, handled.body]).toEqual([200, undefined, { handled: 270300, message: "Redirect location must be an http(s) or relative URL, got a 'javascript:' URL" }]);
    const ok = await request(app).get('/web0/api/app1/p').query({ to: '/next' }).redirects(0);
    expect([ok.status, ok.headers.location]).toEqual([302, '/next']);
    // without onError, and in before (onError is the call's only): the default error, logged at the stage that redirected
    for (const [p, stage] of [['plain', 'call'], ['before', 'before']]) {
      const res = await request(app).get(`/web0/api/app1/${p}`).query({ to: 'data:,x' }).redirects(0);
      expect([p, res.status, res.body.code, res.headers.location]).toEqual([p, 500, 270300, undefined]);
      expect(logged.filter((l) => l.includes(res.headers['x-request-id']))).toEqual([expect.stringContaining(`app1/${p} failed in ${stage}: 500 270300`)]);
    }
  });

  test("a File result whose path, storagePath, name or contentDisposition is there but no string is the call's INVALID_RESULT (onError runs), not a 404 for a file with no path", async () => {
    const { app, registry } = api(
      `export function fn(ctx) { return JSON.parse(ctx.query.r) }
      export function e(ctx, error) { ctx.response.setContentType('application/json'); ctx.response.getWriter().write(JSON.stringify({ handled: error.code, message: error.message })) }`,
      { returnType: 'File', onError: { script: 'main.js', function: 'e' } },
    );
    registry.putAutomation('app1', { id: 'file', steps: [{ type: 'return', value: 'ctx.json' }] });
    registry.putApi('app1', { path: 'auto', call: { automation: 'file' }, returnType: 'File', onError: { script: 'main.js', function: 'e' } });
    const cases = [
      [{ path: 5 }, 'path', 'number'],
      [{ path: ['docs/a.txt'] }, 'path', 'object'],
      [{ storagePath: { p: 'x' } }, 'storagePath', 'object'],
      [{ path: 'docs/a.txt', name: 42 }, 'name', 'number'],
      [{ path: 'docs/a.txt', contentDisposition: true }, 'contentDisposition', 'boolean'],
    ];
    for (const [file, field, type] of cases) {
      const called = await request(app).get('/web0/api/app1/p').query({ r: JSON.stringify(file) });
      const auto = await request(app).post('/web0/api/app1/auto').send(file);
      for (const res of [called, auto]) {
        expect([field, res.status, res.body]).toEqual([field, 200, { handled: 270300, message: `A File result's ${field} must be a string, got ${type}` }]);
      }
    }
    // null or missing fields are absent, as before: no path at all is the 404 of the spec
    const none = await request(app).get('/web0/api/app1/p').query({ r: JSON.stringify({ path: null, storagePath: null, name: null }) });
    expect([none.status, none.body.code]).toEqual([404, 270301]);
  });

  test('attributes pass from before to the call and after', async () => {
    const { app } = api('export function fn(ctx) { return { user: ctx.request.getAttribute("user"), n: ctx.request.getAttribute("n") } }', {
      before: { script: 'h.js', function: 'b' },
      after: { script: 'h.js', function: 'a' },
    }, {}, {
      scripts: {
        'h.js': `export function b(ctx) { ctx.request.setAttribute('user', { id: 'u1' }); ctx.request.setAttribute('n', 1) }
                 export function a(ctx, r) { return { ...r, afterSees: ctx.request.getAttribute('user').id, names: [...ctx.request.getAttributeNames()].sort() } }`,
      },
    });
    const res = await request(app).get('/web0/api/app1/p');
    expect(res.body).toEqual({ user: { id: 'u1' }, n: 1, afterSees: 'u1', names: ['n', 'user'] });
  });

  test('a new script source is live on the next request', async () => {
    const { app, registry } = api('export function fn() { return { v: 1 } }');
    expect((await request(app).get('/web0/api/app1/p')).body).toEqual({ v: 1 });
    registry.putScript('app1', 'main.js', 'export function fn() { return { v: 2 } }');
    expect((await request(app).get('/web0/api/app1/p')).body).toEqual({ v: 2 });
  });

  test('script errors of the engine: syntax error, missing export, missing script', async () => {
    const { app, registry } = api('export function fn( { ');
    registry.putScript('app1', 'ok.js', 'export function other() {}');
    registry.putApi('app1', { path: 'nofn', call: { script: 'ok.js', function: 'fn' }, returnType: 'JSON' });
    registry.putApi('app1', { path: 'noscript', call: { script: 'missing.js', function: 'fn' }, returnType: 'JSON' });
    const syntax = await request(app).get('/web0/api/app1/p');
    expect(syntax.status).toBe(500);
    expect(syntax.body.code).toBe(270204);
    const nofn = await request(app).get('/web0/api/app1/nofn');
    expect(nofn.body.code).toBe(270203);
    expect(nofn.body.message).toMatch(/'fn'/);
    const noscript = await request(app).get('/web0/api/app1/noscript');
    expect(noscript.body.code).toBe(270202);
  });

  test('a script that is no ES module (await as a name, a top-level return, an HTML comment) fails to compile', async () => {
    const notModules = ['export function fn() {\n  var await = 1; return await }', 'export function fn() { return 1 }\nreturn 2', 'export function fn() { return 1 }\nvar x = 1 <!-- 2\n'];
    const { app, registry } = api(notModules[0], {}, { exposeErrorLocation: true });
    registry.putScript('app1', 'ret.js', notModules[1]);
    registry.putScript('app1', 'html.js', notModules[2]);
    registry.putApi('app1', { path: 'ret', call: { script: 'ret.js', function: 'fn' }, returnType: 'JSON' });
    registry.putApi('app1', { path: 'html', call: { script: 'html.js', function: 'fn' }, returnType: 'JSON' });
    for (const path of ['p', 'ret', 'html']) {
      const res = await request(app).get(`/web0/api/app1/${path}`);
      expect({ path, status: res.status, code: res.body.code }).toEqual({ path, status: 500, code: 270204 });
      if (path !== 'html') expect(res.body.location).toMatch(/:2:\d+$/); // (QuickJS places that one at the end)
    }
  });

  test('code built from strings: QuickJS runs it, vm2 refuses it with an EvalError (README)', async () => {
    const { app } = api('export function fn() { try { return { value: new Function("return 6 * 7")() } } catch (e) { return { refused: e.name } } }');
    const res = await request(app).get('/web0/api/app1/p');
    expect(res.body).toEqual(engine === 'vm2' ? { refused: 'EvalError' } : { value: 42 });
  });

  test('a script declaring module or exports at its top level: runs on QuickJS, a clear compile error on vm2 (README)', async () => {
    const { app, registry } = api("var module = 'm';\nexport function fn() { return module }");
    registry.putScript('app1', 'e.js', "export function fn() { return exports }\nconst { a, ...exports } = { a: 1, b: 2 };");
    registry.putApi('app1', { path: 'e', call: { script: 'e.js', function: 'fn' }, returnType: 'JSON' });
    const m = await request(app).get('/web0/api/app1/p');
    const e = await request(app).get('/web0/api/app1/e');
    if (engine === 'quickjs') {
      expect([m.status, m.body, e.status, e.body]).toEqual([200, 'm', 200, { b: 2 }]);
    } else {
      expect([m.status, m.body.code, m.body.message]).toEqual([500, 270204, "main.js: 'module' is declared at the top level (line 1): the vm2 engine runs scripts as CommonJS, where that name is taken (rename it)"]);
      expect([e.status, e.body.code, e.body.message]).toEqual([500, 270204, "e.js: 'exports' is declared at the top level (line 2): the vm2 engine runs scripts as CommonJS, where that name is taken (rename it)"]);
    }
  });

  test('a var named module or exports inside a top-level block or loop (it is the module scope\'s): runs on QuickJS, the same compile error on vm2', async () => {
    const { app, registry } = api('for (var module of [1]) {}\nexport function fn() { return module }');
    registry.putScript('app1', 'e.js', 'if (true) {\n  try { var exports = 2 } finally {}\n}\nexport function fn() { return exports }');
    registry.putApi('app1', { path: 'e', call: { script: 'e.js', function: 'fn' }, returnType: 'JSON' });
    const m = await request(app).get('/web0/api/app1/p');
    const e = await request(app).get('/web0/api/app1/e');
    if (engine === 'quickjs') {
      expect([m.status, m.body, e.status, e.body]).toEqual([200, 1, 200, 2]);
    } else {
      expect([m.status, m.body.code, m.body.message]).toEqual([500, 270204, "main.js: 'module' is declared at the top level (line 1): the vm2 engine runs scripts as CommonJS, where that name is taken (rename it)"]);
      expect([e.status, e.body.code, e.body.message]).toEqual([500, 270204, "e.js: 'exports' is declared at the top level (line 2): the vm2 engine runs scripts as CommonJS, where that name is taken (rename it)"]);
    }
  });

  test("a function name the module does not export itself ('toString', 'constructor'...) is FUNCTION_NOT_FOUND naming it", async () => {
    const { app, registry } = api('export function fn() { return 1 }');
    for (const name of ['toString', 'constructor', 'hasOwnProperty', 'valueOf']) {
      registry.putApi('app1', { path: name, call: { script: 'main.js', function: name }, returnType: 'JSON' });
      const res = await request(app).get(`/web0/api/app1/${name}`);
      expect([res.status, res.body.code, res.body.message]).toEqual([500, 270203, `Script 'main.js' does not export a function named '${name}'`]);
    }
  });

  test('TypeScript scripts are type-stripped', async () => {
    const { app } = api('', { call: { script: 'typed.ts', function: 'fn' } }, {}, {
      scripts: { 'typed.ts': 'interface R { n: number }\nexport function fn(ctx: any): R { const n: number = 3; return { n } }' },
    });
    expect((await request(app).get('/web0/api/app1/p')).body).toEqual({ n: 3 });
  });

  test('a script is one module: an import of another script or a package is SCRIPT_COMPILE_ERROR (README, Scripts)', async () => {
    const { app, registry } = api("import { one } from './util.js';\nexport function fn() { return { n: one() } }");
    registry.putScript('app1', 'util.js', 'export function one() { return 1 }');
    registry.putScript('app1', 'pkg.js', "import _ from 'lodash';\nexport function fn() { return {} }");
    registry.putApi('app1', { path: 'pkg', call: { script: 'pkg.js', function: 'fn' }, returnType: 'JSON' });
    for (const p of ['p', 'pkg']) {
      const res = await request(app).get(`/web0/api/app1/${p}`);
      expect(res.status).toBe(500);
      expect(res.body.code).toBe(270204);
    }
  });

  test('a script past scriptTimeoutMs fails with 270200 while other requests are served', async () => {
    const { app, registry } = api('export function fn() { while (true) {} }', {}, { scriptTimeoutMs: 600, workers: 2 });
    registry.putScript('app1', 'fast.js', 'export function f() { return { fast: true } }');
    registry.putApi('app1', { path: 'fast', call: { script: 'fast.js', function: 'f' }, returnType: 'JSON' });
    await request(app).get('/web0/api/app1/fast'); // warm up
    const slow = request(app).get('/web0/api/app1/p');
    const started = Date.now();
    const fast = await request(app).get('/web0/api/app1/fast');
    expect(fast.body).toEqual({ fast: true });
    expect(Date.now() - started).toBeLessThan(500);
    const res = await slow;
    expect(res.status).toBe(500);
    expect(res.body.code).toBe(270200);
    expect((await request(app).get('/web0/api/app1/fast')).body).toEqual({ fast: true });
  });
});

describe('routing errors', () => {
  const { app, registry } = track(
    oneApi('export function fn(ctx) { return { body: ctx.body } }', { methods: ['post'] }, { bodyLimit: '1kb' }),
  );

  test('unknown app or path: 404 with the error body', async () => {
    for (const url of ['/web0/api/nope/p', '/web0/api/app1/nope', '/web0/api/app1', '/web0/api/']) {
      const res = await request(app).post(url);
      expect(res.status).toBe(404);
      expect(res.body).toMatchObject({ requestId: res.headers['x-request-id'], code: 270100 });
    }
  });

  test('a method outside `methods`: 405 with Allow', async () => {
    const res = await request(app).get('/web0/api/app1/p');
    expect(res.status).toBe(405);
    expect(res.headers.allow).toBe('POST');
    expect(res.body.code).toBe(270101);
  });

  test('a method outside `methods` that include GET: Allow lists HEAD too (it is served wherever GET is)', async () => {
    await registry.putApi('app1', { path: 'g', call: { script: 'main.js', function: 'fn' }, returnType: 'JSON', methods: ['get', 'post'] });
    const res = await request(app).delete('/web0/api/app1/g');
    expect(res.status).toBe(405);
    expect(res.headers.allow).toBe('GET, POST, HEAD');
    expect((await request(app).head('/web0/api/app1/g')).status).toBe(200);
  });

  test('a method Node.js never serves (a typo) is refused at registration naming it; any method it parses is accepted', async () => {
    const { ConfigError } = require('..');
    const def = { path: 'm', call: { script: 'main.js', function: 'fn' }, returnType: 'JSON' };
    let error;
    try {
      await registry.putApi('app1', { ...def, methods: ['GET', 'GETT'] });
    } catch (e) {
      error = e;
    }
    expect(error).toBeInstanceOf(ConfigError);
    expect(error.field).toMatch(/methods\[1\]$/);
    expect(error.message).toMatch(/"GETT" is not an HTTP method Node.js serves \(did you mean 'GET'\?\)/);
    await registry.putApi('app1', { ...def, methods: ['propfind', 'PURGE'] });
    expect((await request(app).purge('/web0/api/app1/m')).status).toBe(200);
  });

  test('a body over bodyLimit: 413', async () => {
    const res = await request(app).post('/web0/api/app1/p').set('content-type', 'text/plain').send('x'.repeat(2000));
    expect(res.status).toBe(413);
    expect(res.body.code).toBe(270102);
    const ok = await request(app).post('/web0/api/app1/p').set('content-type', 'text/plain').send('small');
    expect(ok.body).toEqual({ body: 'small' });
  });

  test('bodyLimit does not bound multipart uploads (the `upload` option does)', async () => {
    const res = await request(app)
      .post('/web0/api/app1/p')
      .attach('a', Buffer.alloc(600, 1), 'a.bin')
      .attach('b', Buffer.alloc(600, 2), 'b.bin');
    expect(res.status).toBe(200);
  });

  test('a disabled API answers as unknown', async () => {
    registry.putScript('app1', 'x.js', 'export function f() { return 1 }');
    registry.putApi('app1', { path: 'off', call: { script: 'x.js', function: 'f' }, returnType: 'JSON', enabled: false });
    expect((await request(app).get('/web0/api/app1/off')).status).toBe(404);
  });

  test('an invalid definition from a custom registry is a 500 naming the field', async () => {
    const bad = track(require('./helpers/app').makeApp({
      registry: {
        getApi: () => ({ path: 'p', call: { script: 'a.js' }, returnType: 'XML' }),
        getScript: () => 'export function f() {}',
      },
    }));
    const res = await request(bad.app).get('/web0/api/a/p');
    expect(res.status).toBe(500);
    expect(res.body.code).toBe(270600);
    expect(res.body.message).toMatch(/call\.function/);
  });

  test.each(['quickjs', 'vm2'])('a definition changed in place while its request is under way runs as it was served (%s)', async (engine) => {
    const SOURCES = { 'a.js': 'export function f() { return { v: 1 } }\nexport function auth(ctx) { ctx.request.setAttribute("k", "x") }', 'b.js': 'export function g() { return "v2" }' };
    const logged = [];
    const def = { path: 'p', call: { script: 'a.js', function: 'f' }, returnType: 'JSON', before: { script: 'a.js', function: 'auth' }, rateLimit: { requestsPerSecond: 100, timeoutMs: 60000, identifier: '{attr.k}' } };
    let reload;
    const reg = track(require('./helpers/app').makeApp({
      registry: {
        getApi: () => def,
        getScript: (_app, name) => {
          // a reload in place lands while the request reads its scripts (after its definition was checked)
          if (reload) reload(def);
          reload = undefined;
          return SOURCES[name];
        },
      },
      router: { engine, queueTimeoutMs: 30000, logger: { info() {}, warn() {}, error: (m) => logged.push(String(m)) } },
    }));
    // the new version calls another script: the request read a.js with its definition, and runs a.js
    reload = (d) => Object.assign(d, { call: { script: 'b.js', function: 'g' }, returnType: 'Text' });
    let res = await request(reg.app).get('/web0/api/a/p');
    expect([res.status, res.headers['content-type'], res.text]).toEqual([200, 'application/json;charset=UTF-8', '{"v":1}']);
    // the next request gets the new version
    res = await request(reg.app).get('/web0/api/a/p');
    expect([res.status, res.text]).toEqual([200, 'v2']);
    // an invalid change (no call, no rate limit) never reaches the engine or the rate limiter
    reload = (d) => {
      delete d.call;
      delete d.rateLimit;
    };
    res = await request(reg.app).get('/web0/api/a/p');
    expect([res.status, res.text]).toEqual([200, 'v2']);
    expect(logged).toEqual([]);
    res = await request(reg.app).get('/web0/api/a/p');
    expect([res.status, res.body.code]).toEqual([500, 270600]);
    expect(res.body.message).toMatch(/call: /);
  });

  test('a definition is read as plain data: its own fields, each read once; fields it only inherits are not read, with or without methods', async () => {
    const base = { path: 'p', call: { script: 'a.js', function: 'f' }, returnType: 'JSON' };
    let reads = 0;
    const defs = {
      inherited: () => Object.create(base),
      inheritedWithMethods: () => Object.assign(Object.create(base), { methods: ['GET'] }),
      getters: () => ({ ...base, get returnType() { return reads++ === 0 ? 'JSON' : 'XML'; } }),
    };
    const reg = track(require('./helpers/app').makeApp({
      registry: { getApi: (app) => defs[app](), getScript: () => 'export function f() { return { v: 1 } }' },
    }));
    for (const app of ['inherited', 'inheritedWithMethods']) {
      const res = await request(reg.app).get(`/web0/api/${app}/p`);
      expect([res.status, res.body.code, res.body.message]).toEqual([500, 270600, 'scriptable-api: invalid api.path: is required']);
    }
    const res = await request(reg.app).get('/web0/api/getters/p');
    expect([res.status, res.text, reads]).toEqual([200, '{"v":1}', 1]);
  });

  test("a definition whose getter or proxy throws is the registry's failure: HOST_ERROR, logged, its message not sent; a path that is no string is named as the field", async () => {
    const base = { path: 'p', call: { script: 'a.js', function: 'f' }, returnType: 'JSON' };
    const logged = [];
    const defs = {
      getter: () => ({ ...base, get call() { throw new Error('lazy load failed: postgres://admin:pw@db/apis'); } }),
      proxy: () => new Proxy(base, { ownKeys() { throw new Error('postgres://admin:pw@db/apis'); } }),
      symbol: () => ({ ...base, path: Symbol('p') }),
    };
    const reg = track(require('./helpers/app').makeApp({
      registry: { getApi: (app) => defs[app](), getScript: () => 'export function f() { return 1 }' },
      router: { logger: { info() {}, warn() {}, error: (m) => logged.push(String(m)) } },
    }));
    for (const app of ['getter', 'proxy']) {
      const res = await request(reg.app).get(`/web0/api/${app}/p`);
      expect([res.status, res.body.code, res.body.message]).toEqual([500, 270602, 'A host service failed']);
    }
    expect(logged.filter((m) => m.includes('postgres://'))).toHaveLength(2);
    const res = await request(reg.app).get('/web0/api/symbol/p');
    expect([res.status, res.body.code]).toEqual([500, 270600]);
    expect(res.body.message).toMatch(/^scriptable-api: invalid api\.path: /);
  });

  test("a getScript that returns something other than source text (a Buffer read without an encoding) is the registry's failure, logged saying so, not a missing script", async () => {
    const logged = [];
    const sources = { buffer: Buffer.from('export function f() { return 1 }'), number: 42, none: undefined };
    const reg = track(require('./helpers/app').makeApp({
      registry: { getApi: () => ({ path: 'p', call: { script: 'a.js', function: 'f' }, returnType: 'JSON' }), getScript: (app) => sources[app] },
      router: { logger: { info() {}, warn() {}, error: (m) => logged.push(String(m)) } },
    }));
    for (const [app, kind] of [['buffer', 'a Buffer'], ['number', 'a number']]) {
      const res = await request(reg.app).get(`/web0/api/${app}/p`);
      expect([res.status, res.body.code, res.body.message]).toEqual([500, 270602, 'A host service failed']);
      expect(logged.pop()).toContain(`the registry's getScript returned ${kind} for script 'a.js' of app '${app}'`);
    }
    const res = await request(reg.app).get('/web0/api/none/p');
    expect([res.status, res.body.code, res.body.message]).toEqual([500, 270202, "Script 'a.js' not found"]);
  });

  test('a definition a custom registry changes in place is served as it is at each request', async () => {
    const without = { path: 'p', call: { script: 'a.js', function: 'f' }, returnType: 'JSON' };
    const withMethods = { path: 'm', call: { script: 'a.js', function: 'f' }, returnType: 'JSON', methods: ['GET'] };
    const reg = track(require('./helpers/app').makeApp({
      registry: { getApi: (_app, path) => (path === 'p' ? without : withMethods), getScript: () => 'export function f() { return "x" }' },
    }));
    await request(reg.app).get('/web0/api/a/p').expect(200, '"x"');
    await request(reg.app).get('/web0/api/a/m').expect(200, '"x"');
    // a change in place: each is served as it is now, with and without `methods`
    without.returnType = 'Text';
    withMethods.returnType = 'Text';
    for (const path of ['p', 'm']) {
      const res = await request(reg.app).get(`/web0/api/a/${path}`);
      expect([res.status, res.headers['content-type'], res.text]).toEqual([200, 'text/plain;charset=UTF-8', 'x']);
    }
    without.methods = ['post'];
    withMethods.methods = ['POST'];
    for (const path of ['p', 'm']) expect((await request(reg.app).get(`/web0/api/a/${path}`)).status).toBe(405);
    // a frozen definition holding an object that is not (or a getter) can still change: each request reads it again
    const inner = { script: 'a.js', function: 'f' };
    const frozenOuter = Object.freeze({ path: 'p', call: inner, returnType: 'JSON' });
    let type = 'JSON';
    const frozenGetter = Object.freeze(Object.defineProperty({ path: 'p', call: Object.freeze({ script: 'a.js', function: 'f' }) }, 'returnType', { get: () => type, enumerable: true }));
    const deepFrozen = Object.freeze({ path: 'p', call: Object.freeze({ script: 'a.js', function: 'f' }), returnType: 'JSON' });
    const frozen = track(require('./helpers/app').makeApp({
      registry: { getApi: (app) => ({ outer: frozenOuter, getter: frozenGetter, deep: deepFrozen })[app], getScript: () => 'export function f() { return "x" }\nexport function g() { return "y" }' },
    }));
    for (const app of ['outer', 'getter', 'deep']) await request(frozen.app).get(`/web0/api/${app}/p`).expect(200, '"x"');
    inner.function = 'g';
    type = 'Text';
    await request(frozen.app).get('/web0/api/outer/p').expect(200, '"y"');
    await request(frozen.app).get('/web0/api/getter/p').expect(200, 'x');
    await request(frozen.app).get('/web0/api/deep/p').expect(200, '"x"');
    // and an invalid change is caught, not served
    without.returnType = 'XML';
    withMethods.returnType = 'XML';
    for (const path of ['p', 'm']) {
      const res = await request(reg.app).post(`/web0/api/a/${path}`);
      expect([res.status, res.body.code]).toEqual([500, 270600]);
      expect(res.body.message).toMatch(/returnType/);
    }
  });
});

/** Sends one raw request line (Node's client would normalise the target) and reads the answer. */
function rawRequest(server, line) {
  const net = require('node:net');
  return new Promise((resolve, reject) => {
    const sock = net.connect(server.address().port, '127.0.0.1', () => sock.write(`${line}\r\nHost: h\r\nConnection: close\r\n\r\n`));
    let text = '';
    sock.on('data', (d) => (text += d));
    sock.on('end', () => {
      const head = text.slice(0, text.indexOf('\r\n\r\n'));
      resolve({ status: Number(head.split(' ')[1]), head, body: text.slice(head.length + 4) });
    });
    sock.on('error', reject);
  });
}

test("a request whose response the host's middleware began before next() is left alone, and the warning it logs holds no credential of its query string", async () => {
  const warned = [];
  const { app } = track(
    oneApi('export function fn() { return { ran: true } }', {}, { logger: { info() {}, error() {}, warn: (m) => warned.push(String(m)) } }, {
      setup: (host) =>
        host.use((req, res, next) => {
          res.status(202).send('host');
          next();
        }),
    }),
  );
  const res = await request(app).get('/web0/api/app1/p?access_token=s3cr3t&x=1');
  expect([res.status, res.text]).toEqual([202, 'host']);
  expect(warned).toHaveLength(1);
  expect(warned[0]).toContain('GET /web0/api/app1/p?access_token=[REDACTED]&x=1 reached the router');
  expect(warned[0]).not.toContain('s3cr3t');
});

test('a request target with a fragment or a backslash in its path is a 400 BAD_REQUEST: Express routes it by url.parse (the fragment dropped, `\\` read as `/`), the script would see it as sent', async () => {
  const { app, router } = track(oneApi('export function fn(ctx) { return { uri: ctx.request.getRequestURI(), q: ctx.query } }', {}, { engine: 'vm2' }));
  await router.ready();
  const server = app.listen(0, '127.0.0.1');
  await new Promise((resolve) => server.once('listening', resolve));
  try {
    for (const target of [
      '/web0/api/app1/p#x?a=1', // routed to p, while the script read the query a=1 and the URI /web0/api/app1/p#x
      '/web0/api/app1/p?a=1#b=2', // query a=1 for Express, a='1#b=2' for the script
      '/web0/api/app1\\p#x', // routed to app1/p, the URI kept '\\'
      'http://h/web0/api/app1\\p', // the same in absolute form
      '/web0/api/app1\\p', // (in origin form without '#' it named an app 'app1\\p': one answer for every form)
      '/web0\\api/app1/p#',
    ]) {
      const res = await rawRequest(server, `GET ${target} HTTP/1.1`);
      expect([target, res.status]).toEqual([target, 400]);
      const body = JSON.parse(res.body);
      expect(body).toMatchObject({ code: 270103, requestId: expect.any(String) });
      expect(body.message).toMatch(/request target/);
    }
    // a backslash in the query, encoded ones and a plain target still run
    for (const [target, uri, q] of [
      ['/web0/api/app1/p?x=a\\b', '/web0/api/app1/p', { x: 'a\\b' }],
      ['/web0/api/app1/p?x=%23%5C', '/web0/api/app1/p', { x: '#\\' }],
      ['http://h/web0/api/app1/p?x=1', '/web0/api/app1/p', { x: '1' }],
    ]) {
      const res = await rawRequest(server, `GET ${target} HTTP/1.1`);
      expect([target, res.status, JSON.parse(res.body)]).toEqual([target, 200, { uri, q }]);
    }
  } finally {
    await new Promise((resolve) => server.close(resolve));
  }
});

describe('scriptSizeLimit', () => {
  const small = 'export function fn() { return { ok: true } }';
  /** A module of `bytes` UTF-8 bytes made of `chars` characters: a string literal of é (2 bytes each) or x. */
  const sized = (ch, n) => `export function fn() { return { n: "${ch.repeat(n)}".length } }`;

  test('a script larger than the limit (in UTF-8 bytes) fails its calls with 270204 naming the option; one at the limit runs', async () => {
    const base = sized('x', 0).length; // (the module around the literal, in ASCII)
    const { app } = track(
      makeApp({
        apps: {
          app1: {
            scripts: {
              'main.js': small,
              'at.js': sized('x', 1024 - base),
              'over.js': sized('x', 1025 - base),
              // 600 characters, 1,200 bytes: over by its bytes only
              'wide.js': sized('é', 600 - base),
              'hook.js': `${sized('x', 2000)}\nexport function before() {}`,
            },
            apis: [
              { path: 'at', call: { script: 'at.js', function: 'fn' }, returnType: 'JSON' },
              { path: 'over', call: { script: 'over.js', function: 'fn' }, returnType: 'JSON' },
              { path: 'wide', call: { script: 'wide.js', function: 'fn' }, returnType: 'JSON' },
              { path: 'hooked', before: { script: 'hook.js', function: 'before' }, call: { script: 'main.js', function: 'fn' }, returnType: 'JSON' },
            ],
          },
        },
        router: { scriptSizeLimit: '1kb' },
      }),
    );
    expect(Buffer.byteLength(sized('x', 1024 - base))).toBe(1024);
    await request(app).get('/web0/api/app1/at').expect(200, { n: 1024 - base });
    for (const [path, script] of [['over', 'over.js'], ['wide', 'wide.js'], ['hooked', 'hook.js']]) {
      const res = await request(app).get(`/web0/api/app1/${path}`);
      expect(res.status).toBe(500);
      expect(res.body).toEqual({ requestId: res.headers['x-request-id'], code: 270204, message: `Script '${script}' is larger than scriptSizeLimit (1024 bytes)` });
    }
  });

  test("the default is 1 MiB; a size that is no byte count or size is refused at startup naming the field", async () => {
    const { ConfigError, createApiRouter, MemoryRegistry } = require('..');
    const { app } = track(
      makeApp({
        apps: {
          app1: {
            scripts: { 'a.js': sized('x', 1000 * 1024), 'b.js': sized('x', 1024 * 1024) },
            apis: [
              { path: 'a', call: { script: 'a.js', function: 'fn' }, returnType: 'JSON' },
              { path: 'b', call: { script: 'b.js', function: 'fn' }, returnType: 'JSON' },
            ],
          },
        },
      }),
    );
    await request(app).get('/web0/api/app1/a').expect(200, { n: 1000 * 1024 });
    expect((await request(app).get('/web0/api/app1/b')).body.message).toBe("Script 'b.js' is larger than scriptSizeLimit (1048576 bytes)");
    for (const bad of ['big', -1, '1tb', 0, '0', '0.5b']) {
      let error;
      try {
        createApiRouter({ registry: new MemoryRegistry(), logger: false, scriptSizeLimit: bad });
      } catch (e) {
        error = e;
      }
      expect(error).toBeInstanceOf(ConfigError);
      expect(error.field).toBe('scriptSizeLimit');
    }
  });
});

describe.each(['quickjs', 'vm2'])('response text in the charset the response declares (%s)', (engine) => {
  const iconv = require('iconv-lite');
  const scripts = {
    'c.js': `export function text(ctx) { ctx.response.setContentType('text/plain;charset=ISO-8859-1'); return 'café€' }
      export function writer(ctx) { ctx.response.setContentType('text/plain;charset=Shift_JIS'); ctx.response.getWriter().write('日本') }
      export function plain(ctx) { return 'café€' }
      export function encText(ctx) { ctx.response.setCharacterEncoding('ISO-8859-1'); return 'café€' }
      export function encWriter(ctx) { ctx.response.setCharacterEncoding('Shift_JIS'); ctx.response.getWriter().write('日本') }
      export function encJson(ctx) { ctx.response.setCharacterEncoding('ISO-8859-1'); return { a: 'café' } }
      export function encBytes(ctx) { ctx.response.setCharacterEncoding('ISO-8859-1'); ctx.response.getOutputStream().write([1, 2]); ctx.response.getWriter().write('é') }
      export function encHex(ctx) { ctx.response.setCharacterEncoding('hex'); return { a: 'café' } }
      export function encBase64(ctx) { ctx.response.setContentType('text/plain;charset=BASE64'); return 'café' }
      export function encBinary(ctx) { ctx.response.setCharacterEncoding('binary'); ctx.response.getWriter().write('日本') }
      export function encDollar(ctx) { ctx.response.setCharacterEncoding(ctx.query.e); return { a: 1 } }`,
  };
  const fns = ['text', 'writer', 'plain', 'encText', 'encWriter', 'encJson', 'encBytes', 'encHex', 'encBase64', 'encBinary', 'encDollar'];
  const apis = fns.map((fn) => ({ path: fn, call: { script: 'c.js', function: fn }, returnType: fn === 'encJson' || fn === 'encHex' || fn === 'encDollar' ? 'JSON' : 'Text' }));
  const { app, router } = makeApp({ apps: { app1: { scripts, apis } }, router: { engine } });
  afterAll(() => router.close());
  const bytes = (path) => request(app).get(`/web0/api/app1/${path}`).buffer(true).parse((res, cb) => {
    const chunks = [];
    res.on('data', (c) => chunks.push(c));
    res.on('end', () => cb(null, Buffer.concat(chunks)));
  });

  test('a return value: ISO-8859-1 bytes, a character it lacks as "?"', async () => {
    const res = await bytes('text');
    expect(res.headers['content-type']).toBe('text/plain;charset=ISO-8859-1');
    expect(res.body).toEqual(Buffer.from([0x63, 0x61, 0x66, 0xe9, 0x3f]));
  });

  test("the writer's text: Shift_JIS bytes", async () => {
    const res = await bytes('writer');
    expect(res.body).toEqual(iconv.encode('日本', 'Shift_JIS'));
  });

  test('no charset set: UTF-8', async () => {
    expect((await bytes('plain')).body).toEqual(Buffer.from('café€', 'utf8'));
  });

  test('setCharacterEncoding alone: the return type\'s own type with that charset, and the text in it', async () => {
    const text = await bytes('encText');
    expect(text.headers['content-type']).toBe('text/plain;charset=ISO-8859-1');
    expect(text.body).toEqual(Buffer.from([0x63, 0x61, 0x66, 0xe9, 0x3f]));
    const writer = await bytes('encWriter');
    expect(writer.headers['content-type']).toBe('text/plain;charset=Shift_JIS');
    expect(writer.body).toEqual(iconv.encode('日本', 'Shift_JIS'));
    const json = await bytes('encJson');
    expect(json.headers['content-type']).toBe('application/json;charset=ISO-8859-1');
    expect(json.body).toEqual(Buffer.from('{"a":"caf\u00e9"}', 'latin1'));
    const mixed = await bytes('encBytes');
    expect(mixed.headers['content-type']).toBe('application/octet-stream');
    expect(mixed.body).toEqual(Buffer.from([1, 2, 0xe9]));
  });

  test('a charset iconv-lite knows that is not a charset (hex, base64, binary) is an unknown one: the text goes out as UTF-8, not as the bytes it names', async () => {
    // (hex sent an empty 200, base64 a few bytes of noise, binary each character cut to its low byte)
    const hex = await bytes('encHex');
    expect(hex.headers['content-type']).toBe('application/json;charset=hex');
    expect(hex.body).toEqual(Buffer.from('{"a":"café"}', 'utf8'));
    expect((await bytes('encBase64')).body).toEqual(Buffer.from('café', 'utf8'));
    expect((await bytes('encBinary')).body).toEqual(Buffer.from('日本', 'utf8'));
  });

  test('the charset goes out as the script set it, `$` and all (never read as a replacement pattern)', async () => {
    for (const e of ['$`', "$'", '$&x', '$$']) {
      const res = await request(app).get('/web0/api/app1/encDollar').query({ e });
      expect([e, res.status, res.headers['content-type']]).toEqual([e, 200, `application/json;charset=${e}`]);
    }
  });
});

test('a request runs one version of its app: its scripts are read with its definition, not after its body', async () => {
  const http = require('node:http');
  const { MemoryRegistry } = require('..');
  const registry = new MemoryRegistry({
    apps: { shop: { scripts: { 'v1.js': 'export function fn(ctx) { return { v: 1, body: ctx.body } }' }, apis: [{ path: 'x', call: { script: 'v1.js', function: 'fn' }, returnType: 'JSON' }] } },
  });
  const { app, router } = makeApp({ registry });
  const server = app.listen(0, '127.0.0.1');
  await new Promise((r) => server.once('listening', r));
  try {
    const answer = new Promise((resolve, reject) => {
      const req = http.request({ host: '127.0.0.1', port: server.address().port, method: 'POST', path: '/web0/api/shop/x', headers: { 'content-type': 'text/plain', 'content-length': '2' } }, (res) => {
        let text = '';
        res.on('data', (c) => (text += c));
        res.on('end', () => resolve({ status: res.statusCode, body: JSON.parse(text) }));
      });
      req.on('error', reject);
      req.write('a');
      // while the body is on its way, the app changes: the API calls v2.js, v1.js is gone
      setTimeout(() => {
        registry.putScript('shop', 'v2.js', 'export function fn() { return { v: 2 } }');
        registry.putApi('shop', { path: 'x', call: { script: 'v2.js', function: 'fn' }, returnType: 'JSON' });
        registry.removeScript('shop', 'v1.js');
        req.end('b');
      }, 300);
    });
    expect(await answer).toEqual({ status: 200, body: { v: 1, body: 'ab' } });
  } finally {
    server.close();
    await router.close();
  }
});

test('onError does not run when the call ends on the runtime limits (time, memory): the default error goes out', async () => {
  // (one router per limit: the memory bomb's router has a time limit no loaded machine reaches,
  // so that its call can only end on memory; the other's is short, so that its loop ends soon)
  const make = (scriptTimeoutMs) => {
    const { app, router } = makeApp({
      router: { scriptTimeoutMs, scriptMemoryLimitMb: 16 },
      apps: {
        app1: {
          scripts: {
            'm.js': `export function fn(ctx) {
              if (ctx.query.m === 'memory') { var a = []; for (var i = 0; ; i++) a.push('x'.repeat(1 << 20) + i); }
              if (ctx.query.m === 'time') for (;;) {}
              throw new Error('plain');
            }`,
            'e.js': 'export function handle(ctx, e) { ctx.response.setStatus(200); ctx.response.getWriter().write("handled " + e.code) }',
          },
          apis: [{ path: 'p', call: { script: 'm.js', function: 'fn' }, returnType: 'JSON', onError: { script: 'e.js', function: 'handle' } }],
        },
      },
    });
    routers.push(router);
    return app;
  };
  const roomy = make(60_000);
  expect((await request(roomy).get('/web0/api/app1/p?m=plain')).text).toBe('handled 270000');
  const memory = await request(roomy).get('/web0/api/app1/p?m=memory');
  expect([memory.status, memory.body.code]).toEqual([500, 270201]);
  const time = await request(make(1000)).get('/web0/api/app1/p?m=time');
  expect([time.status, time.body.code]).toEqual([500, 270200]);
});
