'use strict';
// QuickJS memory between apps sharing a worker: a memory bomb that waits on the host between its
// allocations (so other apps' calls run on its worker while it holds its memory) ends its own
// call, never another app's call that allocates meanwhile.
const path = require('node:path');
const { execFileSync } = require('node:child_process');
const request = require('supertest');
const { makeApp } = require('./helpers/app');

const MiB = 1024 * 1024;
const OOM = 270201;

/** Account lookups that answer after a few ms: a sync-style call waits on them without a thread. */
const accounts = { getAccountByToken: (token) => new Promise((resolve) => setTimeout(() => resolve({ id: token }), 5)) };

const SCRIPTS = {
  // 1 MiB more kept after each lookup, in the spec's synchronous style
  'bomb.js': `export function fn() {
    const keep = [];
    for (;;) {
      keep.push(new Uint8Array(${MiB}).fill(1));
      platform.system.getAccountByToken('x');
    }
  }`,
  // 6 MiB that live only during the call
  'work.js': `export function fn() {
    const a = new Uint8Array(${6 * MiB}).fill(2);
    return { n: a.length, first: a[0] };
  }`,
};

describe('QuickJS memory between apps on one worker', () => {
  test("a bomb waiting on the host holds the heap's room when another app's call needs it: the bomb fails, the other call runs", () => {
    // (in a child process: jest cannot load the QuickJS module; see the helper for the steps)
    const out = JSON.parse(execFileSync(process.execPath, [path.join(__dirname, 'helpers', 'quickjs-waiting-bomb.js')], { encoding: 'utf8' }));
    expect(out.first.status).toBe('value');
    expect(out.steps).toBeGreaterThan(10); // the bomb took many turns, waiting between them
    // the heap could not grow for the other call without passing one call's room
    expect(out.heapBeforeMb + 12 - 0.2 * out.heapBeforeMb).toBeGreaterThan(out.roomMb);
    expect(out.other).toEqual({ id: 3, status: 'value', hasValue: true, output: { type: 'JSON', json: JSON.stringify({ n: 12 * MiB, first: 2 }) } });
    expect(out.bombEnd).toMatch(/^SCRIPT_OUT_OF_MEMORY: /);
  });

  test('a job that drove less of the heap than the hog threshold is not ended for another call: that call fails as before', () => {
    // the same steps, with a threshold (64 MiB) above the heap growth the bomb drove (about 32 MiB)
    const out = JSON.parse(execFileSync(process.execPath, [path.join(__dirname, 'helpers', 'quickjs-waiting-bomb.js'), '64'], { encoding: 'utf8' }));
    expect(out.steps).toBeGreaterThan(10);
    expect(out.other).toEqual({ error: 'SCRIPT_OUT_OF_MEMORY: The script ran out of memory' });
    expect(out.bombEnd).toBe('still waiting');
  });

  let fixture;
  afterEach(async () => {
    await fixture?.router.close();
    fixture = undefined;
  });

  test("through the router: a bomb that waits on the host between allocations fails with 270201; another app's calls that allocate meanwhile all succeed", async () => {
    fixture = makeApp({
      router: { workers: 1, maxWorkers: 1, scriptMemoryLimitMb: 24, contextBudgetMb: 16, scriptTimeoutMs: 30_000, accounts },
      apps: {
        evil: { scripts: { 'bomb.js': SCRIPTS['bomb.js'] }, apis: [{ path: 'bomb', call: { script: 'bomb.js', function: 'fn' }, returnType: 'JSON' }] },
        good: { scripts: { 'work.js': SCRIPTS['work.js'] }, apis: [{ path: 'work', call: { script: 'work.js', function: 'fn' }, returnType: 'JSON' }] },
      },
    });
    await fixture.router.ready();
    const agent = request(fixture.app);
    // the other app's calls run before the bomb starts, so both contexts are loaded
    await agent.get('/web0/api/good/work').expect(200, { n: 6 * MiB, first: 2 });

    let bombDone = false;
    const bomb = agent.get('/web0/api/evil/bomb').then((res) => {
      bombDone = true;
      return res;
    });
    const answers = [];
    // four streams of the other app's calls for as long as the bomb runs
    const stream = async () => {
      while (!bombDone) answers.push(await agent.get('/web0/api/good/work'));
    };
    await Promise.all([stream(), stream(), stream(), stream()]);
    const res = await bomb;
    expect(res.status).toBe(500);
    expect(res.body.code).toBe(OOM);
    expect(answers.length).toBeGreaterThan(4); // (the bomb took several turns)
    const failed = answers.filter((r) => r.status !== 200).map((r) => r.body);
    expect(failed).toEqual([]);
    for (const r of answers) expect(r.body).toEqual({ n: 6 * MiB, first: 2 });
    // and the router goes on serving (the worker is replaced once its calls end)
    await agent.get('/web0/api/good/work').expect(200, { n: 6 * MiB, first: 2 });
  }, 60_000);
});

describe('vm2: a memory bomb or a runaway ends its worker, charged to its own call', () => {
  let fixture;
  afterEach(() => fixture?.router.close());

  const BOMB = "export function fn() { platform.system.getAccountByToken('x'); const a = []; for (;;) a.push(new Array(100000).fill('x' + a.length)); }";
  const SPIN = "export function fn() { platform.system.getAccountByToken('x'); for (;;); }";
  /** Account lookups answered after `ms`, or (`together`) all at once when `together` of them wait: their replies reach the worker in one message. */
  const lookups = ({ ms, together }) => {
    const waiting = [];
    return {
      getAccountByToken: (token) =>
        new Promise((resolve) => {
          if (ms !== undefined) return void setTimeout(() => resolve({ id: token }), ms);
          waiting.push(() => resolve({ id: token }));
          if (waiting.length === together) for (const answer of waiting.splice(0)) answer();
        }),
    };
  };

  /** App evil's script `evil` and `others` calls of app good, all waiting on the one worker's host lookups; the evil call's response and the others'. */
  async function run(evil, others, router) {
    fixture = makeApp({
      router: { engine: 'vm2', workers: 1, maxWorkers: 1, ...router },
      apps: {
        evil: {
          scripts: { 'evil.js': evil },
          apis: [{ path: 'evil', call: { script: 'evil.js', function: 'fn' }, returnType: 'JSON' }],
        },
        good: {
          scripts: { 'wait.js': "export function fn() { return platform.system.getAccountByToken('g') }" },
          apis: [{ path: 'wait', call: { script: 'wait.js', function: 'fn' }, returnType: 'JSON' }],
        },
      },
    });
    await fixture.router.ready();
    const agent = request(fixture.app);
    const [bad, ...rest] = await Promise.all([agent.get('/web0/api/evil/evil'), ...Array.from({ length: others }, () => agent.get('/web0/api/good/wait'))]);
    expect(bad.status).toBe(500);
    // (ended with the worker, or run to the end: never charged with the evil call's memory or time)
    for (const r of rest) {
      if (r.status === 200) expect(r.body).toEqual({ id: 'g' });
      else expect(r.body.code).toBe(270205);
    }
    return bad;
  }

  test("the bomb's call fails with 270201; another app's calls on that worker are not reported out of memory", async () => {
    // app good's calls wait on the host (1.5 s) on the only worker while app evil's bomb fills its heap
    const bomb = await run(BOMB, 6, { scriptMemoryLimitMb: 16, scriptTimeoutMs: 30_000, accounts: lookups({ ms: 1500 }) });
    expect(bomb.body.code).toBe(OOM);
  }, 60_000);

  test("a bomb resumed in the same turn as the others still fails with 270201, not the call entered after it", async () => {
    // the bomb's loop runs (after its lookup) only once the entries of that message are made
    const bomb = await run(BOMB, 6, { scriptMemoryLimitMb: 16, scriptTimeoutMs: 30_000, accounts: lookups({ together: 7 }) });
    expect(bomb.body.code).toBe(OOM);
  }, 60_000);

  test('a runaway resumed in the same turn as the others fails with 270200, not the call entered after it', async () => {
    const spin = await run(SPIN, 3, { scriptTimeoutMs: 1500, accounts: lookups({ together: 4 }) });
    expect(spin.body.code).toBe(270200);
  }, 60_000);
});

describe('QuickJS memory of many calls waiting at once', () => {
  test('150 calls of one app, each holding 1 MiB while it waits on the host, all succeed on one worker with default limits', async () => {
    // (each call holds its own data up to scriptMemoryLimitMb: before, the calls in flight on a
    // worker shared one call's room, 64 MiB and slack, and about 100 such calls filled it)
    const N = 150;
    const held = [];
    let releaseAll;
    const allWaiting = new Promise((resolve) => (releaseAll = resolve));
    const waiting = {
      async getAccountByToken(token) {
        held.push(token);
        if (held.length === N) releaseAll();
        await allWaiting;
        return { id: token };
      },
    };
    const fixture = makeApp({
      router: { maxWorkers: 1, accounts: waiting },
      apps: {
        app1: {
          scripts: { 'main.js': `export function fn(ctx) { const keep = new Uint8Array(${MiB}).fill(7); const a = platform.system.getAccountByToken(ctx.query.i); return { i: a.id, n: keep.length, last: keep[${MiB - 1}] } }` },
          apis: [{ path: 'p', call: { script: 'main.js', function: 'fn' }, returnType: 'JSON' }],
        },
      },
    });
    try {
      await fixture.router.ready();
      const agent = request(fixture.app);
      const answers = await Promise.all(Array.from({ length: N }, (_, i) => agent.get(`/web0/api/app1/p?i=${i}`)));
      expect(held).toHaveLength(N); // (all waited at once)
      const failed = answers.filter((r) => r.status !== 200).map((r) => `${r.status} ${r.body.code} ${r.body.message}`);
      expect(failed).toEqual([]);
      expect(answers.map((r) => r.body)).toEqual(Array.from({ length: N }, (_, i) => ({ i: String(i), n: MiB, last: 7 })));
    } finally {
      await fixture.router.close();
    }
  }, 60_000);
});

describe('vm2: contexts kept within contextBudgetMb', () => {
  let fixture;
  afterAll(() => fixture?.router.close());

  test("many apps' contexts fill no worker's heap: every call of 400 apps in turn succeeds on one worker", async () => {
    // the contexts a vm2 worker keeps live in its V8 heap: up to half of contextBudgetMb (384 MiB by default)
    // beside one call's room (before, the worker's heap was sized for the call alone, 64 MiB here:
    // it ran out about every 170 apps, failing the calls it was running)
    const apps = {};
    for (let i = 0; i < 400; i++) {
      apps[`t${i}`] = {
        scripts: { 'main.js': `const table = []; for (let i = 0; i < 100; i++) table.push({ i, s: 'x' + i }); export function fn() { return { app: ${i}, n: table.length } }` },
        apis: [{ path: 'p', call: { script: 'main.js', function: 'fn' }, returnType: 'JSON' }],
      };
    }
    fixture = makeApp({ router: { engine: 'vm2', workers: 1, maxWorkers: 1, scriptMemoryLimitMb: 16 }, apps });
    await fixture.router.ready();
    const agent = request(fixture.app);
    const failed = [];
    for (let i = 0; i < 400; i++) {
      const r = await agent.get(`/web0/api/t${i}/p`);
      if (r.status !== 200) failed.push(`t${i}: ${r.status} ${r.body.message}`);
    }
    expect(failed).toEqual([]);
  }, 120_000);
});

describe('a context kept between calls keeps nothing of the call that loaded it', () => {
  let fixture;
  afterAll(() => fixture?.router.close());

  test('250 apps each first called with a 900 KB body all answer on one worker with default limits', async () => {
    // before, each cached context held its first call's job (the request with its body, and the
    // scripts' sources): the worker's heap filled after about 140 such apps and the worker died,
    // failing the call it ran with 270201
    const apps = {};
    for (let i = 0; i < 250; i++) {
      apps[`a${i}`] = {
        scripts: { 'main.js': `export function fn(ctx) { return { app: ${i}, n: ctx.body.length } }` },
        apis: [{ path: 'p', methods: ['POST'], call: { script: 'main.js', function: 'fn' }, returnType: 'JSON' }],
      };
    }
    fixture = makeApp({ router: { workers: 1, maxWorkers: 1 }, apps });
    await fixture.router.ready();
    const agent = request(fixture.app);
    const body = 'b'.repeat(900 * 1024);
    const failed = [];
    for (let i = 0; i < 250; i++) {
      const r = await agent.post(`/web0/api/a${i}/p`).set('Content-Type', 'text/plain').send(body);
      if (r.status !== 200 || r.body.n !== body.length) failed.push(`a${i}: ${r.status} ${r.body.message}`);
    }
    expect(failed).toEqual([]);
  }, 120_000);
});

let fixture;

/**
 * Ten apps with a top-level console line, and app `greedy`, whose call with `?end=1` runs `end`:
 * after its first such call the ten load again; after its next two they do not.
 */
async function endsApart(engine, end, code, router) {
  const lines = [];
  const logger = { info: (m) => lines.push(m), warn: () => {}, error: () => {} };
  const loads = () => lines.filter((l) => /loading t\d+$/.test(l)).length;
  const apps = {
    greedy: {
      scripts: { 'main.js': `export function fn(ctx) { if (ctx.query.end) { ${end} } return { ok: true } }` },
      apis: [{ path: 'p', call: { script: 'main.js', function: 'fn' }, returnType: 'JSON' }],
    },
  };
  for (let i = 0; i < 10; i++) {
    apps[`t${i}`] = {
      scripts: { 'main.js': `console.log('loading t${i}');\nexport function fn() { return { app: ${i} } }` },
      apis: [{ path: 'p', call: { script: 'main.js', function: 'fn' }, returnType: 'JSON' }],
    };
  }
  fixture = makeApp({ router: { engine, workers: 1, logger, ...router }, apps });
  await fixture.router.ready();
  const agent = request(fixture.app);
  const callAll = async () => {
    for (let i = 0; i < 10; i++) await agent.get(`/web0/api/t${i}/p`).expect(200, { app: i });
  };
  await callAll();
  expect(loads()).toBe(10);
  // the first one runs where the others' calls do, and ends that worker with their contexts
  expect((await agent.get('/web0/api/greedy/p?end=1')).body.code).toBe(code);
  await callAll();
  const loaded = loads();
  expect(loaded).toBe(20);
  // the next ones run apart: the other apps' contexts stay where they are
  for (let k = 0; k < 2; k++) expect((await agent.get('/web0/api/greedy/p?end=1')).body.code).toBe(code);
  await agent.get('/web0/api/greedy/p').expect(200, { ok: true });
  await callAll();
  expect(loads()).toBe(loaded);
}

describe.each(['quickjs', 'vm2'])('an app whose call ended its worker, on %s', (engine) => {
  afterEach(async () => {
    await fixture?.router.close();
    fixture = undefined;
  });

  test('by running out of memory: its next calls run on a worker set apart, so its next bombs leave the other apps\' contexts', async () => {
    await endsApart(engine, 'const keep = []; for (;;) keep.push(new Array(100000).fill(1))', OOM, { scriptMemoryLimitMb: 16 });
  }, 60_000);

  test('by running past its deadline where only terminating its worker stops it: the same', async () => {
    // (vm2 cannot stop a script; QuickJS checks its deadline between script steps only, so a loop
    // of one long built-in call a turn is stopped by terminating its worker)
    await endsApart(engine, engine === 'vm2' ? 'for (;;) {}' : 'for (;;) new Array(1e6).fill(1)', 270200, { scriptTimeoutMs: 300 });
  }, 60_000);
});

describe('an app whose call left its QuickJS worker without room for another call', () => {
  afterEach(async () => {
    await fixture?.router.close();
    fixture = undefined;
  });

  test("a call that succeeds but leaves the heap past its cap less one call's limit: the worker is replaced, and that app's next calls run apart", async () => {
    // (a heap of at most 16 + 8 + 32 MiB: 40 MB of bytes leave less than 16 MiB of it)
    await endsApart('quickjs', 'const big = new Uint8Array(40e6); return { length: big.length }', undefined, { scriptMemoryLimitMb: 16, contextBudgetMb: 8 });
  }, 60_000);
});

describe('QuickJS: a text from the host larger than a call can hold', () => {
  // a request body of 40 MiB of bytes that are no UTF-8 (each a U+FFFD: 120 MB as the UTF-8 text
  // that would cross): past the call's 64 MiB, and past what the WebAssembly memory takes
  const script = `export function fn(ctx) {
    try { return { length: ctx.body.length }; } catch (e) { return { name: e.name, message: e.message }; }
  }
  export function small(ctx) { return { length: ctx.body.length }; }`;
  const { app, router } = makeApp({
    apps: { a: { scripts: { 'm.js': script }, apis: [{ path: 'p', methods: ['POST'], call: { script: 'm.js', function: 'fn' }, returnType: 'JSON' }, { path: 's', methods: ['POST'], call: { script: 'm.js', function: 'small' }, returnType: 'JSON' }] } },
    router: { workers: 1, maxWorkers: 1, bodyLimit: '100mb', logger: false },
  });
  afterAll(() => router.close());

  test('fails where the script reads it, with an error it can catch; the app goes on on the same context', async () => {
    const big = await request(app).post('/web0/api/a/p').set('content-type', 'text/plain').send(Buffer.alloc(40 * MiB, 0xc8));
    expect(big.status).toBe(200);
    expect(big.body).toEqual({ name: 'HostError', message: `Host operation stage.body failed: The script ran out of memory (limit 64 MiB): the request body of ${40 * MiB} characters does not fit` });
    const small = await request(app).post('/web0/api/a/s').set('content-type', 'text/plain').send('hello');
    expect(small.body).toEqual({ length: 5 });
  }, 60_000);
});
