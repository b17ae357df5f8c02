'use strict';
// The host-call rewrite through the real router, on both engines: each script runs as written
// (rewritten into async mode where the rewrite can) and forced into blocking mode (a copy with a
// function using `eval`), against a real upstream on 127.0.0.1; the two must answer alike and make
// the same upstream requests.
const http = require('node:http');
const request = require('supertest');
const { rewriteHostCalls } = require('../dist/cjs/runtime/rewrite/index.js');
const { makeApp } = require('./helpers/app');
const { BLOCKING, pairedModes } = require('./helpers/rewrite-check');


/** [name, source ($U is the upstream's URL)]: scripts whose `main(ctx)` the two modes must run alike. */
const CASES = [
  ['a host object read by a computed name', `export function main(ctx) { const k = 'ht' + 'tp', m = 'req' + 'uest'; return platform[k][m]({ url: '$U/a' }).status }`],
  ['a helper of platform.http read by a computed name', `export function main(ctx) { const get = platform.http['req' + 'uest']; return get({ url: '$U/b' }).status }`],
  [
    'an async function that waits on the host, its promise chained with catch and dropped',
    `async function keep(tag) { log.push(tag); const r = platform.http.request({ url: '$U/' + tag }); log.push(r.status) }
const log = [];
export function main(ctx) { log.length = 0; keep('c').catch(() => log.push('failed')); log.push('after'); return log.slice() }`,
  ],
  [
    'an async method that waits on the host, called as a statement',
    `const store = { async keep(tag) { log.push(tag); const r = platform.http.request({ url: '$U/' + tag }); log.push(r.status) } };
const log = [];
export function main(ctx) { log.length = 0; store.keep('d'); log.push('after'); return log.slice() }`,
  ],
];

let upstream;
const seen = [];
const engines = {};

beforeAll(async () => {
  upstream = http.createServer((req, res) => {
    seen.push(req.url);
    res.writeHead(201, { 'content-type': 'application/json' });
    res.end(JSON.stringify({ path: req.url }));
  });
  await new Promise((resolve) => upstream.listen(0, '127.0.0.1', resolve));
  const base = `http://127.0.0.1:${upstream.address().port}`;
  const { scripts, apis } = pairedModes(CASES, base);
  for (const engine of ['quickjs', 'vm2']) {
    engines[engine] = makeApp({ apps: { app1: { scripts, apis } }, router: { engine, workers: 1, logger: false, outbound: { allowPrivateNetworks: true } } });
  }
  await Promise.all(Object.values(engines).map((e) => e.router.ready()));
});

afterAll(async () => {
  await Promise.all(Object.values(engines).map((e) => e.router.close()));
  await new Promise((resolve) => upstream.close(resolve));
});

/** What a client and the upstream see of one call. */
async function observe(app, path) {
  seen.length = 0;
  const res = await request(app).get(`/web0/api/app1/${path}`);
  const body = res.text.replace(/"requestId":"[^"]*",?/, '').replace(/c\d+b?\.js/g, 'main.js');
  return { status: res.status, type: res.headers['content-type'], body, upstream: [...seen] };
}

describe.each(['quickjs', 'vm2'])('%s: as written and in blocking mode, the same answer', (engine) => {
  test.each(CASES.map(([name], i) => [name, i]))('%s', async (_name, i) => {
    expect(rewriteHostCalls(CASES[i][1] + BLOCKING).async).toBe(false);
    const { app } = engines[engine];
    const blocking = await observe(app, `c${i}b`);
    expect(blocking.status).toBe(200);
    expect(await observe(app, `c${i}`)).toEqual(blocking);
  });
});

test.each(['quickjs', 'vm2'])('%s: a script that runs in blocking mode is named in one warning with the reason, however often it runs', async (engine) => {
  const lines = [];
  const logger = { info: () => undefined, warn: (message, meta) => lines.push({ message, meta }), error: () => undefined };
  const blocking = `export function fn(ctx) { return ['t'].map((t) => platform.system.getAccountByToken(t))[0] }`;
  const { app, router } = makeApp({
    apps: {
      app1: {
        scripts: { 'slow.js': blocking, 'fine.js': `export function fn(ctx) { return platform.system.getAccountByToken('t') }` },
        apis: [
          { path: 'slow', call: { script: 'slow.js', function: 'fn' }, returnType: 'JSON' },
          { path: 'fine', call: { script: 'fine.js', function: 'fn' }, returnType: 'JSON' },
        ],
      },
    },
    router: { engine, workers: 2, logger, accounts: { getAccountByToken: (t) => ({ id: t }) } },
  });
  try {
    for (let i = 0; i < 6; i++) {
      await request(app).get('/web0/api/app1/slow').expect(200, { id: 't' });
      await request(app).get('/web0/api/app1/fine').expect(200, { id: 't' });
    }
    const notices = lines.filter((l) => /blocking mode/.test(l.message));
    expect(notices).toHaveLength(1);
    expect(notices[0].message).toMatch(/app 'app1'.*slow\.js.*`platform\.system\.getAccountByToken\(\.\.\.\)` inside a callback.*line 1/);
    expect(notices[0].meta).toEqual(expect.objectContaining({ appId: 'app1', script: 'slow.js', reason: expect.stringContaining('callback') }));
  } finally {
    await router.close();
  }
});

test.each(['quickjs', 'vm2'])('%s: two apps running the same blocking-mode script (same name and source) are each named in a warning', async (engine) => {
  const lines = [];
  const logger = { info: () => undefined, warn: (message, meta) => lines.push({ message, meta }), error: () => undefined };
  const blocking = `export function fn(ctx) { return ['t'].map((t) => platform.system.getAccountByToken(t))[0] }`;
  const app = { scripts: { 'slow.js': blocking }, apis: [{ path: 'slow', call: { script: 'slow.js', function: 'fn' }, returnType: 'JSON' }] };
  const made = makeApp({ apps: { shop: app, blog: app }, router: { engine, workers: 1, maxWorkers: 1, logger, accounts: { getAccountByToken: (t) => ({ id: t }) } } });
  try {
    for (const id of ['shop', 'blog', 'shop', 'blog']) await request(made.app).get(`/web0/api/${id}/slow`).expect(200, { id: 't' });
    const notices = lines.filter((l) => /blocking mode/.test(l.message));
    expect(notices.map((l) => l.meta.appId).sort()).toEqual(['blog', 'shop']);
  } finally {
    await made.router.close();
  }
});

test.each(['quickjs', 'vm2'])("%s: a script that does not compile is not said to run in blocking mode (it does not run); put right, it runs with no such warning", async (engine) => {
  const lines = [];
  const logger = { info: () => undefined, warn: (message, meta) => lines.push({ message, meta }), error: () => undefined };
  const { app, router, registry } = makeApp({
    apps: { app1: { scripts: { 'm.js': 'export function fn(ctx) { return ' }, apis: [{ path: 'p', call: { script: 'm.js', function: 'fn' }, returnType: 'JSON' }] } },
    router: { engine, workers: 1, logger },
  });
  try {
    const broken = await request(app).get('/web0/api/app1/p');
    expect([broken.status, broken.body.code]).toEqual([500, 270204]);
    registry.putScript('app1', 'm.js', 'export function fn(ctx) { return 2 }');
    await request(app).get('/web0/api/app1/p').expect(200, '2');
    expect(lines.filter((l) => /blocking mode/.test(l.message))).toEqual([]);
  } finally {
    await router.close();
  }
});
