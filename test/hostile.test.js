'use strict';
// Hostile scripts, on both engines: each one ends with a clear error body (500 + a documented
// code), the host keeps serving while it runs (a fast request of another app of the same router
// completes quickly), and the router serves normally afterwards.
const request = require('supertest');
const { makeApp } = require('./helpers/app');

const TIMEOUT_MS = 1000;
/** For memory bombs and huge values: long enough that memory, not time, runs out first on a loaded machine. */
const ROOMY_TIMEOUT_MS = 8000;
/** A fast request made while a hostile script runs must answer within this (generous, loaded 2-core machine). */
const FAST_MS = 600;
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

const C = {
  TIMEOUT: 270200,
  OOM: 270201,
  ENGINE: 270205,
  STALLED: 270206,
  SCRIPT_ERROR: 270000,
};

/** name -> module source exporting fn. */
const HOSTILE = {
  spin: 'export function fn() { while (true) {} }',
  awaitSpin: 'export async function fn() { await null; while (true) {} }',
  growingChain: 'export async function fn() { const f = () => Promise.resolve().then(f); f(); await new Promise(() => {}) }',
  flatChain: 'export async function fn() { const f = () => { Promise.resolve().then(f) }; f(); await new Promise(() => {}) }',
  awaitLoop: 'export async function fn() { for (;;) await null }',
  hostCallThenSpin: 'export function fn() { const a = platform.system.getAccountByToken("x"); if (!a) throw new Error("no account"); while (true) {} }',
  hostCallThenAwaitSpin: 'export async function fn() { platform.system.getAccountByToken("x"); await null; while (true) {} }',
  arrayBomb: 'export function fn() { const keep = []; for (let i = 0; ; i++) keep.push(new Array(1e5).fill(i)) }',
  stringBomb: 'export function fn() { const keep = []; for (;;) keep.push("x".repeat(1e6) + keep.length) }',
  objectBomb: 'export function fn() { const keep = []; for (let i = 0; ; i++) keep.push({ i, s: "y" + i, list: [i, i, i] }) }',
  recursion: 'export function fn() { function r() { return r() } return r() }',
  recursionCatching: 'export function fn() { function r() { try { r() } catch (e) { r() } } r(); return "unreachable" }',
  huge50: 'export function fn() { return "x".repeat(50 * 1024 * 1024) }',
  huge20: 'export function fn() { return { s: "y".repeat(20 * 1024 * 1024) } }',
  neverSettles: 'export function fn() { return new Promise(() => {}) }',
  neverSettlesAsync: 'export async function fn() { await new Promise(() => {}); return 1 }',
  moduleSpin: 'while (true) {}\nexport function fn() { return 1 }',
  moduleAwaitSpin: 'await null; while (true) {}\nexport function fn() { return 1 }',
  moduleBomb: 'const keep = []; for (let i = 0; ; i++) keep.push(new Array(1e5).fill(i))\nexport function fn() { return 1 }',
  ok: 'export function fn() { return { ok: true } }',
  // a stage started by the stage before it settling (not by a message from the pool)
  afterAwaitSpin: 'export function fn() { return 1 }\nexport async function after() { await null; while (true) {} }',
  awaitSpinAfterBefore: 'export function before() {}\nexport async function fn() { await null; while (true) {} }',
};
/** Hooks of the hostile APIs that have some. */
const HOOKS = {
  afterAwaitSpin: { after: { script: 'afterAwaitSpin.js', function: 'after' } },
  awaitSpinAfterBefore: { before: { script: 'awaitSpinAfterBefore.js', function: 'before' } },
};

describe.each(['quickjs', 'vm2'])('hostile scripts on the %s engine', (engine) => {
  /** Two routers over the same apps: `main` with a short scriptTimeoutMs, `roomy` with a long one. */
  const main = {};
  const roomy = {};
  const apps = {
    evil: { scripts: {}, apis: [] },
    good: {
      scripts: { 'fast.js': 'export function f(ctx) { return { fast: true, n: ctx.query.n ?? null } }' },
      apis: [{ path: 'fast', call: { script: 'fast.js', function: 'f' }, returnType: 'JSON' }],
    },
  };
  for (const [name, source] of Object.entries(HOSTILE)) {
    apps.evil.scripts[`${name}.js`] = source;
    apps.evil.apis.push({ path: name, call: { script: `${name}.js`, function: 'fn' }, returnType: 'JSON', ...HOOKS[name] });
  }

  beforeAll(async () => {
    for (const [target, scriptTimeoutMs] of [[main, TIMEOUT_MS], [roomy, ROOMY_TIMEOUT_MS]]) {
      Object.assign(
        target,
        makeApp({
          apps,
          router: {
            engine,
            scriptTimeoutMs,
            scriptMemoryLimitMb: 32,
            workers: 2,
            // eight hostile calls on two workers wait their turn, each replacing the worker it
            // killed; on a loaded machine that can take longer than the default 5 s in the queue
            queueTimeoutMs: 25_000,
            accounts: { getAccountByToken: async (token) => ({ id: token }) },
          },
        }),
      );
      await warm(target);
    }
  });
  afterAll(() => Promise.all([main.router.close(), roomy.router.close()]));

  const fast = (n = 0, t = main) => request(t.app).get(`/web0/api/good/fast?n=${n}`);

  /**
   * The pool replaces a worker lost to the previous attack as soon as it ends: wait until its
   * workers can take work (router.ready()), then two concurrent requests warm the contexts.
   */
  async function warm(t = main) {
    await t.router.ready();
    const rs = await Promise.all([fast(0, t), fast(0, t)]);
    for (const r of rs) expect(r.body.fast).toBe(true);
  }

  /** Runs the hostile API while a fast request of another app is served; returns the hostile response. */
  async function attack(name, t = main) {
    await warm(t);
    const started = Date.now();
    let evilMs = -1;
    const evil = request(t.app)
      .get(`/web0/api/evil/${name}`)
      .then((r) => {
        evilMs = Date.now() - started;
        return r;
      });
    await sleep(150); // the hostile script is running now
    const t0 = Date.now();
    const f = await fast(1, t);
    const fastMs = Date.now() - t0;
    expect(f.status).toBe(200);
    expect(f.body).toEqual({ fast: true, n: '1' });
    expect(fastMs).toBeLessThan(FAST_MS);
    const res = await evil;
    // a clear error body: the default error body, with the request id of that response
    if (res.status !== 200) {
      expect(res.status).toBe(500);
      expect(res.headers['content-type']).toMatch(/^application\/json/);
      expect(res.body).toEqual({ requestId: res.headers['x-request-id'], message: expect.any(String), code: expect.any(Number) });
    }
    // the host serves normally afterwards, the same app included
    expect((await fast(2, t)).body).toEqual({ fast: true, n: '2' });
    expect((await request(t.app).get('/web0/api/evil/ok')).body).toEqual({ ok: true });
    return { res, evilMs };
  }

  const timeouts = [
    ['while (true) {}', 'spin'],
    ['await null; while (true) {}', 'awaitSpin'],
    ['an endless flat promise chain', 'flatChain'],
    ['for (;;) await null', 'awaitLoop'],
    ['a loop after a host call', 'hostCallThenSpin'],
    ['await null, then a loop, after a host call', 'hostCallThenAwaitSpin'],
    ['while (true) {} in the module body', 'moduleSpin'],
    ['await null; while (true) {} in an after hook', 'afterAwaitSpin'],
    ['await null; while (true) {} in the call, after a before hook', 'awaitSpinAfterBefore'],
  ];
  test.each(timeouts)('%s: 270200 at about scriptTimeoutMs', async (_label, name) => {
    const { res, evilMs } = await attack(name);
    expect(res.status).toBe(500);
    expect(res.body.code).toBe(C.TIMEOUT);
    expect(evilMs).toBeGreaterThanOrEqual(TIMEOUT_MS - 200);
    expect(evilMs).toBeLessThan(TIMEOUT_MS + 3000);
  });

  test('await null; while (true) {} in the module body: 270200 on QuickJS (vm2 has no top-level await: 270204)', async () => {
    const { res } = await attack('moduleAwaitSpin');
    expect(res.status).toBe(500);
    expect(res.body.code).toBe(engine === 'quickjs' ? C.TIMEOUT : 270204);
  });

  test('an endless promise chain that grows (f = () => Promise.resolve().then(f)): 270200, or 270201 when the chain fills memory first', async () => {
    const { res } = await attack('growingChain');
    expect(res.status).toBe(500);
    expect([C.TIMEOUT, C.OOM]).toContain(res.body.code);
  });

  // QuickJS: malloc fails inside the engine (its heap is capped), the call gets 270201 and the
  // worker is replaced. vm2: the worker's resourceLimits kill it (270201), or the engine dies (270205).
  // These run with the long deadline: memory must run out first.
  const oomCodes = engine === 'quickjs' ? [C.OOM] : [C.OOM, C.ENGINE];
  test.each([
    ['a memory bomb of arrays', 'arrayBomb', oomCodes],
    ['a memory bomb in the module body', 'moduleBomb', oomCodes],
    // V8 may share the repeated string's storage: the deadline may come first
    ['a memory bomb of strings', 'stringBomb', engine === 'quickjs' ? [C.OOM] : [C.OOM, C.ENGINE, C.TIMEOUT]],
    // V8 collects again and again as a small heap fills with small objects: on a loaded machine
    // the deadline may come first on vm2
    ['a memory bomb of small objects', 'objectBomb', engine === 'quickjs' ? [C.OOM] : [...oomCodes, C.TIMEOUT]],
    // given time, the growing promise chain is a memory bomb too (QuickJS used to report it as 270206)
    ['a promise chain that grows until memory runs out', 'growingChain', engine === 'quickjs' ? [C.OOM] : [C.OOM, C.ENGINE, C.TIMEOUT]],
  ])('%s ends with out of memory; the host lives', async (_label, name, codes) => {
    const { res } = await attack(name, roomy);
    expect(res.status).toBe(500);
    expect(codes).toContain(res.body.code);
  });

  test('deep recursion: a script error (stack overflow), no crash', async () => {
    const { res } = await attack('recursion');
    expect(res.status).toBe(500);
    expect(res.body.code).toBe(C.SCRIPT_ERROR);
    expect(res.body.message).toMatch(/stack/i);
  });

  test('recursion that catches its own stack overflows: stopped by the deadline or the stack', async () => {
    const { res } = await attack('recursionCatching');
    expect(res.status).toBe(500);
    expect([C.TIMEOUT, C.SCRIPT_ERROR]).toContain(res.body.code);
  });

  test.each([
    ['a 50 MB string', 'huge50', 50 * 1024 * 1024 + 2],
    ['an object holding a 20 MB string', 'huge20', 20 * 1024 * 1024 + 8],
  ])('a huge return value (%s): an error body or the full response, and the host keeps serving', async (_label, name, length) => {
    const { res } = await attack(name, roomy);
    if (res.status === 200) {
      expect(res.text.length).toBe(length);
    } else {
      expect([C.OOM, C.ENGINE, C.TIMEOUT]).toContain(res.body.code);
    }
  });

  test.each([
    ['return new Promise(() => {})', 'neverSettles'],
    ['await new Promise(() => {})', 'neverSettlesAsync'],
  ])('a promise that never settles (%s): 270206 without waiting for the deadline', async (_label, name) => {
    const { res, evilMs } = await attack(name);
    expect(res.status).toBe(500);
    expect(res.body.code).toBe(C.STALLED);
    expect(evilMs).toBeLessThan(TIMEOUT_MS);
  });

  test('many hostile calls at once: every one fails cleanly, then the host serves normally', async () => {
    await warm();
    const names = ['spin', 'awaitSpin', 'arrayBomb', 'recursion', 'neverSettles', 'flatChain', 'moduleSpin', 'stringBomb'];
    const results = await Promise.all(names.map((n) => request(main.app).get(`/web0/api/evil/${n}`)));
    for (const r of results) {
      expect(r.status).toBe(500);
      expect(r.body).toEqual({ requestId: r.headers['x-request-id'], message: expect.any(String), code: expect.any(Number) });
      expect([C.TIMEOUT, C.OOM, C.ENGINE, C.STALLED, C.SCRIPT_ERROR]).toContain(r.body.code);
    }
    expect((await fast(3)).body).toEqual({ fast: true, n: '3' });
    expect((await request(main.app).get('/web0/api/evil/ok')).body).toEqual({ ok: true });
  }, 60_000);
});

// Work scheduled to run after the call has returned must not stall the next call on that worker,
// whichever app it belongs to (one worker, so the next call lands on the same thread).
describe.each(['quickjs', 'vm2'])('work scheduled past the end of a call on the %s engine', (engine) => {
  const LATE = {
    // Atomics.waitAsync resolves on the worker's event loop after the call ended
    waitAsync: `export function fn() {
      const scheduled = typeof Atomics === 'object' && typeof Atomics.waitAsync === 'function';
      if (scheduled) {
        const r = Atomics.waitAsync(new Int32Array(new SharedArrayBuffer(4)), 0, 0, 50);
        if (r.async) r.value.then(() => { while (true) {} });
      }
      return { scheduled };
    }`,
    // a FinalizationRegistry callback runs whenever the collector gets to it
    finalization: `export function fn() {
      const scheduled = typeof FinalizationRegistry === 'function';
      if (scheduled) {
        const reg = new FinalizationRegistry(() => { while (true) {} });
        for (let i = 0; i < 1000; i++) reg.register({ junk: new Array(100).fill(i) }, i);
        globalThis.keepRegistry = reg;
        const garbage = [];
        for (let i = 0; i < 200; i++) garbage.push(new Array(10000).fill(i));
      }
      return { scheduled };
    }`,
  };
  let app;
  let router;
  beforeAll(() => {
    const evil = { scripts: {}, apis: [] };
    for (const [name, source] of Object.entries(LATE)) {
      evil.scripts[`${name}.js`] = source;
      evil.apis.push({ path: name, call: { script: `${name}.js`, function: 'fn' }, returnType: 'JSON' });
    }
    ({ app, router } = makeApp({
      apps: {
        evil,
        good: { scripts: { 'g.js': 'export function f() { return { good: true } }' }, apis: [{ path: 'g', call: { script: 'g.js', function: 'f' }, returnType: 'JSON' }] },
      },
      router: { engine, scriptTimeoutMs: TIMEOUT_MS, workers: 1, maxWorkers: 1 },
    }));
  });
  afterAll(() => router.close());

  test.each(Object.keys(LATE))('%s: the next call of another app is served normally', async (name) => {
    const evil = await request(app).get(`/web0/api/evil/${name}`);
    expect([200, 500]).toContain(evil.status);
    await sleep(200); // let the scheduled work come due
    for (let i = 0; i < 3; i++) {
      const t0 = Date.now();
      const good = await request(app).get('/web0/api/good/g');
      expect(good.body).toEqual({ good: true });
      expect(Date.now() - t0).toBeLessThan(FAST_MS);
    }
  });
});

// A promise job the module's top-level code queued is part of loading it: it runs before the
// load is over (under the loading call's deadline), never later inside another app's call, even
// when no stage of the loading call runs in the context (a function it does not export).
describe.each(['quickjs', 'vm2'])('promise jobs queued by a module body on the %s engine', (engine) => {
  test("a module's leftover promise job never runs inside another app's call", async () => {
    const { app, router } = makeApp({
      apps: {
        evil: {
          scripts: { 'e.js': 'Promise.resolve().then(() => { while (true) {} });\nexport function fn() { return 1 }' },
          apis: [{ path: 'missing', call: { script: 'e.js', function: 'notExported' }, returnType: 'JSON' }],
        },
        good: { scripts: { 'g.js': 'export function f() { return { good: true } }' }, apis: [{ path: 'g', call: { script: 'g.js', function: 'f' }, returnType: 'JSON' }] },
      },
      router: { engine, scriptTimeoutMs: TIMEOUT_MS, workers: 1, maxWorkers: 1 },
    });
    try {
      expect((await request(app).get('/web0/api/good/g')).body).toEqual({ good: true }); // (its context is loaded)
      const evil = await request(app).get('/web0/api/evil/missing');
      expect(evil.status).toBe(500);
      expect([C.TIMEOUT, 270203]).toContain(evil.body.code); // (its own load ran out of time; a FUNCTION_NOT_FOUND on vm2 is fine too)
      // (vm2: the worker that ran the module was ended, and the next call waits for its stand-in)
      expect((await request(app).get('/web0/api/good/g')).body).toEqual({ good: true });
      for (let i = 0; i < 3; i++) {
        const t0 = Date.now();
        const good = await request(app).get('/web0/api/good/g');
        expect(good.body).toEqual({ good: true });
        expect(Date.now() - t0).toBeLessThan(FAST_MS);
      }
    } finally {
      await router.close();
    }
  });
});

// vm2 is for trusted scripts only (README, "Isolation and limits"): a single large allocation inside
// a V8 builtin, e.g. `Object.keys(new Uint8Array(5e7))`, reaches the worker's heap limit where Node
// cannot contain it and V8 aborts the whole process. QuickJS, the default for tenant code, fails
// only that call.
test('quickjs: builtin allocation bombs fail the call and the host keeps serving', async () => {
  const bombs = {
    keys: 'export function fn() { return Object.keys(new Uint8Array(5e7)).length }',
    map: 'export function fn() { return new Array(3e7).fill(0).map(String).length }',
  };
  const { app, router } = makeApp({
    apps: {
      a: {
        scripts: { ...Object.fromEntries(Object.entries(bombs).map(([k, v]) => [`${k}.js`, v])), 'ok.js': 'export function fn() { return { ok: true } }' },
        apis: [...Object.keys(bombs), 'ok'].map((k) => ({ path: k, call: { script: `${k}.js`, function: 'fn' }, returnType: 'JSON' })),
      },
    },
    router: { scriptTimeoutMs: 8000, scriptMemoryLimitMb: 32, workers: 1 },
  });
  try {
    for (const k of Object.keys(bombs)) {
      const res = await request(app).get(`/web0/api/a/${k}`);
      expect(res.status).toBe(500);
      expect([270201, 270200]).toContain(res.body.code);
      expect((await request(app).get('/web0/api/a/ok')).body).toEqual({ ok: true });
    }
  } finally {
    await router.close();
  }
});

test("quickjs: a FinalizationRegistry callback never runs, so none runs inside another app's call", async () => {
  const { app, router } = makeApp({
    apps: {
      evil: {
        scripts: {
          'e.js': `export function plant() {
            const reg = new FinalizationRegistry(() => { throw new Error('injected by app evil') });
            for (let i = 0; i < 50; i++) { const a = {}; a.self = a; reg.register(a, i) } // (cyclic: freed by a later collection)
            globalThis.keep = (globalThis.keep || []).concat([reg]);
            return { planted: String(reg) };
          }`,
        },
        apis: [{ path: 'plant', call: { script: 'e.js', function: 'plant' }, returnType: 'JSON' }],
      },
      good: {
        scripts: {
          'g.js': `export function f() {
            const root = { children: [] };
            for (let i = 0; i < 50; i++) root.children.push({ parent: root, pad: new Array(50).fill(i) });
            return { good: true };
          }`,
        },
        apis: [{ path: 'g', call: { script: 'g.js', function: 'f' }, returnType: 'JSON' }],
      },
    },
    router: { workers: 1, maxWorkers: 1 },
  });
  try {
    expect((await request(app).get('/web0/api/evil/plant')).body).toEqual({ planted: '[object FinalizationRegistry]' });
    const failed = [];
    for (let i = 0; i < 400; i++) {
      if (i % 100 === 0) await request(app).get('/web0/api/evil/plant');
      const res = await request(app).get('/web0/api/good/g');
      if (res.status !== 200) failed.push(res.body);
    }
    expect(failed).toEqual([]);
  } finally {
    await router.close();
  }
}, 60_000);

// platform.utils.stringToBytes in a charset the host encodes (not UTF-8) answers an array of
// numbers built on the host's event loop and parsed again in the worker: a text of a few MB held
// every app for seconds, and one of 8M characters in UTF-16LE aborted the whole process.
test('stringToBytes: a result over 256 KiB is refused in the script (RangeError) without holding the host', async () => {
  const { monitorEventLoopDelay } = require('node:perf_hooks');
  const { app, router } = makeApp({
    apps: {
      a: {
        scripts: {
          'b.js': `export function fn(ctx) {
            const text = (ctx.query.ch || 'a').repeat(Number(ctx.query.n));
            try { return { bytes: platform.utils.stringToBytes(text, ctx.query.cs).length } } catch (e) { return { name: e.name, message: e.message } }
          }`,
        },
        apis: [{ path: 'b', call: { script: 'b.js', function: 'fn' }, returnType: 'JSON' }],
      },
    },
    router: { scriptTimeoutMs: 20_000, workers: 1 },
  });
  try {
    await router.ready();
    const lag = monitorEventLoopDelay({ resolution: 10 });
    lag.enable();
    const huge = await request(app).get('/web0/api/a/b').query({ n: 2_000_000, cs: 'UTF-16LE' });
    expect(huge.body).toEqual({ name: 'RangeError', message: expect.stringMatching(/more than 262144 bytes/) });
    const at = (n, cs, ch) => request(app).get('/web0/api/a/b').query({ n, cs, ch }).then((r) => r.body);
    expect(await at(128 * 1024, 'UTF-16LE')).toEqual({ bytes: 256 * 1024 });
    expect(await at(256 * 1024, 'ISO-8859-1', 'é')).toEqual({ bytes: 256 * 1024 });
    lag.disable();
    expect(lag.max / 1e6).toBeLessThan(FAST_MS); // (ns) the host's event loop was never held long
    expect(await at(256 * 1024 + 1, 'US-ASCII')).toEqual({ name: 'RangeError', message: expect.stringMatching(/more than 262144 bytes/) });
    expect(await at(400_000, 'utf-8')).toEqual({ bytes: 400_000 }); // (UTF-8 is encoded in the sandbox, within its own memory)
  } finally {
    await router.close();
  }
}, 60_000);

// QuickJS's C code runs on the worker thread's stack as well as on its WebAssembly stack: its own
// stack limit must trip first, and a module a stack overflow of the thread unwound half-way must
// not serve another call.
describe.each(['quickjs', 'vm2'])('deep nesting on the %s engine', (engine) => {
  const deep = 'var o = {}, c = o; for (var i = 0; i < 15000; i++) { c.a = [{}]; c = c.a[0] }';
  const { app, router, registry } = makeApp({
    apps: {
      evil: {
        scripts: {
          'result.js': `export function fn() { ${deep}; return o }`,
          'stringify.js': `export function fn() { ${deep}; try { return JSON.stringify(o, (k, v) => v).length } catch (e) { return String(e) } }`,
        },
        apis: ['result', 'stringify'].map((name) => ({ path: name, call: { script: `${name}.js`, function: 'fn' }, returnType: 'JSON' })),
      },
      good: {
        scripts: { 'fast.js': 'export function f(ctx) { return { fast: true, n: ctx.query.n ?? null } }' },
        apis: [{ path: 'fast', call: { script: 'fast.js', function: 'f' }, returnType: 'JSON' }],
      },
    },
    router: { engine, workers: 1 },
  });
  afterAll(() => router.close());

  test.each(['stringify', 'result'])("%s 30,000 levels deep, twice: a value, a script error, an invalid result or the time limit (never 270205), and another app's calls on that worker keep answering", async (name) => {
    for (let round = 0; round < 2; round++) {
      const res = await request(app).get(`/web0/api/evil/${name}`);
      if (res.status !== 200) expect([res.status, [C.TIMEOUT, C.SCRIPT_ERROR, 270300].includes(res.body.code) ? 'clean' : res.body]).toEqual([500, 'clean']);
      for (let n = 0; n < 3; n++) expect((await request(app).get(`/web0/api/good/fast?n=${n}`)).body).toEqual({ fast: true, n: String(n) });
    }
  }, 120_000);

  // (parsing it for the rewrite, the parser caught its stack overflow with a regular expression
  // that V8 on Node.js 20 could not compile with the stack that full: the process ended)
  test.each([
    ['500 nested function expressions', `${'(function(){'.repeat(500)}${'})();'.repeat(500)}`],
    ['40,000 nested function expressions', `${'(function(){'.repeat(40000)}${'})();'.repeat(40000)}`],
    ['100,000 nested arrays', `var a = ${'['.repeat(100000)}${']'.repeat(100000)};`],
  ])("a script of %s fails to load (270204) or runs; the host and another app's calls go on", async (_name, body) => {
    await registry.putScript('evil', 'nested.js', `export function fn(ctx) { ${body} if (ctx.query.u) return platform.http.request(ctx.query.u); return { ran: true } }`);
    await registry.putApi('evil', { path: 'nested', call: { script: 'nested.js', function: 'fn' }, returnType: 'JSON' });
    const res = await request(app).get('/web0/api/evil/nested');
    if (res.status === 200) expect(res.body).toEqual({ ran: true });
    else {
      expect([res.status, res.body.code]).toEqual([500, 270204]);
      expect(res.body.message).toMatch(/^nested\.js: .*(stack overflow|Maximum call stack)/);
    }
    expect((await request(app).get('/web0/api/good/fast?n=1')).body).toEqual({ fast: true, n: '1' });
  }, 60_000);
});

// QuickJS's JSON.stringify checks each object it writes against every object it is nested in: a
// value costs its objects times their depth, in one built-in call the interrupt handler never
// reaches. A client's 50 KB body of nested arrays, echoed by a script, held the worker for the
// whole time limit (then the backstop ended it, with every call on it), where vm2 answered
// INVALID_RESULT. Values leaving a script as JSON are at most 100 levels deep on both engines, as
// an automation's are.
describe.each(['quickjs', 'vm2'])('values nested more than 100 levels deep on the %s engine', (engine) => {
  let lookedUp;
  const lookup = new Promise((resolve) => (lookedUp = resolve));
  const accounts = {
    getAccountByToken: (token) => {
      lookedUp();
      return new Promise((resolve) => setTimeout(() => resolve({ id: token }), 300));
    },
  };
  const { app, router } = makeApp({
    apps: {
      echo: {
        scripts: {
          'echo.js': `export function fn(ctx) { return JSON.parse(ctx.body) }
            function nest(ctx) { var o = 1; for (var i = 0; i < Number(ctx.query.n); i++) o = [o]; return o }
            export function result(ctx) { return nest(ctx) }
            export function depth(ctx) {
              var o = nest(ctx), out = {};
              try { out.toJSON = platform.utils.toJSON(o).length } catch (e) { out.toJSON = e.name + ': ' + e.message }
              ctx.request.setAttribute('o', o);
              return out;
            }
            export function after(ctx, r) { return { r: r, attr: ctx.request.getAttribute('o') !== null } }`,
        },
        apis: [
          { path: 'echo', call: { script: 'echo.js', function: 'fn' }, returnType: 'JSON' },
          { path: 'result', call: { script: 'echo.js', function: 'result' }, returnType: 'JSON' },
          { path: 'depth', call: { script: 'echo.js', function: 'depth' }, after: { script: 'echo.js', function: 'after' }, returnType: 'JSON' },
        ],
      },
      good: {
        scripts: { 'slow.js': 'export function fn(ctx) { var a = platform.system.getAccountByToken("t1"); return { id: a.id } }' },
        apis: [{ path: 'slow', call: { script: 'slow.js', function: 'fn' }, returnType: 'JSON' }],
      },
    },
    router: { engine, workers: 1, scriptTimeoutMs: 2000, accounts },
  });
  afterAll(() => router.close());
  const TOO_DEEP = 'a value nested more than 100 levels deep';

  test("a client's body 25,000 levels deep echoed back: INVALID_RESULT at once, and another app's call waiting on the host on that worker answers", async () => {
    const slow = request(app).get('/web0/api/good/slow').then((res) => res);
    await lookup;
    const body = '['.repeat(25000) + ']'.repeat(25000);
    const echoed = await request(app).post('/web0/api/echo/echo').set('content-type', 'application/json').send(body);
    expect([echoed.status, echoed.body.code, echoed.body.message]).toEqual([500, 270300, `Result is not JSON-serializable: ${TOO_DEEP}`]);
    const res = await slow;
    expect([res.status, res.body]).toEqual([200, { id: 't1' }]);
  }, 60_000);

  test('101 levels cross as a result, through toJSON and as an attribute; 102 do not', async () => {
    const ok = await request(app).get('/web0/api/echo/depth?n=101');
    expect([ok.status, ok.body]).toEqual([200, { r: { toJSON: 203 }, attr: true }]);
    const deep = await request(app).get('/web0/api/echo/depth?n=102');
    expect([deep.status, deep.body]).toEqual([200, { r: { toJSON: `RangeError: ${TOO_DEEP}` }, attr: false }]);
    const result = await request(app).get('/web0/api/echo/result?n=101');
    expect([result.status, result.text.length]).toEqual([200, 203]);
    const tooDeep = await request(app).get('/web0/api/echo/result?n=102');
    expect([tooDeep.status, tooDeep.body.code, tooDeep.body.message]).toEqual([500, 270300, `Result is not JSON-serializable: ${TOO_DEEP}`]);
  }, 60_000);
});

// QuickJS's compiler looks each name a scope declares up among those before it: one destructuring
// of 60,000 names (0.4 MB) takes it about 12 s. Compiling runs under the load's deadline, which
// the pool's backstop holds the worker to: the call ends at its limit, not when the compile does.
test("quickjs: a script QuickJS takes seconds to compile ends at its time limit (270200), and another app's next call answers", async () => {
  const names = Array.from({ length: 60000 }, (_, i) => `k${i}`).join(',');
  const { app, router } = makeApp({
    apps: {
      slow: { scripts: { 's.js': `export function fn(ctx) { const { ${names} } = ctx.query; return k1 ?? 1 }` }, apis: [{ path: 'p', call: { script: 's.js', function: 'fn' }, returnType: 'JSON' }] },
      good: { scripts: { 'g.js': 'export function f() { return { good: true } }' }, apis: [{ path: 'g', call: { script: 'g.js', function: 'f' }, returnType: 'JSON' }] },
    },
    router: { engine: 'quickjs', scriptTimeoutMs: 2000, workers: 1 },
  });
  try {
    await router.ready();
    const res = await request(app).get('/web0/api/slow/p');
    expect([res.status, res.body.code]).toEqual([500, C.TIMEOUT]);
    expect((await request(app).get('/web0/api/good/g')).body).toEqual({ good: true });
  } finally {
    await router.close();
  }
}, 60_000);

// Preparing a script version (parsing it, and the rewrite's analysis of its host calls) runs on a
// worker's thread before the call's time limit starts: seconds for a script of a megabyte.
// The pool must see that work, as it sees a script running: a QuickJS worker looked
// idle, so another app's call sent to it waited the whole preparation (19 s for 1.2 MB), past its
// own queue and time limits.
describe.each(['quickjs', 'vm2'])('preparing a large script on the %s engine', (engine) => {
  /** n functions, each calling n others: n² calls to analyze (400: 1.2 MB, about 3 s of preparation on a 2-core VM). */
  function denseScript(n) {
    let s = 'function f0(t) { return platform.system.getAccountByToken(t) }\n';
    for (let i = 1; i < n; i++) {
      s += `function f${i}(t) {`;
      for (let j = 1; j <= n; j++) s += ` f${(i + j) % n}(t);`;
      s += ' }\n';
    }
    return `${s}export function fn() { return 1 }\n`;
  }

  test("holds its worker: another app's call goes elsewhere at once; the preparation is not the script's time (the call then runs)", async () => {
    const { app, router } = makeApp({
      apps: {
        big: { scripts: { 'big.js': denseScript(400) }, apis: [{ path: 'p', call: { script: 'big.js', function: 'fn' }, returnType: 'JSON' }] },
        good: { scripts: { 'g.js': 'export function f() { return { good: true } }' }, apis: [{ path: 'g', call: { script: 'g.js', function: 'f' }, returnType: 'JSON' }] },
      },
      // (the preparation takes about 3 s on a 2-core VM; the other app's call comes 1 s in)
      router: { engine, scriptTimeoutMs: 2000, workers: 2, queueTimeoutMs: 25_000, scriptSizeLimit: '2mb' },
    });
    try {
      await router.ready();
      expect((await request(app).get('/web0/api/good/g')).body).toEqual({ good: true }); // (its context is on one worker)
      const big = request(app).get('/web0/api/big/p').then((r) => r);
      await sleep(1000); // the worker is preparing big.js now
      const t0 = Date.now();
      const good = await request(app).get('/web0/api/good/g');
      const goodMs = Date.now() - t0;
      expect(good.body).toEqual({ good: true });
      expect(goodMs).toBeLessThan(2000);
      const res = await big;
      // (vm2 compiles the 1.2 MB source in its worker's heap, which scriptMemoryLimitMb bounds)
      if (engine === 'quickjs' || res.status === 200) expect([res.status, res.body]).toEqual([200, 1]);
      else expect([res.status, res.body.code]).toEqual([500, C.OOM]);
      for (let i = 0; i < 2; i++) expect((await request(app).get('/web0/api/good/g')).body).toEqual({ good: true });
    } finally {
      await router.close();
    }
  }, 120_000);
});
