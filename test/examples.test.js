'use strict';
// Every example runs: examples/apps served as `npm start` serves them (the CLI), the embedding
// example (examples/server.js) with the README's walk-through (auth in before, audit in after,
// onError, automations as the call and as the after hook, an upload, a download, a redirect),
// and every example definition file conforms to the schema it names.
const { spawn } = require('node:child_process');
const fs = require('node:fs');
const http = require('node:http');
const path = require('node:path');
const request = require('supertest');
const Ajv = require('ajv');
const { createServer } = require('../examples/server');

const logged = [];
const logger = { info: (m) => logged.push(m), warn: (m) => logged.push(m), error: (m) => logged.push(m) };
const { app, close, dataDir } = createServer({ logger });
afterAll(async () => {
  await close();
  fs.rmSync(dataDir, { recursive: true, force: true });
});

describe('README worked example (examples/apps/shop)', () => {
  test('before: no token → 401 with the abort message and code 270001', async () => {
    const res = await request(app).get('/web0/api/shop/orders/list');
    expect(res.status).toBe(401);
    expect(res.body).toEqual({ requestId: res.headers['x-request-id'], message: 'token missing', code: 270001 });
    const bad = await request(app).get('/web0/api/shop/orders/list?token=wrong');
    expect(bad.body.message).toBe('token expired or invalid');
  });

  test("before: a token named like a property every object has (__proto__, constructor...) is no account: 401", async () => {
    for (const token of ['__proto__', 'constructor', 'toString', 'hasOwnProperty', 'valueOf']) {
      const res = await request(app).get(`/web0/api/shop/orders/list?token=${token}`);
      expect([token, res.status, res.body.message]).toEqual([token, 401, 'token expired or invalid']);
    }
  });

  test('the call sees the account set by before; after audits', async () => {
    const res = await request(app).get('/web0/api/shop/orders/list').set('Authorization', 'Bearer demo-token');
    expect(res.status).toBe(200);
    expect(res.headers['x-audited-by']).toBe('ada');
    expect(res.body.owner).toBe('Ada Lovelace');
    expect(res.body.orders[0]).toEqual({ id: 1, item: 'pen', qty: 2, createdAt: Date.UTC(2026, 0, 5) });
    const deadline = Date.now() + 10000; // the console line travels from the worker: wait for it
    while (!logged.includes('[shop/audit.js] GET orders/list by ada') && Date.now() < deadline) await new Promise((r) => setTimeout(r, 20));
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

  test('an automation as the call (order-summary): script, set, if, forEach, return — and abort through onError', async () => {
    const all = await request(app).get('/web0/api/shop/orders/summary?token=demo-token');
    expect(all.body).toEqual({ owner: 'Ada Lovelace', orders: 2, qty: 3, items: ['pen', 'ink'] });
    const pens = await request(app).get('/web0/api/shop/orders/summary?token=demo-token&item=pen');
    expect(pens.body).toEqual({ owner: 'Ada Lovelace', orders: 1, qty: 2, items: ['pen'] });
    const none = await request(app).get('/web0/api/shop/orders/summary?token=demo-token&item=pad');
    expect(none.body).toEqual({ success: false, error: { requestId: none.headers['x-request-id'], message: 'no orders of pad', code: 270001 } });
  });

  test('an automation as the after hook (envelope) wraps the result', async () => {
    const res = await request(app).get('/web0/api/shop/orders/get?id=2');
    expect(res.body).toEqual({ data: { id: 2, item: 'ink', qty: 1, createdAt: Date.UTC(2026, 0, 6) }, meta: { requestId: res.headers['x-request-id'], app: 'shop' } });
    expect((await request(app).get('/web0/api/shop/orders/get?id=9')).status).toBe(404);
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

  test('files: an upload into storage, then its download', async () => {
    const up = await request(app).post('/web0/api/files/upload').attach('file', Buffer.from('remember the milk\n'), 'notes.txt');
    expect(up.status).toBe(200);
    expect(up.body).toEqual([{ name: 'notes.txt', size: 18, contentType: 'text/plain' }]);
    const down = await request(app).get('/web0/api/files/download?name=notes.txt');
    expect(down.headers['content-disposition']).toBe('attachment; filename=notes.txt');
    expect(down.text).toBe('remember the milk\n');
    expect((await request(app).post('/web0/api/files/upload').send('x')).status).toBe(400);
    expect((await request(app).get('/web0/api/files/download?name=nope.txt')).status).toBe(404);
  });
});

test('`npm start`: the CLI serves examples/apps and prints a URL that answers', async () => {
  const pkg = require('../package.json');
  // the start script minus its build step: node bin/scriptable-api.js serve examples/apps --config ...
  const argv = pkg.scripts.start.split('&&').pop().trim().split(/\s+/);
  expect(argv[0]).toBe('node');
  const storage = fs.mkdtempSync(path.join(require('node:os').tmpdir(), 'sapi-start-'));
  const child = spawn(process.execPath, [...argv.slice(1), '--port', '0'], {
    cwd: path.join(__dirname, '..'),
    env: { ...process.env, STORAGE_DIR: storage },
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  const get = (url) =>
    new Promise((resolve, reject) => {
      http.get(url, (res) => {
        let data = '';
        res.on('data', (d) => (data += d));
        res.on('end', () => resolve({ status: res.statusCode, data }));
      }).on('error', reject);
    });
  try {
    const url = await new Promise((resolve, reject) => {
      let out = '';
      child.stdout.on('data', (d) => {
        out += d;
        const m = /(http:\/\/\S+)/.exec(out);
        if (m) resolve(m[1]);
      });
      child.once('exit', (code) => reject(new Error(`scriptable-api exited with ${code}`)));
    });
    const index = await get(url);
    expect(index.status).toBe(200);
    const apps = JSON.parse(index.data).apps;
    expect(apps.map((a) => a.appId)).toEqual(['files', 'shop']);
    expect(apps[1].apis.map((a) => a.path)).toContain('orders/summary');
    expect((await get(`${url}/shop/hello?name=CI`)).data).toBe('Hello, CI!');
    expect(JSON.parse((await get(`${url}/shop/orders/summary?token=demo-token`)).data)).toMatchObject({ owner: 'Ada Lovelace', orders: 2 });
  } finally {
    child.kill('SIGTERM');
    await new Promise((r) => (child.exitCode !== null ? r() : child.once('exit', r)));
    fs.rmSync(storage, { recursive: true, force: true });
  }
});

test('`node examples/server.js` as its comment says: serves the APIs and /metrics, and SIGTERM or SIGINT stops it, its data folder removed', async () => {
  for (const signal of ['SIGTERM', 'SIGINT']) {
    // its own temp folder: the example keeps its data in os.tmpdir()
    const tmpdir = fs.mkdtempSync(path.join(require('node:os').tmpdir(), 'sapi-example-server-'));
    const child = spawn(process.execPath, [path.join(__dirname, '..', 'examples', 'server.js')], {
      env: { ...process.env, PORT: '0', TMPDIR: tmpdir, TMP: tmpdir, TEMP: tmpdir },
      stdio: ['ignore', 'pipe', 'inherit'],
    });
    const exited = new Promise((resolve) => child.once('exit', (code, sig) => resolve({ code, signal: sig })));
    try {
      const url = await new Promise((resolve, reject) => {
        let out = '';
        child.stdout.on('data', (d) => {
          out += d;
          const m = /listening on (http:\/\/\S+)/.exec(out);
          if (m) resolve(m[1]);
        });
        exited.then(({ code }) => reject(new Error(`examples/server.js exited with ${code}`)));
      });
      expect((await fetch(`${url}/shop/hello?name=Ada`).then((r) => r.text()))).toBe('Hello, Ada!');
      expect((await fetch(`${url}/shop/orders/list?token=demo-token`)).status).toBe(200);
      expect((await fetch(`${url}/shop/orders/list`)).status).toBe(401);
      expect((await fetch(`${url}/shop/report?token=demo-token`).then((r) => r.text()))).toBe('id,item,qty\n1,pen,2\n2,ink,1\n');
      expect((await fetch(`${new URL(url).origin}/metrics`).then((r) => r.text()))).toMatch(/scriptable_api_requests_total/);
      child.kill(signal);
      expect(await exited).toEqual({ code: 0, signal: null });
      expect(fs.readdirSync(tmpdir)).toEqual([]);
    } finally {
      if (child.exitCode === null) child.kill('SIGKILL');
      fs.rmSync(tmpdir, { recursive: true, force: true });
    }
  }
});

test('every example definition names its schema and conforms to it (an independent ajv)', () => {
  const ajv = new Ajv({ allErrors: true, strict: false });
  const root = path.join(__dirname, '..', 'examples', 'apps');
  let checked = 0;
  for (const appId of fs.readdirSync(root)) {
    for (const kind of ['apis', 'automations']) {
      const dir = path.join(root, appId, kind);
      if (!fs.existsSync(dir)) continue;
      for (const f of fs.readdirSync(dir)) {
        const file = path.join(dir, f);
        const def = JSON.parse(fs.readFileSync(file, 'utf8'));
        const schemaFile = path.resolve(dir, def.$schema);
        expect(path.basename(schemaFile)).toBe(kind === 'apis' ? 'api-definition.json' : 'automation.json');
        const validate = ajv.getSchema(schemaFile) ?? (ajv.addSchema(JSON.parse(fs.readFileSync(schemaFile, 'utf8')), schemaFile), ajv.getSchema(schemaFile));
        expect({ file: f, ok: validate(def), errors: validate.errors }).toEqual({ file: f, ok: true, errors: null });
        checked++;
      }
    }
  }
  expect(checked).toBeGreaterThanOrEqual(11);
});

test("the README quotes shop's automations as they are in examples/apps/shop/automations", () => {
  const readme = fs.readFileSync(path.join(__dirname, '..', 'README.md'), 'utf8');
  const file = (name) => JSON.parse(fs.readFileSync(path.join(__dirname, '..', 'examples', 'apps', 'shop', 'automations', name), 'utf8'));
  const quoted = readme.split('from `examples/apps/shop/automations/order-summary.json`')[1].split('```json\n')[1].split('\n```')[0];
  const { description, ...summary } = file('order-summary.json');
  expect(description).toEqual(expect.any(String));
  expect(JSON.parse(quoted)).toEqual(summary);
  const envelope = readme.split('`examples/apps/shop/automations/envelope.json`')[1].split('`')[1];
  expect(JSON.parse(envelope)).toEqual(file('envelope.json').steps[0]);
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
