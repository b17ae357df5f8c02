'use strict';
// The host's main thread serves every app: work on it that grows with a value a tenant's script
// makes (a thrown message, a response header) is another app's wait. While one app makes such
// values, the host's event loop is never held long and another app's calls keep answering.
const http = require('node:http');
const { monitorEventLoopDelay } = require('node:perf_hooks');
const { makeApp } = require('./helpers/app');

/** The longest the host's event loop may be held (ms): generous, for a loaded 2-core machine. */
const LAG_MS = 300;
const BIG = 24_000_000;
const big = `const big = () => 'x'.repeat(${BIG});`;

const BIG_APIS = {
  thrown: `${big} export function fn() { throw new Error(big()) }`,
  aborted: `${big} export function fn() { platform.app.abort(big(), 409) }`,
  sendError: `${big} export function fn(ctx) { ctx.response.sendError(418, big()) }`,
  handled: `${big} export function fn() { throw new Error(big()) } export function onError(ctx, e) { return { handled: e.message.length } }`,
  header: `${big} export function fn(ctx) { ctx.response.setHeader('x-a', big()); return 1 }`,
  redirect: `${big} export function fn(ctx) { ctx.response.sendRedirect('/next?' + big()) }`,
  redirectResult: `${big} export function fn() { return '/next?' + big() }`,
  redirectFits: `export function fn(ctx) { return '/next?' + 'q'.repeat(65_536 - 6) }`,
  // (text and bytes in turn: each switch starts a piece of the body, which the host makes a buffer of)
  pieces: `export function fn(ctx) {
    const w = ctx.response.getWriter(), o = ctx.response.getOutputStream();
    for (let i = 0; i < 200000; i++) { w.write('a'); o.write(66); }
  }`,
  piecesFit: `export function fn(ctx) {
    const w = ctx.response.getWriter(), o = ctx.response.getOutputStream();
    for (let i = 0; i < 4999; i++) { w.write('a'); o.write(66); }
    w.write('!');
  }`,
  // (before sets them, the call reads them: they pass from one stage to the next in the worker)
  attributes: `export function before(ctx) {
    const a = [];
    for (let i = 0; i < 1000000; i++) a.push({ k: "v" + i, n: i });
    ctx.request.setAttribute('big', a);
  }
  export function fn(ctx) { return { n: ctx.request.getAttribute('big').length } }`,
  headers: `export function fn(ctx) {
    const r = ctx.response, v = 'v'.repeat(1000), refused = [];
    for (const [name, set] of [
      ['addHeader', () => r.addHeader('x-b', 'w'.repeat(70_000))],
      ['many', () => { for (let i = 0; i < 80; i++) r.addHeader('x-h' + i, v) }],
      ['setContentType', () => r.setContentType('text/plain; x=' + 'y'.repeat(70_000))],
    ]) {
      try { set() } catch (e) { refused.push(name + ': ' + e.name + ': ' + e.message) }
    }
    return { refused, kept: r.getHeaderNames().length };
  }`,
};

function listen(app) {
  const server = http.createServer(app).listen(0, '127.0.0.1');
  return new Promise((resolve) => server.once('listening', () => resolve(server)));
}

/** GET on the server: status, the body's length and the body when it is short (parsed when JSON). */
function get(server, path) {
  return new Promise((resolve, reject) => {
    http
      .get({ host: '127.0.0.1', port: server.address().port, path, maxHeaderSize: 64 * 1024 * 1024 }, (res) => {
        const chunks = [];
        let length = 0;
        res.on('data', (c) => {
          length += c.length;
          if (length <= 1024 * 1024) chunks.push(c);
        });
        res.on('end', () => {
          const text = length <= 1024 * 1024 ? Buffer.concat(chunks).toString() : null;
          let body = text;
          try {
            body = JSON.parse(text);
          } catch {}
          resolve({ status: res.statusCode, length, body, headers: res.headers });
        });
      })
      .on('error', reject);
  });
}

describe.each(['quickjs', 'vm2'])('big values a script makes, on the %s engine', (engine) => {
  const logged = [];
  const logger = { info() {}, debug() {}, warn() {}, error: (m, meta) => logged.push(meta) };
  const apps = {
    big: { scripts: {}, apis: [] },
    good: { scripts: { 'g.js': 'export function f() { return { ok: true } }' }, apis: [{ path: 'g', call: { script: 'g.js', function: 'f' }, returnType: 'JSON' }] },
  };
  for (const [name, source] of Object.entries(BIG_APIS)) {
    apps.big.scripts[`${name}.js`] = source;
    const onError = name === 'handled' ? { onError: { script: `${name}.js`, function: 'onError' } } : {};
    const before = name === 'attributes' ? { before: { script: `${name}.js`, function: 'before' } } : {};
    apps.big.apis.push({ path: name, call: { script: `${name}.js`, function: 'fn' }, returnType: name.startsWith('redirect') ? 'Redirect' : 'JSON', ...onError, ...before });
  }
  const { app, router } = makeApp({ apps, router: { engine, workers: 2, scriptMemoryLimitMb: 512, scriptTimeoutMs: 30_000, queueTimeoutMs: 60_000, logger } });
  let server;
  beforeAll(async () => {
    await router.ready();
    server = await listen(app);
  });
  afterAll(async () => {
    server?.close();
    await router.close();
  });

  /** Runs `path` four times at once (after once to warm up) while another app's calls go on: the loop's longest delay, the answers, and the other app's. */
  async function underLoad(path) {
    await get(server, path);
    const lag = monitorEventLoopDelay({ resolution: 10 });
    lag.enable();
    let done = false;
    const big = Promise.all([1, 2, 3, 4].map(() => get(server, path))).finally(() => (done = true));
    const others = [];
    while (!done) others.push(await get(server, '/web0/api/good/g'));
    const answers = await big;
    lag.disable();
    return { lagMs: lag.max / 1e6, answers, others };
  }

  const CUT = 64 * 1024;

  test.each([
    ['thrown', 500, 270000],
    ['aborted', 409, 270001],
    ['sendError', 418, 418],
  ])("a %s error message of 24 MB is cut at 64 KiB in the body and log, and does not hold the host's event loop", async (name, status, code) => {
    logged.length = 0;
    const { lagMs, answers, others } = await underLoad(`/web0/api/big/${name}`);
    for (const a of answers) {
      expect([a.status, a.body?.code, a.body?.message?.length, a.body?.message?.endsWith('x…')]).toEqual([status, code, CUT, true]);
    }
    expect(others.every((r) => r.status === 200 && r.body.ok === true)).toBe(true);
    expect(lagMs).toBeLessThan(LAG_MS);
    for (const meta of logged.filter((m) => m.appId === 'big')) expect(meta.message.length).toBeLessThanOrEqual(8 * 1024);
  }, 120_000);

  test("a response header of 24 MB throws in the script (at most 64 KiB of headers): the host's event loop is not held", async () => {
    const { lagMs, answers, others } = await underLoad('/web0/api/big/header');
    for (const a of answers) {
      expect([a.status, a.body?.code, a.body?.message, a.length < 1024]).toEqual([500, 270000, 'The response headers may hold at most 65536 characters in all', true]);
      expect(a.headers['x-a']).toBeUndefined();
    }
    expect(others.every((r) => r.status === 200 && r.body.ok === true)).toBe(true);
    expect(lagMs).toBeLessThan(LAG_MS);
  }, 120_000);

  test('headers over 64 KiB in all, one at a time: each is refused with an IllegalStateException and the ones that fit are kept', async () => {
    const res = await get(server, '/web0/api/big/headers');
    const refusal = 'IllegalStateException: The response headers may hold at most 65536 characters in all';
    expect([res.status, res.body]).toEqual([200, { refused: [`addHeader: ${refusal}`, `many: ${refusal}`, `setContentType: ${refusal}`], kept: 65 }]);
    expect(res.headers['x-h64']).toBe('v'.repeat(1000));
    expect(res.headers['x-h65']).toBeUndefined();
  });

  test.each(['redirect', 'redirectResult'])("%s: a redirect location of 24 MB is INVALID_RESULT (at most 64 KiB), and does not hold the host's event loop", async (name) => {
    const { lagMs, answers, others } = await underLoad(`/web0/api/big/${name}`);
    for (const a of answers) {
      expect([a.status, a.body?.code, a.body?.message, a.headers.location]).toEqual([500, 270300, `Redirect location is longer than 65536 characters (${BIG + 6})`, undefined]);
    }
    expect(others.every((r) => r.status === 200 && r.body.ok === true)).toBe(true);
    expect(lagMs).toBeLessThan(LAG_MS);
  }, 120_000);

  test("a body switching between text and bytes 400,000 times is refused in the script (at most 9,999 switches): the host's event loop is not held", async () => {
    const { lagMs, answers, others } = await underLoad('/web0/api/big/pieces');
    for (const a of answers) expect([a.status, a.body?.code, a.body?.message]).toEqual([500, 270000, 'A response body may switch between text and bytes at most 9999 times']);
    expect(others.every((r) => r.status === 200 && r.body.ok === true)).toBe(true);
    expect(lagMs).toBeLessThan(LAG_MS);
    const fits = await get(server, '/web0/api/big/piecesFit');
    expect([fits.status, fits.length, fits.body.slice(0, 4), fits.body.slice(-3)]).toEqual([200, 9999, 'aBaB', 'aB!']);
  }, 120_000);

  test("request attributes of 25 MB pass from before to the call without crossing to the host: its event loop is not held", async () => {
    const { lagMs, answers, others } = await underLoad('/web0/api/big/attributes');
    for (const a of answers) expect([a.status, a.body]).toEqual([200, { n: 1000000 }]);
    expect(others.every((r) => r.status === 200 && r.body.ok === true)).toBe(true);
    expect(lagMs).toBeLessThan(LAG_MS);
  }, 120_000);

  test('a redirect location of 64 KiB goes out', async () => {
    const res = await get(server, '/web0/api/big/redirectFits');
    expect([res.status, res.headers.location]).toEqual([302, '/next?' + 'q'.repeat(65_536 - 6)]);
  });

  test("onError sees the whole message; the call failure it handled crosses to the host cut", async () => {
    const { lagMs, answers } = await underLoad('/web0/api/big/handled');
    for (const a of answers) expect([a.status, a.body]).toEqual([200, { handled: BIG }]);
    expect(lagMs).toBeLessThan(LAG_MS);
  }, 120_000);
});

test("the host refuses a response state of more than 10,000 body pieces (an engine of one's own)", () => {
  const { checkResponseState } = require('../dist/cjs/response/framing');
  const base = { status: 200, headers: [], contentType: null, characterEncoding: null, contentLength: null, bufferSize: 8192, chunks: [], written: true, committed: false, error: null, redirect: null };
  const pieces = (n) => Array.from({ length: n }, (_, i) => (i % 2 ? { b: 'Qg==' } : { t: 'a' }));
  expect(() => checkResponseState({ ...base, chunks: pieces(10_000) })).not.toThrow();
  expect(() => checkResponseState({ ...base, chunks: pieces(10_001) })).toThrow('at most 10000 pieces of text and bytes (10001 were written)');
});

test("the host refuses a response state whose headers hold more than 64 KiB in all (an engine of one's own), before checking each one", () => {
  const { checkResponseState } = require('../dist/cjs/response/framing');
  const base = { status: 200, headers: [], contentType: null, characterEncoding: null, contentLength: null, bufferSize: 8192, chunks: [], written: false, committed: false, error: null, redirect: null };
  expect(() => checkResponseState({ ...base, headers: [['x-a', 'v'.repeat(65_533)]] })).not.toThrow();
  expect(() => checkResponseState({ ...base, headers: [['x-a', 'v'.repeat(65_534)]] })).toThrow('at most 65536 characters in all (65537 were set)');
  expect(() => checkResponseState({ ...base, headers: [['x-a', '\n'.repeat(1e6)]] })).toThrow('at most 65536 characters');
  expect(() => checkResponseState({ ...base, contentType: 't'.repeat(65_537) })).toThrow('at most 65536 characters');
});

test('a result whose written body holds a long text or long bytes crosses from the worker as a clone of its own, not inside a JSON batch the host parses', () => {
  const { longText, CLONE_TEXT_CHARS } = require('../dist/cjs/runtime/messages');
  const response = (chunks) => ({ status: 200, headers: [], contentType: null, characterEncoding: null, contentLength: null, bufferSize: 8192, chunks, written: true, committed: true, error: null, redirect: null });
  const result = (chunks) => ({ type: 'result', id: 1, result: { state: { attributes: {}, response: response(chunks) }, outcome: { kind: 'written' } } });
  expect(longText(result([{ t: 'x'.repeat(CLONE_TEXT_CHARS) }]))).toBe(true);
  expect(longText(result([{ t: 'short' }, { b: 'A'.repeat(CLONE_TEXT_CHARS) }]))).toBe(true);
  expect(longText(result([{ t: 'short' }, { b: 'AAAA' }]))).toBe(false);
  expect(longText(result([]))).toBe(false);
});

test("a File result's name of 40,000 characters is cut to 200 UTF-8 bytes in one pass: the host's event loop is not held", async () => {
  const fs = require('node:fs');
  const os = require('node:os');
  const path = require('node:path');
  const sandboxDir = fs.mkdtempSync(path.join(os.tmpdir(), 'sapi-stall-name-'));
  fs.mkdirSync(path.join(sandboxDir, 'files'));
  fs.writeFileSync(path.join(sandboxDir, 'files', 'f.txt'), 'hello');
  const { app, router } = makeApp({
    router: { sandboxDir },
    apps: { files: { scripts: { 'f.js': "export function fn() { return { path: 'f.txt', name: 'é'.repeat(40000) + '.txt' } }" }, apis: [{ path: 'f', call: { script: 'f.js', function: 'fn' }, returnType: 'File' }] } },
  });
  const server = await listen(app);
  try {
    await get(server, '/web0/api/files/f');
    const lag = monitorEventLoopDelay({ resolution: 10 });
    lag.enable();
    const res = await get(server, '/web0/api/files/f');
    await new Promise((resolve) => setTimeout(resolve, 50)); // (the sampling timer runs once more: a held loop is counted)
    lag.disable();
    // (98 two-byte characters and the extension: 200 bytes)
    expect([res.status, res.body, res.headers['content-disposition'].includes(`filename*=UTF-8''${encodeURIComponent('é'.repeat(98) + '.txt')}`)]).toEqual([200, 'hello', true]);
    expect(lag.max / 1e6).toBeLessThan(LAG_MS);
  } finally {
    server.close();
    await router.close();
    fs.rmSync(sandboxDir, { recursive: true, force: true });
  }
}, 120_000);
