'use strict';
// docs/script-engine.md, "Writing an engine": the InlineEngine it shows runs as written behind the
// real router, host calls included.
const fs = require('node:fs');
const path = require('node:path');
const express = require('express');
const request = require('supertest');
const { createApiRouter, MemoryRegistry } = require('scriptable-api');

const doc = fs.readFileSync(path.join(__dirname, '..', 'docs', 'script-engine.md'), 'utf8');
const sketch = doc.split("An engine that runs jobs in the router's own thread")[1].split('```js\n')[1].split('\n```')[0];

/** The router the sketch builds, over `registry` (the sketch's own last line). */
function sketchRouter(registry) {
  // eslint-disable-next-line no-new-func
  return new Function('require', 'createApiRouter', 'registry', `${sketch}\nreturn router;`)(require, createApiRouter, registry);
}

const routers = [];
afterAll(() => Promise.all(routers.map((r) => r.close())));

function app(registry) {
  const router = sketchRouter(registry);
  routers.push(router);
  return express().use('/web0/api', router);
}

test('the InlineEngine sketch answers a call, reading the query and headers it passes', async () => {
  const registry = new MemoryRegistry();
  registry.putScript('shop', 'hello.js', "export function hello(ctx) { return { hello: ctx.query.name, agent: ctx.headers['x-agent'] }; }");
  registry.putApi('shop', { path: 'hello', call: { script: 'hello.js', function: 'hello' }, returnType: 'JSON' });
  const res = await request(app(registry)).get('/web0/api/shop/hello?name=Ada').set('X-Agent', 'test');
  expect(res.status).toBe(200);
  expect(res.body).toEqual({ hello: 'Ada', agent: 'test' });
});

test('the sketch reaches the host: an async script awaits platform.system.getAccountByToken', async () => {
  const registry = new MemoryRegistry();
  registry.putScript(
    'shop',
    'me.js',
    'export async function me(ctx) { const account = await platform.system.getAccountByToken(ctx.query.token); return { account }; }',
  );
  registry.putApi('shop', { path: 'me', call: { script: 'me.js', function: 'me' }, returnType: 'JSON' });
  // the sketch's router has no accounts service: the host answers null, as without one
  const res = await request(app(registry)).get('/web0/api/shop/me?token=t');
  expect(res.status).toBe(200);
  expect(res.body).toEqual({ account: null });
});

test('what the sketch does not run answers its error outcome', async () => {
  const registry = new MemoryRegistry();
  registry.putScript('shop', 'a.js', 'export function f(ctx) { return 1; }');
  registry.putApi('shop', { path: 'hooked', call: { script: 'a.js', function: 'f' }, before: { script: 'a.js', function: 'f' }, returnType: 'JSON' });
  registry.putApi('shop', { path: 'missing', call: { script: 'nope.js', function: 'f' }, returnType: 'JSON' });
  const a = app(registry);
  const hooked = await request(a).get('/web0/api/shop/hooked');
  expect(hooked.status).toBe(500);
  expect(hooked.body).toMatchObject({ code: 270205, message: 'hooks are not supported here' });
  const missing = await request(a).get('/web0/api/shop/missing');
  expect(missing.status).toBe(500);
  expect(missing.body).toMatchObject({ code: 270202 });
});

test("with an engine of one's own, the options of the built-in engine (workers, scriptMemoryLimitMb...) are refused at startup, naming them (they did nothing)", () => {
  const { ConfigError } = require('scriptable-api');
  const engine = { name: 'x', run: async () => ({}), close: async () => {} };
  for (const [field, value] of [['workers', 4], ['maxWorkers', 8], ['scriptMemoryLimitMb', 128], ['contextBudgetMb', 64], ['maxConcurrentPerApp', 10], ['maxWorkersPerApp', 2], ['queueTimeoutMs', 1000]]) {
    let error;
    try {
      createApiRouter({ registry: new MemoryRegistry(), engine, logger: false, [field]: value });
    } catch (e) {
      error = e;
    }
    expect(error).toBeInstanceOf(ConfigError);
    expect(error.field).toBe(field);
    expect(error.message).toMatch(/new WorkerPool/);
  }
  // (the options the router itself applies stay: the time limit of a call, the rest)
  routers.push(createApiRouter({ registry: new MemoryRegistry(), engine, logger: false, scriptTimeoutMs: 1000, bodyLimit: '2mb' }));
});

test("an engine whose optional ready or stats is not a function is refused at startup, naming it (not at router.ready() or the first scrape)", () => {
  const { ConfigError } = require('scriptable-api');
  const base = { name: 'x', run: async () => ({}), close: async () => {} };
  for (const [extra, field] of [[{ ready: true }, 'engine.ready'], [{ stats: { workers: 1 } }, 'engine.stats']]) {
    let error;
    try {
      createApiRouter({ registry: new MemoryRegistry(), engine: { ...base, ...extra }, logger: false });
    } catch (e) {
      error = e;
    }
    expect(error).toBeInstanceOf(ConfigError);
    expect(error.field).toBe(field);
  }
  const router = createApiRouter({ registry: new MemoryRegistry(), engine: { ...base, ready: async () => {}, stats: () => ({ workers: 1, busy: 0, queued: 0 }) }, logger: false });
  routers.push(router);
});

/**
 * A router whose engine answers every job with the outcome last given to `set` (after calling
 * `beforeAnswer`); `errors` holds the error lines logged since the last `set`. `middleware` runs
 * before the router.
 */
function outcomeRouter({ beforeAnswer, middleware } = {}) {
  const registry = new MemoryRegistry();
  registry.putScript('shop', 'a.js', 'export function f(ctx) { return 1; }');
  registry.putApi('shop', { path: 'p', call: { script: 'a.js', function: 'f' }, returnType: 'JSON' });
  const errors = [];
  const logger = { info() {}, warn() {}, error: (m) => errors.push(String(m)) };
  let outcome;
  const engine = {
    name: 'mine',
    run: async (job) => {
      beforeAnswer?.();
      return { state: job.state, outcome };
    },
    close: async () => {},
  };
  const router = createApiRouter({ registry, engine, logger });
  routers.push(router);
  const set = (o) => {
    outcome = o;
    errors.length = 0;
  };
  const a = express();
  if (middleware) a.use(middleware);
  return { a: a.use('/web0/api', router), errors, set };
}

test("a result of an outcome kind or output type the router does not know answers 500 HOST_ERROR, logged (the request was left unanswered)", async () => {
  const { a, errors, set } = outcomeRouter();
  const cases = [
    [{ kind: 'ouput', output: { type: 'JSON', json: '1' } }, 'engine mine returned an outcome of kind "ouput", not continue, written, output or error'],
    [{ kind: 'output', output: { type: 'json', json: '1' } }, 'the engine returned an output of type "json", not JSON, Text, Redirect, File or invalid'],
  ];
  for (const [given, logged] of cases) {
    set(given);
    const res = await request(a).get('/web0/api/shop/p').timeout(10000);
    expect(res.status).toBe(500);
    expect(res.body).toMatchObject({ code: 270602, message: 'A host service failed' });
    expect(errors.join('\n')).toContain(logged);
  }
  // the kinds it knows still answer
  set({ kind: 'output', output: { type: 'JSON', json: '{"ok":1}' } });
  await request(a).get('/web0/api/shop/p').expect(200, { ok: 1 });
});

test('an error outcome with a status that is no error status (101, 200, 302, 204), a code that is no integer or a message that is no text answers 500 HOST_ERROR, logged', async () => {
  const { a, errors, set } = outcomeRouter();
  const cases = [
    [{ status: 101 }, 'engine mine returned an error outcome whose status is 101, not an error status (400 to 599)'],
    [{ status: 200 }, 'status is 200'],
    [{ status: 302 }, 'status is 302'],
    [{ status: 204 }, 'status is 204'],
    [{ status: undefined }, 'status is undefined'],
    [{ code: 'abc' }, 'engine mine returned an error outcome whose code is "abc", not an integer'],
    [{ code: 1.5 }, 'code is 1.5'],
    [{ message: 5 }, 'engine mine returned an error outcome whose message is 5, not a string'],
  ];
  for (const [given, logged] of cases) {
    set({ kind: 'error', message: 'm', code: 270000, status: 500, ...given });
    const res = await request(a).get('/web0/api/shop/p').timeout(10000);
    expect(res.status).toBe(500);
    expect(res.body).toEqual({ requestId: res.headers['x-request-id'], message: 'A host service failed', code: 270602 });
    expect(errors.join('\n')).toContain(logged);
  }
  // an error outcome that fits is the error body, with its own status and code
  set({ kind: 'error', message: 'go away', code: 4001, status: 418 });
  const res = await request(a).get('/web0/api/shop/p').timeout(10000);
  expect(res.status).toBe(418);
  expect(res.body).toEqual({ requestId: res.headers['x-request-id'], message: 'go away', code: 4001 });
});

test("an error outcome's detail.cause goes to the failure log only: the client gets the outcome's message", async () => {
  const { a, errors, set } = outcomeRouter();
  const cause = 'RuntimeError: Aborted(Assertion failed: /opt/engine/src/vm.c, line 210)';
  set({ kind: 'error', message: 'The script engine failed', code: 270205, status: 500, detail: { stage: 'call', script: 'a.js', cause } });
  const res = await request(a).get('/web0/api/shop/p').timeout(10000);
  expect(res.status).toBe(500);
  expect(res.body).toEqual({ requestId: res.headers['x-request-id'], message: 'The script engine failed', code: 270205 });
  expect(res.text).not.toContain('/opt/engine');
  expect(errors).toHaveLength(1);
  expect(errors[0]).toContain(`270205 The script engine failed (${cause})`);
});

test("a result that arrives after the request's connection was destroyed, before the response heard of it, is not written: the response closes unanswered (no status in the log), and an error outcome is still logged", async () => {
  let current;
  let closed;
  const { a, errors, set } = outcomeRouter({
    // (as a server's closeAllConnections() at shutdown does: the socket is destroyed, its 'close' comes a turn later)
    beforeAnswer: () => current.socket.destroy(),
    middleware: (req, res, next) => {
      current = res;
      closed = new Promise((resolve) => res.once('close', () => resolve({ headersSent: res.headersSent, status: res.statusCode })));
      next();
    },
  });
  const server = a.listen(0, '127.0.0.1');
  await new Promise((r) => server.once('listening', r));
  try {
    for (const given of [
      { kind: 'error', message: 'Server is shutting down', code: 270601, status: 503 },
      { kind: 'output', output: { type: 'JSON', json: '{"ok":1}' } },
    ]) {
      set(given);
      const sent = request(server).get('/web0/api/shop/p').then(() => 'answered', (e) => e.code);
      expect(await sent).toBe('ECONNRESET');
      expect(await closed).toEqual({ headersSent: false, status: 200 });
      if (given.kind === 'error') expect(errors.join('\n')).toContain('Server is shutting down');
    }
  } finally {
    await new Promise((r) => server.close(r));
  }
});
