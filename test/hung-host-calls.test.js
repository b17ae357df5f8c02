'use strict';
// A host service that never answers (the `automations` runner, `accounts.getAccountByToken`):
// each call ends at scriptTimeoutMs with SCRIPT_TIMEOUT, and once it has, nothing of it stays in
// the worker (the pending host call held the job and its request until a reply that never comes:
// the worker's heap grew with every such call until it died, failing every call it ran).
const request = require('supertest');
const { WorkerPool } = require('..');
const { makeApp } = require('./helpers/app');

/** How many strings `MARK-<n>-` the worker's heap holds (a snapshot collects garbage first). */
async function marksInWorker(pool) {
  const snapshot = await pool.workers[0].worker.getHeapSnapshot();
  const seen = new Set();
  let tail = '';
  for await (const chunk of snapshot) {
    const text = tail + chunk.toString('latin1');
    for (const m of text.matchAll(/MARK-(\d+)-/g)) seen.add(m[1]);
    tail = text.slice(-16);
  }
  return seen.size;
}

const never = () => new Promise(() => {});
/** A thenable that never settles, not a Promise (a query builder's: knex, a mongoose Query). */
const neverThenable = () => ({ then() {} });
const N = 40;

describe.each([
  ['an automations runner', { automation: 'x' }],
  ['an accounts lookup in a script', { script: 's.js', function: 'lookup' }],
])('%s that never answers', (_name, call) => {
  let pool;
  let app;
  let router;
  beforeAll(async () => {
    pool = new WorkerPool({ engine: 'quickjs', size: 1, maxWorkers: 1 });
    ({ app, router } = makeApp({
      apps: {
        a: {
          scripts: { 's.js': 'export function lookup(ctx) { return platform.system.getAccountByToken(ctx.body.slice(0, 8)) }' },
          automations: [{ id: 'x', steps: [{ type: 'return', value: '1' }] }],
          apis: [{ path: 'p', methods: ['POST'], call, returnType: 'JSON' }],
        },
      },
      router: { engine: pool, scriptTimeoutMs: 100, automations: { run: never }, accounts: { getAccountByToken: never } },
    }));
    await router.ready();
  });
  afterAll(async () => {
    await router.close();
    await pool.close({ force: true });
  });

  test('each call ends with SCRIPT_TIMEOUT, and the worker keeps none of their requests', async () => {
    for (let i = 0; i < N; i++) {
      const res = await request(app).post('/web0/api/a/p').set('content-type', 'text/plain').send(`MARK-${i}-${'x'.repeat(2000)}`);
      expect(res.status).toBe(500);
      expect(res.body).toEqual({ requestId: res.headers['x-request-id'], message: 'The script timed out', code: 270200 });
    }
    // (the last call's request may still be referenced as the worker's latest: not one per call)
    expect(await marksInWorker(pool)).toBeLessThanOrEqual(1);
  }, 60_000);
});

test('the automations runner gets a signal that aborts when its call ends (here at scriptTimeoutMs)', async () => {
  const seen = [];
  const runner = {
    run: ({ signal, requestId }) => {
      seen.push({ requestId, signal, abortedAtStart: signal.aborted });
      return new Promise((resolve, reject) => signal.addEventListener('abort', () => reject(signal.reason)));
    },
  };
  const { app, router } = makeApp({
    apps: { a: { automations: [{ id: 'x', steps: [{ type: 'return', value: '1' }] }], apis: [{ path: 'p', call: { automation: 'x' }, returnType: 'JSON' }] } },
    router: { scriptTimeoutMs: 300, automations: runner },
  });
  try {
    const res = await request(app).get('/web0/api/a/p');
    expect(res.body).toMatchObject({ code: 270200 });
    expect(seen).toHaveLength(1);
    expect(seen[0]).toMatchObject({ requestId: res.headers['x-request-id'], abortedAtStart: false });
    if (!seen[0].signal.aborted) await new Promise((r) => seen[0].signal.addEventListener('abort', r));
    expect(seen[0].signal.aborted).toBe(true);
  } finally {
    await router.close();
  }
});

test('a client that leaves does not end its call: the runner\'s signal aborts at the call\'s time limit', async () => {
  const http = require('node:http');
  let started;
  const running = new Promise((resolve) => (started = resolve));
  const runner = {
    run: ({ signal }) => {
      started({ signal, at: Date.now() });
      return new Promise((resolve, reject) => signal.addEventListener('abort', () => reject(signal.reason)));
    },
  };
  let clientLeft;
  const left = new Promise((resolve) => (clientLeft = resolve));
  const { app, router } = makeApp({
    apps: { a: { automations: [{ id: 'x', steps: [{ type: 'return', value: '1' }] }], apis: [{ path: 'p', call: { automation: 'x' }, returnType: 'JSON' }] } },
    router: { scriptTimeoutMs: 3000, automations: runner },
    setup: (a) => a.use((req, res, next) => (res.on('close', clientLeft), next())),
  });
  const server = app.listen(0, '127.0.0.1');
  try {
    await new Promise((resolve) => server.once('listening', resolve));
    const client = http.get(`http://127.0.0.1:${server.address().port}/web0/api/a/p`);
    client.on('error', () => undefined);
    const { signal, at } = await running;
    client.destroy();
    await left;
    expect(signal.aborted).toBe(false);
    await new Promise((resolve) => signal.addEventListener('abort', resolve));
    // (the call went on after its client left: the signal aborted at scriptTimeoutMs, 3000 ms)
    expect(Date.now() - at).toBeGreaterThanOrEqual(2500);
  } finally {
    server.close();
    await router.close();
  }
}, 30_000);

describe.each(['quickjs', 'vm2'])('%s: a blocking-mode script that catches the timeout of its host call', (engine) => {
  // a host call in a callback handed to a built-in cannot become an await: blocking mode
  const SOURCE = `export function lookup(ctx) {
  let caught = 0;
  for (let i = 0; i < 50; i++) {
    try { [i].map((n) => platform.system.getAccountByToken('t' + n)) } catch (e) { caught++ }
  }
  return { caught };
}`;
  let router;
  let app;
  const asked = [];
  beforeAll(async () => {
    ({ app, router } = makeApp({
      apps: { a: { scripts: { 's.js': SOURCE }, apis: [{ path: 'p', call: { script: 's.js', function: 'lookup' }, returnType: 'JSON' }] } },
      router: { engine, workers: 1, scriptTimeoutMs: 300, accounts: { getAccountByToken: (t) => (asked.push(t), never()) } },
    }));
    await router.ready();
  });
  afterAll(() => router.close({ force: true }));

  test('still ends with SCRIPT_TIMEOUT, and makes no host call past its deadline', async () => {
    const res = await request(app).get('/web0/api/a/p');
    expect(res.status).toBe(500);
    expect(res.body).toEqual({ requestId: res.headers['x-request-id'], message: 'The script timed out', code: 270200 });
    expect(asked).toEqual(['t0']);
  }, 30_000);
});

describe.each([
  ['getApi', (r) => ({ ...r, getApi: never })],
  ['getScript', (r) => ({ ...r, getScript: never })],
  ['getAutomation', (r) => ({ ...r, getAutomation: never })],
  ['preview.authorize', (r) => r, { authorize: never }],
  ['getApi, a thenable', (r) => ({ ...r, getApi: neverThenable })],
  ['getScript, a thenable', (r) => ({ ...r, getScript: neverThenable })],
  ['preview.authorize, a thenable', (r) => r, { authorize: neverThenable }],
])('a registry lookup that never answers (%s)', (_name, hang, preview) => {
  const { createApiRouter, MemoryRegistry } = require('..');
  const express = require('express');
  const http = require('node:http');
  function setUp() {
    const mem = new MemoryRegistry({
      apps: {
        a: {
          scripts: { 's.js': 'export function f() { return { ok: true } }' },
          automations: [{ id: 'x', steps: [{ type: 'script', script: 's.js', function: 'f' }] }],
          apis: [{ path: 'p', call: { automation: 'x' }, returnType: 'JSON' }],
        },
      },
    });
    const registry = hang({ getApi: (...a) => mem.getApi(...a), getScript: (...a) => mem.getScript(...a), getAutomation: (...a) => mem.getAutomation(...a) });
    const router = createApiRouter({ registry, workers: 1, preview });
    const app = express();
    app.use('/web0/api', router);
    const server = app.listen(0);
    const url = `http://127.0.0.1:${server.address().port}/web0/api/${preview ? 'preview/' : ''}a/p`;
    /** `{ answer }` once the request has reached the router (its lookup is waiting). */
    const sent = (signal) =>
      new Promise((arrived) => {
        const answer = fetch(url, { signal }).then(async (r) => ({ status: r.status, body: await r.json() }), (e) => e.name);
        setTimeout(() => arrived({ answer }), 300);
      });
    return { router, server, sent };
  }

  test('its request ends when its client leaves: a graceful close() then resolves', async () => {
    const { router, server, sent } = setUp();
    try {
      const ac = new AbortController();
      const { answer } = await sent(ac.signal);
      ac.abort();
      expect(await answer).toBe('AbortError');
      const closed = await Promise.race([router.close().then(() => 'closed'), new Promise((r) => setTimeout(() => r('still waiting'), 5000).unref())]);
      expect(closed).toBe('closed');
    } finally {
      await router.close({ force: true });
      server.closeAllConnections();
      server.close();
    }
  }, 20_000);

  test('close({ force: true }) answers it 503 SHUTTING_DOWN', async () => {
    const { router, server, sent } = setUp();
    try {
      const { answer } = await sent();
      await router.close({ force: true });
      const res = await Promise.race([answer, new Promise((r) => setTimeout(() => r('no answer'), 5000).unref())]);
      expect(res.status).toBe(503);
      expect(res.body.code).toBe(270208);
    } finally {
      server.closeAllConnections();
      server.close();
    }
  }, 20_000);
});
