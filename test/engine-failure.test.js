'use strict';
// A worker that ends under the calls of several apps: what each app's client and failure line
// get. One app's error text (or the host's: Node's heap message, a file path) never reaches the
// calls of another app that ran on the same worker; the pool logs why the worker ended, once.
const http = require('node:http');
const request = require('supertest');
const { makeApp } = require('./helpers/app');

const ENGINE_FAILURE = 270205;

/** A logger keeping its lines: [level, message, meta]. */
function keeper() {
  const lines = [];
  const at = (level) => (message, meta) => lines.push([level, message, meta]);
  return { lines, logger: { info: at('info'), warn: at('warn'), error: at('error'), debug: at('debug') } };
}

/** An upstream that tells when a request arrives, and answers when told to. */
function upstream() {
  const held = [];
  let arrived;
  const arrival = new Promise((r) => (arrived = r));
  const server = http.createServer((req, res) => {
    held.push(res);
    arrived();
  });
  return {
    arrival,
    release: () => held.splice(0).forEach((res) => res.end('ok')),
    listen: () => new Promise((r) => server.listen(0, '127.0.0.1', () => r(`http://127.0.0.1:${server.address().port}/`))),
    close: () => {
      server.closeAllConnections();
      return new Promise((r) => server.close(r));
    },
  };
}

/**
 * App `victim` waits on an outbound request on the router's only worker while app `culprit` runs
 * `culpritSource` on the same worker; resolves to both answers and the log.
 */
async function sideBySide(culpritSource, routerOpts = {}) {
  const up = upstream();
  const url = await up.listen();
  const { lines, logger } = keeper();
  const { app, router } = makeApp({
    apps: {
      culprit: { scripts: { 'c.js': culpritSource }, apis: [{ path: 'p', call: { script: 'c.js', function: 'fn' }, returnType: 'JSON' }] },
      victim: {
        scripts: { 'v.js': 'export async function fn(ctx) { const r = await platform.http.request(ctx.query.u); return { victim: r.status } }' },
        apis: [{ path: 'p', call: { script: 'v.js', function: 'fn' }, returnType: 'JSON' }],
      },
    },
    router: { workers: 1, maxWorkers: 1, logger, outbound: { allowPrivateNetworks: true }, ...routerOpts },
  });
  try {
    await router.ready();
    const victim = request(app).get(`/web0/api/victim/p?u=${encodeURIComponent(url)}`).then((r) => r);
    await up.arrival; // (the victim's call is in flight on the worker)
    const culprit = await request(app).get('/web0/api/culprit/p');
    up.release();
    return { culprit, victim: await victim, lines };
  } finally {
    await router.close();
    await up.close();
  }
}

/** The failure lines logged for app `appId`'s requests. */
const linesOf = (lines, appId) => lines.filter(([, , meta]) => meta?.appId === appId);

describe.each(['quickjs', 'vm2'])('a rejection no script handles, on the %s engine', (engine) => {
  // (an async function's rejection that nothing handles ends a Node.js thread by default)
  test.each([
    ['an async function not awaited', "export function fn() { (async () => { throw new Error('culprit secret: db password hunter2') })(); return { culprit: 1 } }"],
    ['a promise rejected and dropped', "export function fn() { Promise.reject(new Error('culprit secret: db password hunter2')); return { culprit: 1 } }"],
  ])("%s ends neither its own call nor another app's on the same worker, and its text is nowhere", async (_name, culpritSource) => {
    const { culprit, victim, lines } = await sideBySide(culpritSource, { engine });
    expect(culprit.body).toEqual({ culprit: 1 });
    expect(victim.body).toEqual({ victim: 200 });
    for (const [, message, meta] of lines) expect(`${message} ${JSON.stringify(meta)}`).not.toContain('culprit secret');
  }, 30_000);
});

describe('a vm2 worker that ends under calls of two apps', () => {
  test("one app's memory bomb: the other app's call fails 270205 with the table's message, not Node's reason (the pool logs that)", async () => {
    const bomb = 'export function fn() { const keep = []; for (let i = 0; ; i++) keep.push(new Array(1e5).fill(i)) }';
    const { culprit, victim, lines } = await sideBySide(bomb, { engine: 'vm2', scriptMemoryLimitMb: 32, scriptTimeoutMs: 20_000 });
    expect(culprit.body.code).toBe(270201);
    expect(victim.status).toBe(500);
    expect(victim.body).toEqual({ requestId: victim.headers['x-request-id'], message: 'The script engine failed', code: ENGINE_FAILURE });
    for (const [, message, meta] of linesOf(lines, 'victim')) expect(`${message} ${JSON.stringify(meta)}`).not.toMatch(/memory limit|heap/);
    const ended = lines.filter(([level, message]) => level === 'error' && message.startsWith('scriptable-api: a script worker ended:'));
    expect(ended).toHaveLength(1);
    expect(ended[0][1]).toMatch(/memory limit/);
  }, 60_000);
});
