'use strict';
// A failed automation step: the API's onError gets an APIError with the step's message and code
// (as the call), or the error body goes out. scriptTimeoutMs covers the whole run.
const http = require('node:http');
const request = require('supertest');
const { makeApp } = require('./helpers/app');

const SCRIPT = `
export function fail(ctx, state) { var e = new Error('stock for ' + state.vars.item + ' is empty'); e.code = 4009; throw e; }
export function plain(ctx, state) { throw new Error('no code here'); }
export function spin(ctx, state) { var until = Date.now() + 300; while (Date.now() < until) {} return state.vars.n; }
export function deep(ctx, state) { var o = {}; var r = o; for (var i = 0; i < 150; i++) { o.a = {}; o = o.a; } return r; }
export function onError(ctx, error) {
  ctx.response.setStatus(409);
  return { handled: true, error: error };
}
`;
const onError = { script: 's.js', function: 'onError' };

describe('errors in the call reach onError', () => {
  const automations = [
    { id: 'script', steps: [{ type: 'set', vars: { item: "'pen'" } }, { id: 'reserve', type: 'script', script: 's.js', function: 'fail' }] },
    { id: 'plain', steps: [{ type: 'script', script: 's.js', function: 'plain' }] },
    { id: 'blocked', steps: [{ id: 'notify', type: 'http', method: 'POST', url: "'http://127.0.0.1:9/hook'" }] },
    { id: 'expr', steps: [{ id: 'read', type: 'set', vars: { id: 'ctx.query.id' } }] },
    { id: 'cond', steps: [{ id: 'check', type: 'if', condition: 'ctx.query', then: [] }] },
    { id: 'items', steps: [{ type: 'forEach', items: "'abc'", steps: [] }] },
    { id: 'abort', steps: [{ type: 'abort', message: "'quota exceeded'", status: 429 }] },
    { id: 'badScript', steps: [{ type: 'script', script: 'nope.js', function: 'f' }] },
    { id: 'deep', steps: [{ type: 'forEach', items: '[1]', steps: [{ id: 'tree', type: 'script', script: 's.js', function: 'deep' }] }] },
    { id: 'keep', steps: [{ type: 'return' }] },
    { id: 'bodyItems', steps: [{ id: 'each', type: 'forEach', items: 'ctx.json', steps: [] }] },
    { id: 'bodyCond', steps: [{ id: 'check', type: 'if', condition: 'ctx.json', then: [] }] },
    { id: 'bodyUrl', steps: [{ id: 'call', type: 'http', url: 'ctx.json' }] },
  ];
  const apis = automations.flatMap(({ id }) => [
    { path: id, call: { automation: id }, returnType: 'JSON', onError },
    { path: `${id}/bare`, call: { automation: id }, returnType: 'JSON' },
  ]);
  apis.push({ path: 'deep-after', call: { script: 's.js', function: 'deep' }, after: { automation: 'keep' }, returnType: 'JSON' });
  const { app, router } = makeApp({ apps: { a: { scripts: { 's.js': SCRIPT }, automations, apis } } });
  afterAll(() => router.close());

  const handled = async (path) => {
    const res = await request(app).get(`/web0/api/a/${path}`);
    expect(res.status).toBe(409);
    expect(res.body).toMatchObject({ handled: true, error: { requestId: res.headers['x-request-id'] } });
    return res.body.error;
  };

  test("a script step's error: its message and code", async () => {
    expect(await handled('script')).toMatchObject({ message: 'stock for pen is empty', code: 4009 });
    expect(await handled('plain')).toMatchObject({ message: 'no code here', code: 270000 });
    const bare = await request(app).get('/web0/api/a/script/bare');
    expect(bare.status).toBe(500);
    expect(bare.body).toEqual({ requestId: bare.headers['x-request-id'], message: 'stock for pen is empty', code: 4009 });
  });

  test("an http step's refusal by the outbound policy: OUTBOUND_BLOCKED", async () => {
    expect(await handled('blocked')).toMatchObject({ code: 270500, message: expect.stringMatching(/127\.0\.0\.1/) });
  });

  test('an expression that cannot be evaluated, a non-boolean condition, a non-list: AUTOMATION_STEP_FAILED naming the step', async () => {
    expect(await handled('expr')).toEqual(expect.objectContaining({ code: 270605, message: "automation 'expr' step 'read' (set): vars.id: No such key: id at column 11" }));
    expect(await handled('cond')).toMatchObject({ code: 270605, message: expect.stringMatching(/^automation 'cond' step 'check' \(if\): condition must be a boolean, got \{\}$/) });
    expect(await handled('items')).toMatchObject({ code: 270605, message: expect.stringMatching(/^automation 'items' steps\[0\] \(forEach\): items must be a list, got "abc"$/) });
  });

  test("a value nested past 100 levels: a script step's result is AUTOMATION_STEP_FAILED naming the step; a script call's result has no JSON form (INVALID_RESULT)", async () => {
    expect(await handled('deep')).toMatchObject({
      code: 270605,
      message: "automation 'deep' step 'tree' (script): its result: Result is not JSON-serializable: a value nested more than 100 levels deep",
    });
    const after = await request(app).get('/web0/api/a/deep-after');
    expect(after.status).toBe(500);
    expect(after.body).toMatchObject({ code: 270300, message: 'Result is not JSON-serializable: a value nested more than 100 levels deep' });
  });

  test('a failure showing a value from the request shows its start only (a big body is not copied into the message and the log)', async () => {
    const big = { data: 'x'.repeat(200_000) };
    for (const [path, start] of [
      ['bodyItems', "automation 'bodyItems' step 'each' (forEach): items must be a list, got {\"data\":\"xxx"],
      ['bodyCond', "automation 'bodyCond' step 'check' (if): condition must be a boolean, got {\"data\":\"xxx"],
      ['bodyUrl', "automation 'bodyUrl' step 'call' (http): url must be a non-empty string, got {\"data\":\"xxx"],
    ]) {
      const res = await request(app).post(`/web0/api/a/${path}/bare`).send(big);
      expect(res.status).toBe(500);
      expect(res.body.code).toBe(270605);
      expect(res.body.message.startsWith(start)).toBe(true);
      expect(res.body.message.length).toBeLessThan(400);
      expect(res.body.message.endsWith('…')).toBe(true);
    }
  });

  test('abort: onError sees code 270001; without onError the status is the abort’s', async () => {
    expect(await handled('abort')).toMatchObject({ code: 270001, message: 'quota exceeded' });
    const bare = await request(app).get('/web0/api/a/abort/bare');
    expect(bare.status).toBe(429);
    expect(bare.body).toMatchObject({ code: 270001, message: 'quota exceeded' });
  });

  test('a script step whose script is missing: SCRIPT_NOT_FOUND', async () => {
    expect(await handled('badScript')).toMatchObject({ code: 270202, message: "Script 'nope.js' not found" });
  });
});

describe.each(['quickjs', 'vm2'])('a script step that throws, on %s', (engine) => {
  const lines = [];
  const logger = { info: () => {}, warn: () => {}, error: (message, meta) => lines.push({ message, meta }) };
  const automations = [{ id: 'reserve', steps: [{ type: 'set', vars: { item: "'pen'" } }, { id: 'stock', type: 'script', script: 's.js', function: 'fail' }] }];
  const apis = [{ path: 'r', call: { automation: 'reserve' }, returnType: 'JSON' }];
  const { app, router } = makeApp({ router: { engine, logger, exposeErrorLocation: true }, apps: { a: { scripts: { 's.js': SCRIPT }, automations, apis } } });
  afterAll(() => router.close());

  test("is logged (and located) at the script's line, as a script call is", async () => {
    const res = await request(app).get('/web0/api/a/r');
    expect(res.body).toMatchObject({ code: 4009, location: expect.stringMatching(/^s\.js:2:\d+$/) });
    const [{ message, meta }] = lines.filter((l) => l.meta && l.meta.requestId === res.body.requestId);
    expect(meta).toMatchObject({ stage: 'call', script: 'reserve', errorName: 'Error', location: res.body.location });
    expect(meta.stack).toMatch(/^at fail \(s\.js:2:\d+\)$/);
    expect(message).toContain(`at ${res.body.location}`);
  });
});

describe('scriptTimeoutMs covers the whole automation', () => {
  const LIMIT = 1500;
  let hang;
  beforeAll(async () => {
    hang = http.createServer(() => {}); // never answers
    await new Promise((r) => hang.listen(0, '127.0.0.1', r));
  });
  afterAll(async () => {
    hang.closeAllConnections();
    await new Promise((r) => hang.close(r));
  });
  const automations = [
    // each script step (300 ms) is well within the limit; ten of them are not
    { id: 'steps', steps: [{ type: 'forEach', items: '[1, 2, 3, 4, 5, 6, 7, 8, 9, 10]', steps: [{ type: 'set', vars: { n: 'item' } }, { type: 'script', script: 's.js', function: 'spin' }] }] },
    // expression steps only: a billion of them (no machine gets through them within the limit)
    { id: 'loop', steps: [{ type: 'set', vars: { xs: '[' + Array.from({ length: 1000 }, (_, i) => i).join(',') + ']' } }, { type: 'forEach', items: 'state.vars.xs', steps: [{ type: 'forEach', items: 'state.vars.xs', as: 'x', steps: [{ type: 'forEach', items: 'state.vars.xs', as: 'y', steps: [{ type: 'set', vars: { last: 'y' } }] }] }] }] },
    { id: 'wait', steps: [{ id: 'slow', type: 'http', url: "'http://127.0.0.1:' + ctx.query.port + '/'" }] },
  ];
  const apis = automations.map(({ id }) => ({ path: id, call: { automation: id }, returnType: 'JSON', onError }));
  const { app, router } = makeApp({
    apps: { a: { scripts: { 's.js': SCRIPT }, automations, apis } },
    router: { scriptTimeoutMs: LIMIT, outbound: { allowPrivateNetworks: true } },
  });
  afterAll(() => router.close());

  test.each([
    ['steps', 'script steps in a loop'],
    ['loop', 'expression steps in nested loops'],
    ['wait', 'an http step waiting on a silent upstream'],
  ])('%s: %s end with SCRIPT_TIMEOUT at the limit, without onError', async (path) => {
    const started = Date.now();
    const res = await request(app).get(`/web0/api/a/${path}?port=${hang.address().port}`);
    const took = Date.now() - started;
    expect(res.status).toBe(500);
    expect(res.body.code).toBe(270200);
    expect(res.body.handled).toBeUndefined();
    expect(took).toBeGreaterThanOrEqual(LIMIT - 50);
    expect(took).toBeLessThan(LIMIT + 8000); // a loaded machine: generous slack, still far below the ten steps' 3 s + startup
  });
});

describe('an http step the run\'s deadline bounds', () => {
  const { compileAutomation } = require('../dist/cjs/automation/compile');
  const { runAutomation } = require('../dist/cjs/automation/interpreter');
  const { clock } = require('../dist/cjs/timers');
  // the host's guarded client as seen from the interpreter: a request that never answers fails
  // when its timer runs out, with OUTBOUND_FAILED (that timer runs on the host's thread, beside
  // the worker's own deadline timer)
  const asked = [];
  const executors = {
    runScript: async () => null,
    http: (req) =>
      new Promise((_, reject) => {
        asked.push(req.timeoutMs);
        setTimeout(() => reject(Object.assign(new Error(`request to upstream timed out after ${req.timeoutMs} ms`), { code: 270501, status: 500 })), req.timeoutMs);
      }),
  };
  const run = (step) => runAutomation(compileAutomation({ id: 'wait', steps: [{ id: 'call', type: 'http', url: "'http://upstream.example/'", ...step }] }), { ctx: {} }, executors, ((d) => () => d)(clock() + 300));

  test('ends with SCRIPT_TIMEOUT (fatal: no onError) when the time runs out, not with the request failing at the deadline', async () => {
    // (before, the request's timer was set to the deadline: it raced the worker's, and when it won
    // the call failed with OUTBOUND_FAILED and ran onError past scriptTimeoutMs)
    await expect(run({})).rejects.toMatchObject({ code: 270200, fatal: true });
    await expect(run({ timeoutMs: 60_000 })).rejects.toMatchObject({ code: 270200, fatal: true });
    expect(asked.every((ms) => ms > 300)).toBe(true);
  });

  test("a step's own shorter timeoutMs is the request's failure (OUTBOUND_FAILED), for onError to handle", async () => {
    await expect(run({ timeoutMs: 50 })).rejects.toMatchObject({ code: 270501, fatal: false, message: 'request to upstream timed out after 50 ms' });
  });
});

describe('preparing and loading a script step’s script does not count (as for a script call)', () => {
  // a script whose first preparation in a worker takes well over the limit (the rewrite analyzes
  // 160,000 calls: about 2 s), while QuickJS compiles it in well under it (about 0.4 s: compiling
  // runs under the load's deadline of the same length); it runs at once
  const LIMIT = 1000;
  let big = 'export function f(ctx, state) { return 1 }\nfunction f0(t) { return platform.system.getAccountByToken(t) }\n';
  for (let i = 1; i < 400; i++) big += `function f${i}(t) {${Array.from({ length: 400 }, (_, j) => ` f${(i + j + 1) % 400}(t);`).join('')} }\n`;
  const automations = [{ id: 'big', steps: [{ id: 's', type: 'script', script: 'big.js', function: 'f' }, { type: 'return', value: "'done ' + string(state.steps.s)" }] }];
  let made; // (started when this block runs: its worker does not slow the other blocks' first calls)
  beforeAll(() => {
    made = makeApp({
      apps: { a: { scripts: { 'big.js': big }, automations, apis: [{ path: 'big', call: { automation: 'big' }, returnType: 'JSON' }] } },
      router: { scriptTimeoutMs: LIMIT, workers: 1, maxWorkers: 1, scriptSizeLimit: '4mb' }, // (the script is 1.4 MB)
    });
  });
  afterAll(() => made.router.close({ force: true }));

  test('the first call of an automation with that script step ends within the limit', async () => {
    await made.router.ready();
    const started = Date.now();
    const res = await request(made.app).get('/web0/api/a/big');
    const took = Date.now() - started;
    expect({ status: res.status, body: res.body }).toEqual({ status: 200, body: 'done 1' });
    expect(took).toBeGreaterThan(LIMIT); // (the preparation took longer than the limit: the case this is about)
  }, 30_000);
});

describe('one expression computing past the limit', () => {
  // a single `set` whose expression alone runs for many seconds (400 x 400 x 400 comparisons)
  const L = '[' + Array.from({ length: 400 }, (_, i) => i).join(',') + ']';
  const automations = [{ id: 'cubic', steps: [{ type: 'set', vars: { n: `${L}.map(a, ${L}.map(b, ${L}.filter(c, c == a + b))).size()` } }] }];
  const { app, router } = makeApp({
    apps: {
      a: { scripts: { 's.js': SCRIPT }, automations, apis: [{ path: 'cubic', call: { automation: 'cubic' }, returnType: 'JSON' }] },
      b: { scripts: { 'f.js': 'export function f() { return { fast: true } }' }, apis: [{ path: 'fast', call: { script: 'f.js', function: 'f' }, returnType: 'JSON' }] },
    },
    router: { scriptTimeoutMs: 500, workers: 1, maxWorkers: 1 },
  });
  afterAll(() => router.close({ force: true }));

  test('ends with SCRIPT_TIMEOUT (its worker replaced), and another app is served meanwhile', async () => {
    await router.ready();
    expect((await request(app).get('/web0/api/b/fast')).body).toEqual({ fast: true });
    const started = Date.now();
    const cubic = request(app).get('/web0/api/a/cubic');
    const fast = new Promise((r) => setTimeout(r, 300)).then(() => request(app).get('/web0/api/b/fast'));
    const [c, f] = await Promise.all([cubic, fast]);
    expect({ status: c.status, code: c.body.code }).toEqual({ status: 500, code: 270200 });
    expect(f.body).toEqual({ fast: true });
    // (before, both answered only when the expression was done: about 10 s on this machine)
    expect(Date.now() - started).toBeLessThan(6000);
  });
});

describe('an automation of many quick steps', () => {
  // a billion `set` steps, each expression quick: no one slice is long, the run as a whole is
  // (each round ends with a `set`, so no round's result is a list of a thousand results)
  const xs = '[' + Array.from({ length: 1000 }, (_, i) => i).join(',') + ']';
  const inner = { type: 'forEach', items: 'state.vars.xs', as: 'y', steps: [{ type: 'set', vars: { last: 'y' } }] };
  const middle = { type: 'forEach', items: 'state.vars.xs', as: 'x', steps: [inner, { type: 'set', vars: { x: 'x' } }] };
  const automations = [{ id: 'loop', steps: [{ type: 'set', vars: { xs } }, { type: 'forEach', items: 'state.vars.xs', steps: [middle, { type: 'set', vars: { i: 'index' } }] }] }];
  const LIMIT = 5000;
  let app, router;
  beforeAll(() => {
    ({ app, router } = makeApp({
      apps: {
        a: { automations, apis: [{ path: 'loop', call: { automation: 'loop' }, returnType: 'JSON' }] },
        b: { scripts: { 'f.js': 'export function f() { return { fast: true } }' }, apis: [{ path: 'fast', call: { script: 'f.js', function: 'f' }, returnType: 'JSON' }] },
      },
      router: { scriptTimeoutMs: LIMIT, workers: 1, maxWorkers: 1 },
    }));
  });
  afterAll(() => router.close({ force: true }));

  test('does not hold its worker: another app’s call on that worker is served meanwhile', async () => {
    await router.ready();
    expect((await request(app).get('/web0/api/b/fast')).body).toEqual({ fast: true });
    const done = {};
    const loop = request(app).get('/web0/api/a/loop').then((r) => ((done.loop = Date.now()), r));
    const fast = new Promise((r) => setTimeout(r, 300)).then(() => request(app).get('/web0/api/b/fast')).then((r) => ((done.fast = Date.now()), r));
    const [l, f] = await Promise.all([loop, fast]);
    expect({ status: l.status, code: l.body.code }).toEqual({ status: 500, code: 270200 });
    expect(f.body).toEqual({ fast: true });
    // (before, the other call was answered only when the loop ended at the limit)
    expect(done.loop - done.fast).toBeGreaterThan(LIMIT / 2);
  }, 30_000);
});

describe('a forEach whose rounds have no steps', () => {
  const { compileAutomation } = require('../dist/cjs/automation/compile');
  const { runAutomation } = require('../dist/cjs/automation/interpreter');
  const executors = { runScript: async () => null, http: async () => ({}) };

  test('checks the deadline and lets the event loop turn every round, not only before steps', async () => {
    const items = new Array(1_000_000).fill(0);
    const automation = compileAutomation({ id: 'empty', steps: [{ id: 'spin', type: 'forEach', items: 'ctx.items', steps: [] }] });
    let turned = false;
    setTimeout(() => (turned = true), 1);
    // (the deadline passes once the event loop has turned: a run that never lets it turn ends its
    // million rounds, one that checks the deadline only before steps ends them too)
    const run = runAutomation(automation, { ctx: { items } }, executors, () => (turned ? 0 : Number.MAX_SAFE_INTEGER));
    const turnedFirst = await run.then(
      () => null,
      (e) => {
        expect(e).toMatchObject({ code: 270200, fatal: true, message: "automation 'empty' ran past the time limit (scriptTimeoutMs) in step 'spin' (forEach)" });
        return turned;
      },
    );
    // (before, the rounds ran to the end, past the deadline and without a turn)
    expect(turnedFirst).toBe(true);
  }, 30_000);
});

describe('a value that grows step after step (the interpreter’s values live on the worker’s own heap)', () => {
  const rounds = '[' + Array.from({ length: 30 }, (_, i) => i).join(',') + ']';
  const automations = [
    // a list doubled 30 times: copying it whole aborted the whole process (V8's heap limit, inside a builtin)
    { id: 'list', steps: [{ type: 'set', vars: { l: '[1, 2, 3, 4, 5, 6, 7, 8]' } }, { id: 'grow', type: 'forEach', items: rounds, steps: [{ id: 'double', type: 'set', vars: { l: 'state.vars.l + state.vars.l' } }] }] },
    // texts that fit one by one (4 MiB, 8 MiB, 8 MiB), sent to a script step together as its state
    { id: 'text', steps: [{ type: 'set', vars: { s: "'abcdefgh'" } }, { type: 'forEach', items: '[' + Array.from({ length: 19 }, (_, i) => i).join(',') + ']', steps: [{ type: 'set', vars: { s: 'state.vars.s + state.vars.s' } }] }, { type: 'set', vars: { t: 'state.vars.s + state.vars.s', u: 'state.vars.s + state.vars.s' } }, { id: 'use', type: 'script', script: 's.js', function: 'plain' }] },
    { id: 'fine', steps: [{ type: 'return', value: "{'ok': true}" }] },
  ];
  const apis = automations.map(({ id }) => ({ path: id, call: { automation: id }, returnType: 'JSON' }));
  // another app's call, waiting on the host on the same (only) worker meanwhile
  const other = { scripts: { 'w.js': "export function who(ctx) { return platform.system.getAccountByToken('ada') }" }, apis: [{ path: 'who', call: { script: 'w.js', function: 'who' }, returnType: 'JSON' }] };
  const accounts = { getAccountByToken: (name) => new Promise((r) => setTimeout(() => r({ id: name }), 3000)) };
  const { app, router } = makeApp({ apps: { a: { scripts: { 's.js': SCRIPT }, automations, apis }, b: other }, router: { accounts, maxWorkers: 1 } });
  afterAll(() => router.close());

  test('fails its own call with AUTOMATION_STEP_FAILED past 16 MiB, naming where; the host and other calls go on', async () => {
    const waiting = request(app).get('/web0/api/b/who').then((r) => r);
    await new Promise((r) => setTimeout(r, 500));
    const list = await request(app).get('/web0/api/a/list');
    expect(list.status).toBe(500);
    expect(list.body).toMatchObject({ code: 270605, message: expect.stringMatching(/^automation 'list' step '(grow|double)' \(\w+\): .*a value larger than 16 MiB/) });
    const text = await request(app).get('/web0/api/a/text');
    expect(text.status).toBe(500);
    expect(text.body).toMatchObject({ code: 270605, message: expect.stringMatching(/^automation 'text' step 'use' \(script\): state: a value larger than 16 MiB/) });
    const fine = await request(app).get('/web0/api/a/fine');
    expect(fine.body).toEqual({ ok: true });
    const who = await waiting;
    expect({ status: who.status, body: who.body }).toEqual({ status: 200, body: { id: 'ada' } });
  }, 60_000);
});

describe('a forEach collecting large http bodies (its list lives on the worker’s own heap)', () => {
  let upstream;
  const body = 'x'.repeat(4 * 1024 * 1024);
  beforeAll(async () => {
    upstream = http.createServer((req, res) => {
      res.setHeader('content-type', 'text/plain');
      res.end(body);
    });
    await new Promise((r) => upstream.listen(0, '127.0.0.1', r));
  });
  afterAll(() => new Promise((r) => upstream.close(r)));

  const base = "ctx.headers['x-upstream']";
  // 60 rounds of a 4 MiB body each: 240 MiB in one list, past the worker's whole heap
  const items = '[' + Array.from({ length: 60 }, (_, i) => i).join(',') + ']';
  const automations = [
    { id: 'bodies', steps: [{ id: 'all', type: 'forEach', items, steps: [{ type: 'http', url: `${base} + '/big'` }] }] },
    { id: 'few', steps: [{ type: 'forEach', items: '[1, 2]', steps: [{ type: 'http', url: `${base} + '/big'` }] }, { type: 'return', value: "{'ok': true}" }] },
  ];
  const apis = automations.map(({ id }) => ({ path: id, call: { automation: id }, returnType: 'JSON' }));
  const other = { scripts: { 'w.js': "export function who(ctx) { return platform.system.getAccountByToken('ada') }" }, apis: [{ path: 'who', call: { script: 'w.js', function: 'who' }, returnType: 'JSON' }] };
  const accounts = { getAccountByToken: (name) => new Promise((r) => setTimeout(() => r({ id: name }), 3000)) };
  const { app, router } = makeApp({
    apps: { a: { scripts: { 's.js': SCRIPT }, automations, apis }, b: other },
    router: { accounts, maxWorkers: 1, scriptTimeoutMs: 60_000, outbound: { allowPrivateNetworks: true } },
  });
  afterAll(() => router.close());

  test('fails its own call with AUTOMATION_STEP_FAILED past 16 MiB; the worker and another app’s call go on', async () => {
    const up = `http://127.0.0.1:${upstream.address().port}`;
    const waiting = request(app).get('/web0/api/b/who').then((r) => r);
    await new Promise((r) => setTimeout(r, 500));
    const all = await request(app).get('/web0/api/a/bodies').set('x-upstream', up);
    expect(all.status).toBe(500);
    expect(all.body).toMatchObject({ code: 270605, message: expect.stringMatching(/^automation 'bodies' step 'all' \(forEach\): .*a value larger than 16 MiB/) });
    const few = await request(app).get('/web0/api/a/few').set('x-upstream', up);
    expect({ status: few.status, body: few.body }).toEqual({ status: 200, body: { ok: true } });
    const who = await waiting;
    expect({ status: who.status, body: who.body }).toEqual({ status: 200, body: { id: 'ada' } });
  }, 90_000);
});

// (QuickJS: 128 MiB beside the scripts' heap; vm2, whose heap is its scripts' limit: half of scriptMemoryLimitMb)
describe.each([
  ['quickjs', 128, 20],
  ['vm2', 32, 8],
])('many automations at once, each holding large values (their values share their %s worker’s heap)', (engine, budgetMb, calls) => {
  let upstream;
  const body = 'x'.repeat(4 * 1024 * 1024);
  beforeAll(async () => {
    // /big: 4 MiB at once; /hold: a small answer after 3 s, so that every call holds its bodies meanwhile
    upstream = http.createServer((req, res) => {
      res.setHeader('content-type', 'text/plain');
      if (req.url === '/big') res.end(body);
      else setTimeout(() => res.end('ok'), 3000);
    });
    await new Promise((r) => upstream.listen(0, '127.0.0.1', r));
  });
  afterAll(() => new Promise((r) => upstream.close(r)));

  // each call keeps three 4 MiB bodies (12 MiB, within its own 16 MiB), more such calls at once on one worker than fit
  const get = (path) => ({ type: 'http', url: `ctx.headers['x-upstream'] + '${path}'`, timeoutMs: 60_000 });
  const automations = [{ id: 'three', steps: [{ id: 'all', type: 'forEach', items: '[1, 2, 3]', steps: [get('/big')] }, get('/hold'), { type: 'return', value: "{'n': size(state.steps.all)}" }] }];
  const apis = [{ path: 'three', call: { automation: 'three' }, returnType: 'JSON' }];
  const { app, router } = makeApp({
    apps: { a: { automations, apis }, b: { scripts: { 'f.js': 'export function f() { return { fast: true } }' }, apis: [{ path: 'fast', call: { script: 'f.js', function: 'f' }, returnType: 'JSON' }] } },
    router: { engine, workers: 1, maxWorkers: 1, scriptTimeoutMs: 90_000, queueTimeoutMs: 60_000, outbound: { allowPrivateNetworks: true, timeoutMs: 60_000 } },
  });
  afterAll(() => router.close());

  test('the calls that would take the worker past its budget for them fail (SCRIPT_OUT_OF_MEMORY); the worker and the others go on', async () => {
    const up = `http://127.0.0.1:${upstream.address().port}`;
    const rs = await Promise.all(Array.from({ length: calls }, () => request(app).get('/web0/api/a/three').set('x-upstream', up)));
    const outcomes = rs.map((r) => (r.status === 200 ? JSON.stringify(r.body) : `${r.status} ${r.body.code} ${r.body.message}`));
    const ok = outcomes.filter((o) => o === '{"n":3}').length;
    const full = outcomes.filter((o) => o === `500 270201 automation 'three' step 'all' (forEach): the automations running on this worker would hold more than ${budgetMb} MiB of values`).length;
    // (on a worker whose heap filled, every call failed: 270201 'The script ran out of memory' or 270205)
    expect({ ok: ok >= 2, full: full >= 2, other: outcomes.filter((o) => o !== '{"n":3}' && !o.includes(`${budgetMb} MiB`)) }).toEqual({ ok: true, full: true, other: [] });
    // what they held was given back: calls one after another all succeed, on the same worker
    for (let i = 0; i < 2; i++) expect((await request(app).get('/web0/api/a/three').set('x-upstream', up)).body).toEqual({ n: 3 });
    expect((await request(app).get('/web0/api/b/fast')).body).toEqual({ fast: true });
  }, 120_000);
});

// A worker keeps the automations it compiled (by definition text) on its own heap: many large
// ones (each within the limits of one automation) run one after another must not fill it
describe('many large automations run on one worker (their compiled forms share its heap)', () => {
  const big = Array(1000).fill('1').join('-'); // (2,000 syntax nodes: about half a MiB compiled)
  const automation = (id) => ({
    id,
    steps: [...Array.from({ length: 4 }, () => ({ type: 'set', vars: { v: big } })), ...Array.from({ length: 990 }, () => ({ type: 'set', vars: { w: 1 } })), { type: 'return', value: `'${id}'` }],
  });
  const automations = Array.from({ length: 30 }, (_, i) => automation(`a${i}`));
  let made;
  beforeAll(() => {
    // (vm2 with the smallest heap: about 70 MiB, which 18 of them filled)
    made = makeApp({
      apps: {
        a: { automations, apis: automations.map(({ id }) => ({ path: id, call: { automation: id }, returnType: 'JSON' })) },
        b: { scripts: { 'f.js': 'export function f() { return { fast: true } }' }, apis: [{ path: 'fast', call: { script: 'f.js', function: 'f' }, returnType: 'JSON' }] },
      },
      router: { engine: 'vm2', scriptMemoryLimitMb: 16, contextBudgetMb: 8, workers: 1, maxWorkers: 1, scriptTimeoutMs: 60_000, queueTimeoutMs: 60_000 },
    });
  });
  afterAll(() => made.router.close({ force: true }));

  test('each runs, and the worker goes on serving (the oldest compiled forms are dropped)', async () => {
    const outcomes = [];
    for (const { id } of automations) {
      const res = await request(made.app).get(`/web0/api/a/${id}`);
      outcomes.push(res.status === 200 ? res.body : `${res.status} ${res.body.code} ${res.body.message}`);
    }
    expect(outcomes).toEqual(automations.map(({ id }) => id));
    expect((await request(made.app).get('/web0/api/a/a0')).body).toBe('a0');
    expect((await request(made.app).get('/web0/api/b/fast')).body).toEqual({ fast: true });
  }, 180_000);
});

// A run that ends at its deadline while a script step waits on the host (an accounts lookup that
// never answers): what it held goes back to its worker's budget (the stage was dropped unsettled,
// the run never ended, and its values stayed counted: after a few such calls every automation
// holding a value on that worker failed with SCRIPT_OUT_OF_MEMORY)
describe.each([
  ['quickjs', 12, 14],
  ['vm2', 4, 10],
])('automations ended at their deadline inside a script step (%s)', (engine, mb, rounds) => {
  const automations = [
    { id: 'stuck', steps: [{ type: 'set', vars: { big: 'ctx.body' } }, { type: 'script', script: 'w.js', function: 'lookup' }] },
    { id: 'hold', steps: [{ type: 'set', vars: { big: 'ctx.body' } }, { type: 'return', value: 'size(state.vars.big)' }] },
  ];
  const apis = automations.map(({ id }) => ({ path: id, methods: ['POST'], call: { automation: id }, returnType: 'JSON' }));
  const { app, router } = makeApp({
    apps: { a: { scripts: { 'w.js': "export function lookup(ctx) { return platform.system.getAccountByToken('t') }" }, automations, apis } },
    router: { engine, workers: 1, maxWorkers: 1, scriptTimeoutMs: 1000, bodyLimit: '16mb', accounts: { getAccountByToken: () => new Promise(() => {}) } },
  });
  afterAll(() => router.close());

  test('give back what they held: later calls on the worker holding as much still succeed', async () => {
    const body = 'x'.repeat(mb * 1024 * 1024);
    const post = (path) => request(app).post(`/web0/api/a/${path}`).set('content-type', 'text/plain').send(body);
    for (let i = 0; i < rounds; i++) {
      const stuck = await post('stuck');
      expect({ status: stuck.status, code: stuck.body.code }).toEqual({ status: 500, code: 270200 });
    }
    const held = await post('hold');
    expect({ status: held.status, body: held.body }).toEqual({ status: 200, body: mb * 1024 * 1024 });
  }, 120_000);
});

describe.each(['quickjs', 'vm2'])('a script step returning a text past 16 MiB (%s)', (engine) => {
  const automations = [{ id: 'blob', steps: [{ id: 'big', type: 'script', script: 'b.js', function: 'big' }, { type: 'return', value: '1' }] }];
  const { app, router } = makeApp({
    apps: { a: { scripts: { 'b.js': 'export function big(ctx) { return "x".repeat(+ctx.query.mb * 1024 * 1024) }' }, automations, apis: [{ path: 'blob', call: { automation: 'blob' }, returnType: 'JSON' }] } },
    router: { engine },
  });
  afterAll(() => router.close());

  test('fails its call as too large (out of memory on QuickJS), not as an engine failure; 8 MiB goes through', async () => {
    expect((await request(app).get('/web0/api/a/blob?mb=8')).body).toBe(1);
    const res = await request(app).get('/web0/api/a/blob?mb=17');
    expect(res.status).toBe(500);
    // (the interpreter's 16 MiB; on QuickJS the stage's output and its copies may first pass the
    // call's 64 MiB, by how full the context's heap is: out of memory, never ENGINE_FAILURE)
    const tooLarge = { code: 270605, message: expect.stringMatching(/a value larger than 16 MiB/) };
    const outOfMemory = { code: 270201, message: expect.stringMatching(/^The script ran out of memory/) };
    expect(res.body).toMatchObject(engine === 'quickjs' && res.body.code === 270201 ? outOfMemory : tooLarge);
  }, 60_000);
});

describe('an expression building a value past 16 MiB in one operation', () => {
  // V8 cannot fail one allocation of hundreds of MB gracefully: it aborts the whole process. These
  // operations refuse such a result before allocating it (the 16 MiB value limit is otherwise
  // checked once the expression is done); a failure here would take the test process down.
  const L = `[${Array.from({ length: 1000 }, (_, i) => i).join(',')}]`;
  const M = `[${Array.from({ length: 59 }, (_, i) => i).join(',')}]`;
  const nine = { type: 'set', vars: { s: `'${'x'.repeat(9000)}'` } };
  const big = { type: 'set', vars: { t: `${L}.map(b, state.vars.s).join()` } }; // 9 MB: within the limit
  const cases = {
    join: `size(${M}.map(a, state.vars.t).join())`,
    joinSep: `size(${M}.map(a, 'x').join(state.vars.t))`,
    concat: 'size(state.vars.t + state.vars.t)',
  };
  const automations = Object.entries(cases).map(([id, expr]) => ({ id, steps: [nine, big, { type: 'set', vars: { v: expr } }, { type: 'return', value: 'state.vars.v' }] }));
  automations.push({ id: 'ok', steps: [nine, big, { type: 'return', value: 'size(state.vars.t + "!")' }] });
  const { app, router } = makeApp({ apps: { a: { automations, apis: automations.map(({ id }) => ({ path: id, call: { automation: id }, returnType: 'JSON' })) } } });
  afterAll(() => router.close());

  test.each(['join', 'joinSep', 'concat'])('%s fails its call with 270605 naming the operation; the host goes on', async (id) => {
    const res = await request(app).get(`/web0/api/a/${id}`);
    expect(res.status).toBe(500);
    expect(res.body.code).toBe(270605);
    expect(res.body.message).toMatch(/would be larger than 16 MiB/);
  });

  test('within the limit the same operations run', async () => {
    const res = await request(app).get('/web0/api/a/ok');
    expect(res.status).toBe(200);
    expect(res.body).toBe(9_000_001);
  });
});
