'use strict';
// The host's own middleware may answer a request before the router does (a request timeout, say):
// its answer stands, whole, and the router's is dropped with a warning, not logged as a failure.
const http = require('node:http');
const { EXPRESS } = require('../helpers/app');
const { createApiRouter, MemoryRegistry } = require('../..');

const SLOW = `export function fn(ctx) { const t = Date.now(); while (Date.now() - t < 600) {} return { late: true } }`;
const apps = { app1: { scripts: { 'main.js': SLOW }, apis: [{ path: 'slow', call: { script: 'main.js', function: 'fn' }, returnType: 'JSON' }] } };

const closers = [];
afterAll(() => Promise.all(closers.splice(0).map((c) => c())));

/** GET `path`; resolves with status, body and whether the connection was cut. */
function get(port, path) {
  return new Promise((resolve) => {
    http.get({ host: '127.0.0.1', port, path }, (res) => {
      const chunks = [];
      res.on('data', (c) => chunks.push(c));
      res.on('end', () => resolve({ status: res.statusCode, body: Buffer.concat(chunks).toString() }));
      res.on('error', (e) => resolve({ status: res.statusCode, error: e.message }));
    }).on('error', (e) => resolve({ error: e.message }));
  });
}

describe.each([4, 5])('a host that answered first (Express %i)', (major) => {
  async function start(answer) {
    const logged = [];
    const logger = { error: (m) => logged.push(['error', m]), warn: (m, meta) => logged.push(['warn', m, meta]), info() {}, debug() {} };
    const router = createApiRouter({ registry: new MemoryRegistry({ apps }), workers: 1, logger });
    await router.ready();
    const app = EXPRESS[major]();
    app.use('/api', answer, router);
    const server = app.listen(0, '127.0.0.1');
    await new Promise((r) => server.once('listening', r));
    closers.push(() => new Promise((r) => server.close(r)), () => router.close());
    return { port: server.address().port, logged, router };
  }

  /** Waits until `logged` has a warning (the router is done with the request). */
  async function warned(logged) {
    for (let i = 0; i < 200 && !logged.some(([level]) => level === 'warn'); i++) await new Promise((r) => setTimeout(r, 50));
  }

  test('a timeout middleware answered 503 while the script ran: the client gets it, a warning names the request, nothing is logged as failed', async () => {
    const timeout = (_req, res, next) => {
      const t = setTimeout(() => res.status(503).json({ host: 'timeout' }), 150);
      res.on('close', () => clearTimeout(t));
      next();
    };
    const { port, logged } = await start(timeout);
    const res = await get(port, '/api/app1/slow');
    expect(res).toEqual({ status: 503, body: '{"host":"timeout"}' });
    await warned(logged);
    expect(logged.filter(([level]) => level === 'error')).toEqual([]);
    const [[, message, meta]] = logged;
    expect(message).toMatch(/^request [0-9a-f-]{36} app1\/slow: the response had been sent before the router answered/);
    expect(meta).toMatchObject({ appId: 'app1', apiPath: 'slow' });
  });

  test('a host that began its own answer and called next(): it goes out whole, the router leaves it alone', async () => {
    // (headers and a first chunk at once, the rest later)
    const streaming = (_req, res, next) => {
      res.writeHead(200, { 'content-type': 'text/plain' });
      res.write('host: ');
      setTimeout(() => res.end('done'), 1500);
      next();
    };
    const { port, logged } = await start(streaming);
    const res = await get(port, '/api/app1/slow');
    expect(res).toEqual({ status: 200, body: 'host: done' });
    expect(logged.filter(([level]) => level === 'error')).toEqual([]);
    expect(logged).toEqual([['warn', expect.stringMatching(/^scriptable-api: GET \/api\/app1\/slow reached the router with a response already under way/), undefined]]);
  });
});
