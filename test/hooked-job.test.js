'use strict';
// A job with hooks in a script of their own, on both engines: what passes from before to the call
// to after (attributes as JSON copies, the response, the call's result), where each rule of the
// processing order stops a job, and how failures, aborts and console lines are attributed.
const request = require('supertest');
const { makeApp } = require('./helpers/app');

const HOOKS = { before: { script: 'hooks.js', function: 'before' }, after: { script: 'hooks.js', function: 'after' } };

/** app1 with one API `p`: main.js#fn, hooks.js for the hooks named in `def`. */
function hooked(engine, main, hooks, def = HOOKS, router = {}) {
  return makeApp({
    router: { engine, ...router },
    apps: {
      app1: {
        scripts: { 'main.js': main, 'hooks.js': hooks },
        apis: [{ path: 'p', call: { script: 'main.js', function: 'fn' }, returnType: 'JSON', ...def }],
      },
    },
  });
}

describe.each(['quickjs', 'vm2'])('a hooked job on %s', (engine) => {
  let fixture;
  afterEach(async () => {
    await fixture?.router.close();
    fixture = undefined;
  });

  test('requests whose stages answer the same texts as earlier ones get their own results', async () => {
    // (the worker parses a stage's answer once per text and shares it: lib/runtime/worker/output-cache.ts)
    fixture = hooked(
      engine,
      `export function fn(ctx) { return { v: ctx.request.getAttribute('v') } }`,
      `export function before(ctx) { ctx.request.setAttribute('v', ctx.request.getHeader('x-v')) }
       export function after(ctx, result) { ctx.response.setHeader('X-V', String(ctx.request.getAttribute('v'))) }`,
    );
    for (const v of ['a', 'b', 'a', 'a', 'b']) {
      const res = await request(fixture.app).get('/web0/api/app1/p').set('X-V', v);
      expect(res.status).toBe(200);
      expect(res.body).toEqual({ v });
      expect(res.headers['x-v']).toBe(v);
    }
  });

  test('attributes pass from before to the call to after as JSON copies', async () => {
    fixture = hooked(
      engine,
      `export function fn(ctx) {
        const o = ctx.request.getAttribute('o');
        const same = o === globalThis.keptByBefore;
        o.n += 1; // a change in place counts
        return { o, same, when: ctx.request.getAttribute('when'), nan: ctx.request.getAttribute('nan') };
      }`,
      `export function before(ctx) {
        const o = { n: 1 };
        ctx.request.setAttribute('o', o);
        o.n = 2; // sent as the stage ended it
        globalThis.keptByBefore = o;
        ctx.request.setAttribute('when', new Date(5));
        ctx.request.setAttribute('nan', NaN);
        ctx.request.setAttribute('fn', () => 1);
      }
      export function after(ctx, result) {
        return { ...result, after: ctx.request.getAttribute('o').n, names: [...ctx.request.getAttributeNames()] };
      }`,
    );
    await request(fixture.app)
      .get('/web0/api/app1/p')
      .expect(200, { o: { n: 3 }, same: false, when: 5, nan: null, after: 3, names: ['o', 'when', 'nan'] });
  });

  test('the response carries from stage to stage, and a value set back is sent as set back', async () => {
    fixture = hooked(
      engine,
      `export function fn(ctx) {
        ctx.response.setStatus(200); // back to what the job started with
        ctx.response.setHeader('X-Call', ctx.response.getHeader('X-Before'));
        return { status: 200 };
      }`,
      `export function before(ctx) { ctx.response.setStatus(404); ctx.response.setHeader('X-Before', 'b') }
      export function after(ctx, result) { ctx.response.addHeader('X-After', String(result.status)) }`,
    );
    const res = await request(fixture.app).get('/web0/api/app1/p').expect(200, { status: 200 });
    expect(res.headers['x-before']).toBe('b');
    expect(res.headers['x-call']).toBe('b');
    expect(res.headers['x-after']).toBe('200');
  });

  test('a before hook that answers or writes the response ends the job there', async () => {
    fixture = hooked(
      engine,
      'export function fn(ctx) { throw new Error("the call must not run") }',
      `export function before(ctx) {
        if (ctx.request.getHeader('x-mode') === 'answer') return { from: 'before' };
        ctx.response.sendError(403, 'no');
      }
      export function after(ctx, result) { throw new Error("after must not run") }`,
    );
    await request(fixture.app).get('/web0/api/app1/p').set('x-mode', 'answer').expect(200, { from: 'before' });
    await request(fixture.app).get('/web0/api/app1/p').expect(403);
  });

  test("the call's result reaches after as a copy, and after's value replaces it", async () => {
    fixture = hooked(
      engine,
      'export function fn(ctx) { globalThis.callResult = { n: 1, d: new Date(7) }; return globalThis.callResult }',
      `export function after(ctx, result) {
        if (ctx.request.getHeader('x-keep')) return undefined;
        return { copy: result !== globalThis.callResult, result };
      }`,
      { after: HOOKS.after },
    );
    await request(fixture.app).get('/web0/api/app1/p').expect(200, { copy: true, result: { n: 1, d: 7 } });
    await request(fixture.app).get('/web0/api/app1/p').set('x-keep', '1').expect(200, { n: 1, d: 7 });
  });

  test('a failing call goes to onError with the state the stages left; after does not run', async () => {
    fixture = hooked(
      engine,
      'export function fn(ctx) { ctx.response.setHeader("X-Call", "1"); const e = new Error("broke"); e.code = 4242; throw e }',
      `export function before(ctx) { ctx.request.setAttribute('who', 'alice') }
      export function after(ctx, result) { return { after: true } }
      export function onError(ctx, error) {
        return { code: error.code, message: error.message, who: ctx.request.getAttribute('who'), header: ctx.response.getHeader('X-Call') };
      }`,
      { ...HOOKS, onError: { script: 'hooks.js', function: 'onError' } },
    );
    await request(fixture.app).get('/web0/api/app1/p').expect(200, { code: 4242, message: 'broke', who: 'alice', header: '1' });
  });

  test('an abort in the call, caught by the script, still ends the call; one in before ends the job', async () => {
    fixture = hooked(
      engine,
      'export function fn(ctx) { try { platform.app.abort("stop here", 409) } catch (e) {} return { ran: true } }',
      `export function before(ctx) { if (ctx.request.getHeader('x-stop')) { try { platform.app.abort("stopped early", 429) } catch (e) {} } }
      export function after(ctx, result) { return { after: true } }`,
    );
    const late = await request(fixture.app).get('/web0/api/app1/p').expect(409);
    expect(late.body.message).toBe('stop here');
    const early = await request(fixture.app).get('/web0/api/app1/p').set('x-stop', '1').expect(429);
    expect(early.body.message).toBe('stopped early');
  });

  test('an invalid result of the call is an error before after runs', async () => {
    fixture = hooked(engine, 'export function fn(ctx) { return 10n }', 'export function before(ctx) {}\nexport function after(ctx, r) { return { after: true } }');
    const res = await request(fixture.app).get('/web0/api/app1/p').expect(500);
    expect(res.body.message).toMatch(/BigInt|JSON/i);
  });

  test('a missing hook export or a hooks script that does not compile fails the request with a clear error', async () => {
    fixture = hooked(engine, 'export function fn(ctx) { return { ok: true } }', 'export function before(ctx) {}');
    const missing = await request(fixture.app).get('/web0/api/app1/p').expect(500);
    // (the hooks may be in scripts of their own: the message names the script as well as the function)
    expect(missing.body).toMatchObject({ code: 270203, message: "Script 'hooks.js' does not export a function named 'after'" });
    await fixture.router.close();
    fixture = hooked(engine, 'export function fn(ctx) { return { ok: true } }', 'export function before(ctx) { ');
    await request(fixture.app).get('/web0/api/app1/p').expect(500);
  });

  test('a hook that never ends times out, and the next request is served', async () => {
    fixture = hooked(
      engine,
      'export function fn(ctx) { return { ok: true } }',
      `export function before(ctx) { if (ctx.request.getHeader('x-loop')) while (true) {} }
      export function after(ctx, result) {}`,
      HOOKS,
      { scriptTimeoutMs: 300 },
    );
    const res = await request(fixture.app).get('/web0/api/app1/p').set('x-loop', '1').expect(500);
    expect(res.body.message).toMatch(/timed out/);
    await request(fixture.app).get('/web0/api/app1/p').expect(200, { ok: true });
  });

  test('console lines name the script of the stage that logged them', async () => {
    const lines = [];
    const logger = { info: (m, meta) => lines.push(meta.script + ': ' + m), warn: () => {}, error: () => {} };
    fixture = hooked(
      engine,
      'export function fn(ctx) { console.log("call"); return { ok: true } }',
      'export function before(ctx) { console.log("before") }\nexport function after(ctx, r) { console.log("after") }',
      HOOKS,
      { logger },
    );
    await request(fixture.app).get('/web0/api/app1/p').expect(200);
    await new Promise((r) => setTimeout(r, 50));
    expect(lines).toEqual(['hooks.js: [app1/hooks.js] before', 'main.js: [app1/main.js] call', 'hooks.js: [app1/hooks.js] after']);
  });

  test("a module's top-level console lines go to the logger, attributed to the request that loaded it", async () => {
    const lines = [];
    const logger = { info: (m, meta) => lines.push([m, meta.requestId, meta.script]), warn: () => {}, error: () => {} };
    fixture = hooked(engine, 'console.log("loading main");\nexport function fn(ctx) { console.log("call"); return { ok: true } }', '', {}, { logger });
    const first = await request(fixture.app).get('/web0/api/app1/p').expect(200);
    const second = await request(fixture.app).get('/web0/api/app1/p').expect(200);
    // (the module loads once per context: the second request finds it loaded)
    expect(lines).toEqual([
      ['[app1/main.js] loading main', first.headers['x-request-id'], 'main.js'],
      ['[app1/main.js] call', first.headers['x-request-id'], 'main.js'],
      ['[app1/main.js] call', second.headers['x-request-id'], 'main.js'],
    ]);
  });

  test('after gets the call result for each return type: a JSON value, null, nothing, a Text string', async () => {
    const main = `export function fn(ctx) {
      const mode = ctx.request.getHeader('x-mode');
      if (mode === 'null') return null;
      if (mode === 'none') return undefined;
      if (mode === 'date') return { at: new Date(7) };
      return mode === 'text' ? 'abc' : { n: 1 };
    }`;
    const hooks = `export function before(ctx) {}
      export function after(ctx, result) {
        ctx.response.setHeader('X-Result', result === undefined ? 'undefined' : JSON.stringify(result));
      }`;
    fixture = hooked(engine, main, hooks);
    const get = (mode) => request(fixture.app).get('/web0/api/app1/p').set('x-mode', mode);
    expect((await get('json').expect(200, { n: 1 })).headers['x-result']).toBe('{"n":1}');
    expect((await get('null').expect(200)).headers['x-result']).toBe('null');
    expect((await get('none').expect(200)).headers['x-result']).toBe('undefined');
    expect((await get('date').expect(200, { at: 7 })).headers['x-result']).toBe('{"at":7}');
    await fixture.router.close();

    fixture = hooked(engine, main, 'export function before(ctx) {}\nexport function after(ctx, result) { return typeof result + ":" + result + "!" }', {
      ...HOOKS,
      returnType: 'Text',
    });
    const text = await request(fixture.app).get('/web0/api/app1/p').set('x-mode', 'text').expect(200);
    expect(text.text).toBe('string:abc!');
  });

  test('a call that never ends is logged at the call, and one that can never settle goes to onError', async () => {
    const lines = [];
    const logger = { info: () => {}, warn: () => {}, error: (message, meta) => lines.push(meta) };
    fixture = hooked(
      engine,
      `export async function fn(ctx) {
        if (ctx.request.getHeader('x-loop')) while (true) {}
        if (ctx.request.getHeader('x-stall')) await new Promise(() => {});
        return { ok: true };
      }`,
      `export function before(ctx) { ctx.request.setAttribute('who', 'alice') }
      export function after(ctx, result) { if (ctx.request.getHeader('x-loop-after')) while (true) {} }
      export function onError(ctx, error) { return { handled: error.code, who: ctx.request.getAttribute('who') } }`,
      { ...HOOKS, onError: { script: 'hooks.js', function: 'onError' } },
      { logger, scriptTimeoutMs: 300 },
    );
    const loop = await request(fixture.app).get('/web0/api/app1/p').set('x-loop', '1').expect(500);
    expect(loop.body.message).toMatch(/timed out/);
    const after = await request(fixture.app).get('/web0/api/app1/p').set('x-loop-after', '1').expect(500);
    if (engine === 'quickjs') {
      // (vm2 cannot interrupt a script: the pool ends its worker, and the failure is the engine's)
      expect(lines.find((m) => m.requestId === loop.body.requestId)).toMatchObject({ stage: 'call', script: 'main.js' });
      expect(lines.find((m) => m.requestId === after.body.requestId)).toMatchObject({ stage: 'after', script: 'hooks.js' });
    }
    // (a stalled call is the call's failure, as one that threw: onError answers, with what before set)
    await request(fixture.app).get('/web0/api/app1/p').set('x-stall', '1').expect(200, { handled: 270206, who: 'alice' });
    await request(fixture.app).get('/web0/api/app1/p').expect(200, { ok: true });
  });

  test("a call whose script fails to load fails after the before hook ran, and onError answers", async () => {
    const lines = [];
    const logger = { info: (m) => lines.push(m), warn: () => {}, error: () => {} };
    fixture = hooked(
      engine,
      'throw new Error("not today");\nexport function fn(ctx) { return { ok: true } }',
      `export function before(ctx) { console.log('before ran'); ctx.request.setAttribute('who', 'alice') }
      export function after(ctx, result) { return { after: true } }
      export function onError(ctx, error) { return { handled: error.code, who: ctx.request.getAttribute('who') } }`,
      { ...HOOKS, onError: { script: 'hooks.js', function: 'onError' } },
      { logger },
    );
    await request(fixture.app).get('/web0/api/app1/p').expect(200, { handled: 270204, who: 'alice' });
    await new Promise((r) => setTimeout(r, 50));
    expect(lines.filter((l) => /before ran/.test(l))).toHaveLength(1);
  });

  test("a call whose script fails to load is not loaded again for the next requests, with the hooks' context or alone", async () => {
    const lines = [];
    const logger = { info: (m) => lines.push(m), warn: () => {}, error: () => {} };
    fixture = hooked(
      engine,
      'console.log("loading main");\nthrow new Error("not today");\nexport function fn(ctx) { return { ok: true } }',
      `export function before(ctx) { ctx.request.setAttribute('who', 'alice') }
      export function onError(ctx, error) { return { handled: error.code, who: ctx.request.getAttribute('who') } }`,
      { before: HOOKS.before, onError: { script: 'hooks.js', function: 'onError' } },
      { logger },
    );
    // (the first request tries the context of both scripts, then the call's alone: two loads)
    for (let i = 0; i < 3; i++) await request(fixture.app).get('/web0/api/app1/p').expect(200, { handled: 270204, who: 'alice' });
    expect(lines.filter((l) => /loading main$/.test(l))).toHaveLength(2);
  });

  test('a before hook that waits on the host goes on to the call, and a request object kept from before acts for its request only', async () => {
    const lines = [];
    const logger = { info: (m, meta) => lines.push(meta.script + ': ' + m), warn: () => {}, error: () => {} };
    fixture = hooked(
      engine,
      `export function fn(ctx) {
        console.log('call');
        let kept;
        try { kept = globalThis.keptRequest.getHeader('x-n') } catch (e) { kept = e.name }
        return { n: ctx.request.getHeader('x-n'), who: ctx.request.getAttribute('who'), kept };
      }`,
      `export async function before(ctx) {
        await platform.system.getAccountByToken('t-' + ctx.request.getHeader('x-n'));
        console.log('before');
        globalThis.keptRequest = ctx.request;
        ctx.request.setAttribute('who', 'bob');
      }
      export function after(ctx, result) { console.log('after') }`,
      HOOKS,
      { logger, accounts: { getAccountByToken: async (token) => new Promise((r) => setTimeout(() => r({ id: token }), 20)) } },
    );
    const res = await Promise.all(['1', '2', '3'].map((n) => request(fixture.app).get('/web0/api/app1/p').set('x-n', n).expect(200)));
    for (const [i, r] of res.entries()) expect(r.body).toMatchObject({ n: String(i + 1), who: 'bob' });
    // (a stage's objects end with it: a request object before kept throws in the call, as in a later request)
    for (const r of res) expect(r.body.kept).toBe('IllegalStateException');
    await new Promise((r) => setTimeout(r, 50));
    expect(lines.filter((l) => l.startsWith('hooks.js: [app1/hooks.js] before'))).toHaveLength(3);
    expect(lines.filter((l) => l.startsWith('main.js: [app1/main.js] call'))).toHaveLength(3);
  });

  test('a Redirect result goes to after once its location is checked: an unfit one is an error after never sees', async () => {
    const lines = [];
    const logger = { info: (m) => lines.push(m), warn: () => {}, error: () => {} };
    fixture = hooked(
      engine,
      'export function fn(ctx) { return ctx.request.getHeader("x-to") }',
      'export function before(ctx) {}\nexport function after(ctx, result) { console.log("after " + result) }',
      { ...HOOKS, returnType: 'Redirect' },
      { logger },
    );
    const ok = await request(fixture.app).get('/web0/api/app1/p').set('x-to', 'https://example.com/next').expect(302);
    expect(ok.headers.location).toBe('https://example.com/next');
    await request(fixture.app).get('/web0/api/app1/p').set('x-to', 'javascript:alert(1)').expect(500);
    await new Promise((r) => setTimeout(r, 50));
    expect(lines.filter((l) => /after /.test(l))).toEqual(['[app1/hooks.js] after https://example.com/next']);
  });

  test('header and attribute names read and written again and again, in any case and past any cache size, stay right', async () => {
    // 80 header names (the adapter remembers 64), each asked for in two cases; attribute names
    // that JSON must escape or that name Object.prototype members; response headers set in one
    // case and replaced in another.
    const names = Array.from({ length: 80 }, (_, i) => `x-h${i}`);
    fixture = hooked(
      engine,
      `export function fn(ctx) {
        const a = {};
        for (const n of ctx.request.getAttributeNames()) {
          Object.defineProperty(a, n, { value: ctx.request.getAttribute(n), enumerable: true }); // ('__proto__' too)
        }
        return a;
      }`,
      `const NAMES = ${JSON.stringify(names)};
      export function before(ctx) {
        const r = ctx.request;
        let found = 0;
        for (const n of NAMES) if (r.getHeader(n) === n + '-v' && r.getHeader(n.toUpperCase()) === n + '-v') found++;
        r.setAttribute('found', found);
        r.setAttribute('missing', String(r.getHeader('X-Absent'))); // (null would remove the attribute)
        r.setAttribute('proto', String(r.getHeader('__proto__')));
        r.setAttribute('notToken', String(r.getHeader('x h0')));
        r.setAttribute('viaObject', r.getHeader({ toString: () => 'X-H1' }));
        r.setAttribute('q"uo\\\\te', 1);
        r.setAttribute('__proto__', 2);
        r.setAttribute('constructor', 3);
        r.setAttribute('ünï', 4);
        for (let i = 0; i < 70; i++) r.setAttribute('k' + i, i);
      }
      export function after(ctx, result) {
        const res = ctx.response;
        res.setHeader('X-Twice', 'first');
        res.setHeader('x-twice', 'second');
        res.addHeader('CONTENT-TYPE', 'text/x-test'); // (a response property, not a header entry)
        const a = {};
        for (const k of ['found', 'missing', 'proto', 'notToken', 'viaObject', 'q"uo\\\\te', '__proto__', 'constructor', 'ünï', 'k0', 'k69']) {
          Object.defineProperty(a, k, { value: result[k], enumerable: true });
        }
        a.count = Object.keys(result).length;
        return a;
      }`,
    );
    for (let round = 0; round < 2; round++) {
      const req = request(fixture.app).get('/web0/api/app1/p');
      for (const n of names) req.set(n, `${n}-v`);
      const res = await req.expect(200);
      expect(JSON.parse(res.text)).toEqual({ // (sent as text/x-test)
        found: 80,
        missing: 'null',
        proto: 'null',
        notToken: 'null',
        viaObject: 'x-h1-v',
        'q"uo\\te': 1,
        ['__proto__']: 2,
        constructor: 3,
        ünï: 4,
        k0: 0,
        k69: 69,
        count: 79,
      });
      expect(res.headers['x-twice']).toBe('second');
      expect(res.headers['content-type']).toMatch(/^text\/x-test(;|$)/);
    }
  });
});

describe('a job that timed out while its automation ran', () => {
  let fixture;
  afterAll(() => fixture?.router.close());

  test('runs none of its stages once the automation answers: the other calls of the hook script go on', async () => {
    let automationCalled, answerAutomation, accountAsked, answerAccount;
    const automationWaits = new Promise((r) => (automationCalled = r));
    const accountWaits = new Promise((r) => (accountAsked = r));
    const AFTER = 'var runs = 0; export function after(ctx, v) { runs++; var s = 0; for (var i = 0; i < 300000; i++) s += i; return { v: v, runs: runs, a: platform.system.getAccountByToken(ctx.query.t || "x") } }';
    fixture = makeApp({
      router: {
        workers: 1,
        maxWorkers: 1,
        scriptTimeoutMs: 1000,
        automations: { run: () => (automationCalled(), new Promise((r) => (answerAutomation = () => r(7)))) },
        accounts: {
          getAccountByToken: (t) => (t === 'slow' ? (accountAsked(), new Promise((r) => (answerAccount = () => r({ id: t })))) : { id: t }),
        },
      },
      apps: {
        app1: {
          scripts: { 'after.js': AFTER, 'main.js': 'export function fn() { return 1 }' },
          automations: [{ id: 'slow', steps: [{ type: 'return', value: '1' }] }],
          apis: [
            { path: 'auto', call: { automation: 'slow' }, after: { script: 'after.js', function: 'after' }, returnType: 'JSON' },
            { path: 'plain', call: { script: 'main.js', function: 'fn' }, after: { script: 'after.js', function: 'after' }, returnType: 'JSON' },
          ],
        },
      },
    });
    const agent = request(fixture.app);
    await agent.get('/web0/api/app1/plain').expect(200, { v: 1, runs: 1, a: { id: 'x' } });
    // a call whose automation outlives its deadline times out
    const auto = agent.get('/web0/api/app1/auto').then((r) => r);
    await automationWaits;
    expect((await auto).body.code).toBe(270200);
    // another call of the app, its after hook waiting on the host in after.js's context
    const plain = agent.get('/web0/api/app1/plain?t=slow').then((r) => r);
    await accountWaits;
    // the automation answers at last; a call after it (the worker takes messages in order) runs
    answerAutomation();
    await agent.get('/web0/api/app1/plain').expect(200);
    answerAccount();
    const res = await plain;
    expect(res.status).toBe(200);
    expect(res.body).toEqual({ v: 1, runs: 2, a: { id: 'slow' } }); // (the timed-out call's after hook never ran)
  }, 30_000);
});
