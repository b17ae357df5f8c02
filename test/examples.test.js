'use strict';
// Every example runs: the example server as `npm start` runs it, and the README's worked example
// (auth in before, audit in after, a custom error body in onError).
const { spawn } = require('node:child_process');
const http = require('node:http');
const path = require('node:path');
const request = require('supertest');
const { createServer } = require('../examples/server');

const logged = [];
const logger = { info: (m) => logged.push(m), warn: (m) => logged.push(m), error: (m) => logged.push(m) };
const { app, router } = createServer({ logger });
afterAll(() => router.close());

describe('README worked example (examples/apps/shop)', () => {
  test('before: no token → 401 with the abort message and code 270001', async () => {
    const res = await request(app).get('/web0/api/shop/orders/list');
    expect(res.status).toBe(401);
    expect(res.body).toEqual({ requestId: res.headers['x-request-id'], message: 'token missing', code: 270001 });
    const bad = await request(app).get('/web0/api/shop/orders/list?token=wrong');
    expect(bad.body.message).toBe('token expired or invalid');
  });

  test('the call sees the account set by before; after audits', async () => {
    const res = await request(app).get('/web0/api/shop/orders/list').set('Authorization', 'Bearer demo-token');
    expect(res.status).toBe(200);
    expect(res.headers['x-audited-by']).toBe('ada');
    expect(res.body.owner).toBe('Ada Lovelace');
    expect(res.body.orders[0]).toEqual({ id: 1, item: 'pen', qty: 2, createdAt: Date.UTC(2026, 0, 5) });
    await new Promise((r) => setTimeout(r, 20));
    expect(logged).toContain('[shop/audit.js] GET orders/list by ada');
  });

  test('onError: a business error becomes status 200 with a custom body', async () => {
    const res = await request(app).post('/web0/api/shop/orders/create?token=demo-token').send('{"item":"pen","qty":0}');
    expect(res.status).toBe(200);
    expect(res.body).toEqual({
      success: false,
      error: { requestId: res.headers['x-request-id'], message: 'item and a positive qty are required', code: 4001 },
    });
    const ok = await request(app).post('/web0/api/shop/orders/create?token=demo-token').send('{"item":"ink","qty":3}');
    expect(ok.body).toMatchObject({ id: 3, item: 'ink', qty: 3 });
    expect(typeof ok.body.createdAt).toBe('number');
    expect(ok.headers.ratelimit).toBeDefined();
  });

  test('Text, Redirect and File return types', async () => {
    const hello = await request(app).get('/web0/api/shop/hello?name=Ada');
    expect(hello.text).toBe('Hello, Ada!');
    const docs = await request(app).get('/web0/api/shop/docs').redirects(0);
    expect(docs.status).toBe(302);
    expect(docs.headers.location).toBe('https://example.com/docs/shop');
    const report = await request(app).get('/web0/api/shop/report?token=demo-token');
    expect(report.headers['content-disposition']).toBe('attachment; filename=orders-report.csv');
    expect(report.text).toBe('id,item,qty\n1,pen,2\n2,ink,1\n');
  });
});

test('`npm start`: the example server answers real requests', async () => {
  const child = spawn(process.execPath, [path.join(__dirname, '..', 'examples', 'server.js')], {
    env: { ...process.env, PORT: '0' },
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  try {
    const url = await new Promise((resolve, reject) => {
      let out = '';
      child.stdout.on('data', (d) => {
        out += d;
        const m = /listening on (http:\/\/\S+)/.exec(out);
        if (m) resolve(m[1]);
      });
      child.once('exit', (code) => reject(new Error(`example server exited with ${code}`)));
    });
    const body = await new Promise((resolve, reject) => {
      http.get(`${url}/shop/hello?name=CI`, (res) => {
        let data = '';
        res.on('data', (d) => (data += d));
        res.on('end', () => resolve(data));
      }).on('error', reject);
    });
    expect(body).toBe('Hello, CI!');
  } finally {
    child.kill();
  }
});

describe('examples/scripts-tsconfig/orders.ts runs as typed', () => {
  const fs = require('node:fs');
  const os = require('node:os');
  const { makeApp } = require('./helpers/app');
  const sandboxDir = fs.mkdtempSync(path.join(os.tmpdir(), 'sapi-ts-example-'));
  fs.mkdirSync(path.join(sandboxDir, 'shop'));
  fs.writeFileSync(path.join(sandboxDir, 'shop', 'report.csv'), 'id\n1\n');
  const source = fs.readFileSync(path.join(__dirname, '..', 'examples', 'scripts-tsconfig', 'orders.ts'), 'utf8');
  const ref = (fn) => ({ script: 'orders.ts', function: fn });
  const hooks = { before: ref('authenticate'), onError: ref('handle') };
  const ts = makeApp({
    router: { sandboxDir, accounts: { getAccountByToken: (t) => (t === 'tok' ? { id: 'u1', name: 'Ada', valid: true } : null) } },
    apps: {
      shop: {
        scripts: { 'orders.ts': source },
        apis: [
          { path: 'orders/list', call: ref('list'), returnType: 'JSON', ...hooks },
          { path: 'orders/create', call: ref('create'), returnType: 'JSON', ...hooks },
          { path: 'orders/attachments', call: ref('attach'), returnType: 'JSON', ...hooks },
          { path: 'orders/report', call: ref('report'), returnType: 'File', ...hooks },
        ],
      },
    },
  });
  afterAll(async () => {
    await ts.router.close();
    fs.rmSync(sandboxDir, { recursive: true, force: true });
  });

  test('list, create (validation error through onError), attach and report', async () => {
    expect((await request(ts.app).get('/web0/api/shop/orders/list')).status).toBe(401);
    const list = await request(ts.app).get('/web0/api/shop/orders/list?token=tok&item=ink');
    expect(list.body).toEqual({ owner: 'Ada', orders: [{ id: 2, item: 'ink', qty: 1, createdAt: Date.UTC(2026, 0, 6) }] });
    const invalid = await request(ts.app).post('/web0/api/shop/orders/create?token=tok').send('{"item":"pen"}');
    expect(invalid.status).toBe(200);
    expect(invalid.body).toMatchObject({ success: false, error: { code: 4001 } });
    const attach = await request(ts.app).post('/web0/api/shop/orders/attachments?token=tok').attach('f', Buffer.from('abc'), 'a.txt');
    expect(attach.body).toEqual([{ path: 'orders/a.txt', size: 3 }]);
    expect(fs.readFileSync(path.join(sandboxDir, 'shop', 'orders', 'a.txt'), 'utf8')).toBe('abc');
    const report = await request(ts.app).get('/web0/api/shop/orders/report?token=tok&view=inline');
    expect(report.headers['content-disposition']).toBe('inline; filename=orders-report.csv');
    expect(report.text).toBe('id\n1\n');
  });
});
