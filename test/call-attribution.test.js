'use strict';
// Calls of one app interleave on a context while they wait on the host. When two calls wait on
// one promise of the module (a lookup the first call started and the second reuses) and it
// settles, both resume in the same run of promise jobs: each must still act for its own request,
// in what its platform helpers do, what its console lines name, and what its request and response
// methods read and write, also called detached from their objects.
const http = require('node:http');
const { makeApp } = require('./helpers/app');

/**
 * The accounts service: `shared` answers once the test releases it; every lookup is recorded with
 * the request it was made for.
 */
function accounts() {
  const seen = [];
  let release;
  const released = new Promise((resolve) => (release = resolve));
  return {
    seen,
    release: (outcome) => release(outcome),
    service: {
      async getAccountByToken(token, { requestId }) {
        seen.push([token, requestId]);
        if (token !== 'shared') return { id: token };
        const outcome = await released;
        if (outcome === 'fail') throw new Error('the directory is down');
        return { id: 'config' };
      },
    },
  };
}

/**
 * The module: the first call starts the shared lookup, every call logs `waiting <who>` (the test
 * releases the lookup once both are waiting) and then waits on it in the way `wait` says; what it
 * does after is in `after`.
 */
const script = (wait, after) => `
var shared = null;
async function load() { return platform.system.getAccountByToken('shared'); }
export async function fn(ctx) {
  const who = ctx.query.who;
  const { getHeader } = ctx.request;
  const { setHeader } = ctx.response;
  if (shared === null) shared = load();
  console.log('waiting ' + who);
  ${wait}
}
function after(ctx, who, getHeader, setHeader, failed) {
  ${after}
}`;

/**
 * What a call does once the shared lookup settled: reads its own header, sets it on its own
 * response, logs, aborts (bob) and, after an await, makes one more lookup (a callback handed to
 * `then` makes none: a host call there would run the script in blocking mode).
 */
const acts = (way) => `
  const auth = getHeader('authorization');
  setHeader('X-Seen', auth);
  console.log('resumed ' + who);
  if (who === 'bob') platform.app.abort('bob may not', 403);
  return { who, auth, failed, account: ${way === 'await' ? "platform.system.getAccountByToken('after-' + who).id" : "'after-' + who"} };`;

const WAYS = {
  await: `try { await shared; } catch (e) { return after(ctx, who, getHeader, setHeader, true); }
  return after(ctx, who, getHeader, setHeader, false);`,
  then: `return shared.then(() => after(ctx, who, getHeader, setHeader, false), () => after(ctx, who, getHeader, setHeader, true));`,
};

/** A logger keeping the console lines (without the script's tag) with their request ids; `waiting` settles once two calls logged `waiting ...`. */
function consoleLines() {
  const lines = [];
  let bothWaiting;
  const waiting = new Promise((resolve) => (bothWaiting = resolve));
  const logger = {
    info: (m, meta) => {
      lines.push([m.replace(/^\[app1\/main\.js\] /, ''), meta.requestId]);
      if (lines.filter(([l]) => l.startsWith('waiting')).length === 2) bothWaiting();
    },
    warn() {},
    error() {},
    debug() {},
  };
  return { lines, waiting, logger };
}

/** Alice's and Bob's calls, the shared lookup answered (`outcome`) once both wait on it. */
async function aliceAndBob(server, waiting, acc, outcome) {
  const calls = [get(server, 'alice'), get(server, 'bob')];
  await waiting;
  acc.release(outcome);
  return Promise.all(calls);
}

function get(server, who) {
  return new Promise((resolve, reject) => {
    http
      .get({ host: '127.0.0.1', port: server.address().port, path: `/web0/api/app1/p?who=${who}`, headers: { authorization: `Bearer ${who}-secret` } }, (res) => {
        let body = '';
        res.on('data', (c) => (body += c));
        res.on('end', () => resolve({ status: res.statusCode, headers: res.headers, body: JSON.parse(body) }));
      })
      .on('error', reject);
  });
}

const CASES = [
  ['quickjs', 'await', 'ok'],
  ['quickjs', 'await', 'fail'],
  ['quickjs', 'then', 'ok'],
  ['quickjs', 'then', 'fail'],
  ['vm2', 'await', 'ok'],
  ['vm2', 'await', 'fail'],
];

test.each(CASES)('%s: two calls resumed together by one promise (%s, lookup %s) each act for their own request', async (engine, way, outcome) => {
  const acc = accounts();
  const { lines, waiting, logger } = consoleLines();
  const { app, router } = makeApp({
    router: { engine, logger, accounts: acc.service },
    apps: { app1: { scripts: { 'main.js': script(WAYS[way], acts(way)) }, apis: [{ path: 'p', call: { script: 'main.js', function: 'fn' }, returnType: 'JSON' }] } },
  });
  const server = http.createServer(app).listen(0, '127.0.0.1');
  try {
    await new Promise((resolve) => server.once('listening', resolve));
    const [a, b] = await aliceAndBob(server, waiting, acc, outcome);
    const ids = { alice: a.headers['x-request-id'], bob: b.headers['x-request-id'] };

    expect([a.status, a.body]).toEqual([200, { who: 'alice', auth: 'Bearer alice-secret', failed: outcome === 'fail', account: 'after-alice' }]);
    expect(a.headers['x-seen']).toBe('Bearer alice-secret');
    // bob's abort ends bob's call, and only his; his header went on his own response
    expect([b.status, b.body.message, b.body.requestId]).toEqual([403, 'bob may not', ids.bob]);
    expect(a.headers['x-seen']).not.toBe('Bearer bob-secret');
    // each lookup and console line is the request's that made it
    expect(acc.seen.filter(([t]) => t !== 'shared')).toEqual(way === 'await' ? [['after-alice', ids.alice]] : []);
    expect(lines.filter(([l]) => l.startsWith('resumed')).sort()).toEqual([
      ['resumed alice', ids.alice],
      ['resumed bob', ids.bob],
    ]);
  } finally {
    server.close();
    await router.close();
  }
});

// (vm2 keeps Promise.prototype frozen: there a callback acts for the call whose code ran last)
test.each(['quickjs'])('%s: code of a call that resumes after its call ended acts for no other call', async (engine) => {
  // alice's call ends with a callback of hers still waiting on a promise of the module; bob's
  // call settles that promise and waits a little: her callback runs during his call, and the
  // abort it makes (and catches) is hers, not his
  const { app, router } = makeApp({
    router: { engine, logger: false },
    apps: {
      app1: {
        scripts: {
          'main.js': `
var settle = null, late = 'not run';
export async function fn(ctx) {
  if (ctx.query.who === 'alice') {
    new Promise((resolve) => (settle = resolve)).then(() => {
      try { platform.app.abort('from alice, too late'); } catch (e) { late = e.name + ': ' + e.message; }
    });
    return { who: 'alice' };
  }
  settle();
  for (let i = 0; i < 5; i++) await null;
  return { who: 'bob', late };
}`,
        },
        apis: [{ path: 'p', call: { script: 'main.js', function: 'fn' }, returnType: 'JSON' }],
      },
    },
  });
  const server = http.createServer(app).listen(0, '127.0.0.1');
  try {
    await new Promise((resolve) => server.once('listening', resolve));
    expect((await get(server, 'alice')).body).toEqual({ who: 'alice' });
    const b = await get(server, 'bob');
    expect([b.status, b.body]).toEqual([200, { who: 'bob', late: 'AbortError: from alice, too late' }]);
  } finally {
    server.close();
    await router.close();
  }
});

test.each(['quickjs', 'vm2'])('%s: what each await is wrapped with is not on the global object, cannot be replaced, and a forged call acts for none', async (engine) => {
  const { app, router } = makeApp({
    router: { engine, logger: false, accounts: { getAccountByToken: (t) => ({ id: t }) } },
    apps: {
      app1: {
        scripts: {
          // (naming them, the script runs unchanged in blocking mode; the context has them all the same)
          'main.js': `export function fn(ctx) {
  const names = Object.getOwnPropertyNames(globalThis).filter((n) => /^__/.test(n));
  const kind = typeof __resume;
  let replaced = 'replaced';
  try { __resume = null; } catch (e) { replaced = e.name; }
  const before = platform.system.getAccountByToken('before').id;
  __resume({ forged: true }, 1);
  let after;
  try { after = platform.system.getAccountByToken('after').id; } catch (e) { after = e.name + ': ' + e.message; }
  return { names, kind, replaced, before, after, who: ctx.request.getHeader('authorization') };
}`,
        },
        apis: [{ path: 'p', call: { script: 'main.js', function: 'fn' }, returnType: 'JSON' }],
      },
    },
  });
  const server = http.createServer(app).listen(0, '127.0.0.1');
  try {
    await new Promise((resolve) => server.once('listening', resolve));
    const r = await get(server, 'carol');
    expect([r.status, r.body]).toEqual([
      200,
      { names: [], kind: 'function', replaced: 'TypeError', before: 'before', after: 'IllegalStateException: platform is used outside of a call', who: 'Bearer carol-secret' },
    ]);
  } finally {
    server.close();
    await router.close();
  }
});

test('quickjs: an async generator resumed by a queued next() acts for the call that ran it', async () => {
  // alice steps a generator with two next() calls at once: the second resumes it after the
  // yield from a promise job, run while bob's call (resumed by the same lookup) was the last to act
  const acc = accounts();
  const { lines, waiting, logger } = consoleLines();
  const { app, router } = makeApp({
    router: { engine: 'quickjs', logger, accounts: acc.service },
    apps: {
      app1: {
        scripts: {
          'main.js': `
var shared = null;
async function load() { return platform.system.getAccountByToken('shared'); }
async function* steps(setHeader, who) { await shared; yield 1; setHeader('X-Gen', who); console.log('after yield ' + who); }
export async function fn(ctx) {
  const who = ctx.query.who;
  if (shared === null) shared = load();
  console.log('waiting ' + who);
  if (who === 'alice') {
    const it = steps(ctx.response.setHeader, who);
    const first = it.next();
    await it.next();
    await first;
    return who;
  }
  for (let i = 0; i < 6; i++) await (i === 0 ? shared : null);
  return who;
}`,
        },
        apis: [{ path: 'p', call: { script: 'main.js', function: 'fn' }, returnType: 'JSON' }],
      },
    },
  });
  const server = http.createServer(app).listen(0, '127.0.0.1');
  try {
    await new Promise((resolve) => server.once('listening', resolve));
    const [a, b] = await aliceAndBob(server, waiting, acc, 'ok');
    expect([a.body, a.headers['x-gen']]).toEqual(['alice', 'alice']);
    expect([b.body, b.headers['x-gen']]).toEqual(['bob', undefined]);
    expect(lines.filter(([l]) => l.startsWith('after yield'))).toEqual([['after yield alice', a.headers['x-request-id']]]);
  } finally {
    server.close();
    await router.close();
  }
});
