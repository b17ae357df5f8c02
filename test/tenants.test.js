'use strict';
// Many apps on one worker: their contexts share the worker's QuickJS runtime, stay cached within
// contextBudgetMb (not a count) and stay apart from each other.
const request = require('supertest');
const { makeApp } = require('./helpers/app');

const APPS = 300;

/** `APPS` apps, each with a module-level counter and a global it writes. */
function tenants(routerOpts) {
  const apps = {};
  for (let n = 0; n < APPS; n++) {
    apps[`t${n}`] = {
      scripts: {
        'main.js': `let calls = 0;
          export function fn(ctx) {
            calls++;
            const seen = typeof globalThis.owner === 'string' ? globalThis.owner : null;
            globalThis.owner = 't${n}';
            Object.prototype.polluted = 't${n}';
            return { app: 't${n}', calls, seen };
          }`,
      },
      apis: [{ path: 'p', call: { script: 'main.js', function: 'fn' }, returnType: 'JSON' }],
    };
  }
  return makeApp({ apps, router: { workers: 1, ...routerOpts } });
}

async function callAll(app, round) {
  for (let n = 0; n < APPS; n++) {
    const res = await request(app).get(`/web0/api/t${n}/p`).expect(200);
    expect(res.body).toEqual({ app: `t${n}`, calls: round, seen: round === 1 ? null : `t${n}` });
  }
}

describe('many apps on one QuickJS worker', () => {
  let fixture;
  afterEach(async () => {
    await fixture?.router.close();
    fixture = undefined;
  });

  test('with the default budget, 300 apps called in rotation keep their contexts, each its own realm', async () => {
    fixture = tenants({});
    await callAll(fixture.app, 1);
    // the second round finds every module as the first left it: no context was dropped, and no
    // app saw another's global or prototype change
    await callAll(fixture.app, 2);
  }, 120_000);

  test('a small budget drops the less recently used contexts: their modules start again', async () => {
    fixture = tenants({ contextBudgetMb: 8 });
    for (let n = 0; n < APPS; n++) await request(fixture.app).get(`/web0/api/t${n}/p`).expect(200);
    const first = await request(fixture.app).get('/web0/api/t0/p').expect(200);
    expect(first.body).toEqual({ app: 't0', calls: 1, seen: null });
    const last = await request(fixture.app).get(`/web0/api/t${APPS - 1}/p`).expect(200);
    expect(last.body).toEqual({ app: `t${APPS - 1}`, calls: 2, seen: `t${APPS - 1}` });
  }, 120_000);

  test('the contexts dropped are among the less recently used: an app called all along keeps its module', async () => {
    fixture = tenants({ contextBudgetMb: 8 });
    let t0 = 0;
    for (let n = 1; n < APPS; n++) {
      await request(fixture.app).get(`/web0/api/t${n}/p`).expect(200);
      if (n % 10 === 0) {
        const res = await request(fixture.app).get('/web0/api/t0/p').expect(200);
        t0++;
        expect(res.body).toEqual({ app: 't0', calls: t0, seen: t0 === 1 ? null : 't0' });
      }
    }
  }, 120_000);

  test('a rotation over a few more apps than the budget holds still finds most of their contexts', async () => {
    // 8 MiB holds 28 of these contexts. Called in turn, 32 apps would find no context under plain
    // LRU: the one it drops each time is the one the rotation calls next
    const apps = 32;
    fixture = tenants({ contextBudgetMb: 8 });
    const found = [];
    for (let round = 0; round < 4; round++) {
      let kept = 0;
      for (let n = 0; n < apps; n++) {
        const res = await request(fixture.app).get(`/web0/api/t${n}/p`).expect(200);
        expect(res.body.app).toBe(`t${n}`);
        if (res.body.calls > 1) kept++;
      }
      found.push(kept);
    }
    expect(found[0]).toBe(0);
    // (about 17 a round: each drop is a random one of the older half; and fewer than all: the
    // rotation is past the budget)
    expect(found[1] + found[2] + found[3]).toBeGreaterThanOrEqual(32);
    expect(found[1] + found[2] + found[3]).toBeLessThan(3 * apps);
  }, 120_000);

  test('a script larger than the whole budget still runs (its context is dropped once idle)', async () => {
    const big = `// ${'x'.repeat(2_200_000)}\nexport function fn() { return { big: true } }`;
    fixture = makeApp({
      apps: { big: { scripts: { 'main.js': big }, apis: [{ path: 'p', call: { script: 'main.js', function: 'fn' }, returnType: 'JSON' }] } },
      router: { workers: 1, contextBudgetMb: 8, scriptSizeLimit: '4mb' },
    });
    await request(fixture.app).get('/web0/api/big/p').expect(200, { big: true });
    await request(fixture.app).get('/web0/api/big/p').expect(200, { big: true });
  }, 60_000);
});

test('sources a worker keeps are bounded in size: one dropped is sent again with its next call', async () => {
  // 10 apps of 2 MB scripts: more than the 16 Mi characters of sources a worker keeps
  const apps = {};
  for (let n = 0; n < 10; n++) {
    apps[`b${n}`] = {
      scripts: { 'main.js': `// ${String(n).repeat(2_000_000)}\nexport function fn() { return { app: ${n} } }` },
      apis: [{ path: 'p', call: { script: 'main.js', function: 'fn' }, returnType: 'JSON' }],
    };
  }
  const fixture = makeApp({ apps, router: { workers: 1, contextBudgetMb: 8, scriptSizeLimit: '4mb' } });
  try {
    for (const round of [0, 1]) for (let n = 0; n < 10; n++) await request(fixture.app).get(`/web0/api/b${n}/p`).expect(200, { app: n }, `round ${round}`);
  } finally {
    await fixture.router.close();
  }
}, 120_000);

test('HeldSources: at most SOURCE_SLOTS sources and SOURCE_CHARS characters, the oldest dropped first; one larger than all is kept alone', () => {
  const { HeldSources, SOURCE_CHARS, SOURCE_SLOTS } = require('../dist/cjs/runtime/messages.js');
  const held = new HeldSources();
  held.add('a', SOURCE_CHARS / 2, 'A');
  held.add('b', SOURCE_CHARS / 2, 'B');
  held.add('a', 10, 'again'); // (held already: kept as it was)
  expect([held.get('a'), held.get('b')]).toEqual(['A', 'B']);
  held.add('c', 1, 'C');
  expect([held.has('a'), held.has('b'), held.has('c')]).toEqual([false, true, true]);
  held.add('huge', SOURCE_CHARS * 2, 'H');
  expect([held.has('b'), held.has('c'), held.get('huge')]).toEqual([false, false, 'H']);
  const many = new HeldSources();
  for (let i = 0; i <= SOURCE_SLOTS; i++) many.add(String(i), 1, i);
  expect([many.has('0'), many.has('1'), many.has(String(SOURCE_SLOTS))]).toEqual([false, true, true]);
});

test.each([[4], [2048], ['64'], [12.5]])('createApiRouter({ contextBudgetMb: %j }) is refused, naming the field', (contextBudgetMb) => {
  const { createApiRouter, MemoryRegistry } = require('..');
  expect(() => createApiRouter({ registry: new MemoryRegistry(), contextBudgetMb })).toThrow(/invalid contextBudgetMb: must be/);
});

test.each(['vm2', 'quickjs'])('%s: calls arriving together for more contexts than the budget holds all run (a context loaded for a call is not dropped before it starts there)', async (engine) => {
  // 41 scripts, new versions each round, called all at once on one worker whose budget keeps a
  // few contexts: before, a context loaded for a call could be dropped (to make room for the next
  // one loading) twice before its call started in it; the call then went into the dropped
  // context and, on vm2, waited there until its time limit (270200 after scriptTimeoutMs)
  const registry = new (require('..').MemoryRegistry)();
  const put = (round) => {
    for (let n = 0; n <= 40; n++) registry.putScript('a', `s${n}.js`, `const round = ${round}; export function fn() { return { n: ${n}, round } }`);
  };
  put(0);
  for (let n = 0; n <= 40; n++) registry.putApi('a', { path: `p${n}`, call: { script: `s${n}.js`, function: 'fn' }, returnType: 'JSON' });
  const fixture = makeApp({ registry, router: { engine, workers: 1, maxWorkers: 1, contextBudgetMb: 8, scriptTimeoutMs: 20_000 } });
  const server = fixture.app.listen(0);
  try {
    await fixture.router.ready();
    const agent = request(server);
    for (const round of [0, 1]) {
      put(round);
      const calls = [];
      for (let i = 0; i < 10; i++) calls.push(agent.get('/web0/api/a/p0'));
      for (let n = 1; n <= 40; n++) calls.push(agent.get(`/web0/api/a/p${n}`));
      const failed = (await Promise.all(calls)).filter((r) => r.status !== 200 || r.body.round !== round).map((r) => `${r.status} ${JSON.stringify(r.body)}`);
      expect(failed).toEqual([]);
    }
  } finally {
    await fixture.router.close();
    server.close();
  }
}, 120_000);
