'use strict';
// The spec's examples (scriptable-http-api.md), written as its scripts are written — synchronous
// host calls, `platform.*`, ctx.request / ctx.response — and run through the real router: the
// preprocessing authentication, the error handler answering 200 with the APIError as JSON, a file
// fetched with platform.http.request(...).saveBodyAsFile and returned as a File result, uploaded
// Parts, the processing order's rules and the rate-limit example (the same IP once per second),
// on both engines (QuickJS, the default, and vm2).
const fs = require('node:fs');
const http = require('node:http');
const os = require('node:os');
const path = require('node:path');
const request = require('supertest');
const { makeApp } = require('./helpers/app');

const root = fs.mkdtempSync(path.join(os.tmpdir(), 'sapi-spec-'));
const sandboxDir = path.join(root, 'sandbox');
const storageDir = path.join(root, 'storage');
let upstream;
beforeAll(async () => {
  upstream = http.createServer((req, res) => res.setHeader('content-type', 'application/pdf').end('%PDF-1.4 report'));
  await new Promise((resolve) => upstream.listen(0, '127.0.0.1', resolve));
});

const ACCOUNT = { avatar: 'a.png', companyId: 'c1', createTime: 1700000000000, email: 'ada@example.com', id: 'u1', isValid: true, mobileNo: '555', name: 'Ada', updateTime: 1700000000001, userName: 'ada', valid: true };
const scripts = {
  // Execute before calling: authentication, as the spec describes it
  'auth.js': `export function before(ctx) {
    var token = ctx.query.token;
    if (token == null) {
      platform.app.abort('token is required');
    }
    var account = platform.system.getAccountByToken(token);
    if (account == null) {
      platform.app.abort('token expired');
    }
    ctx.request.setAttribute('account', account);
  }`,
  // Execute after calling error: status 200 with the APIError serialized as JSON
  'error.js': `export function handle(ctx, error) {
    ctx.response.setContentType('application/json;charset=UTF-8');
    ctx.response.setStatus(200);
    ctx.response.getOutputStream().write(platform.utils.stringToBytes(platform.utils.toJSON(error), 'UTF-8'));
  }`,
  // Execute after calling: auditing, returning nothing
  'audit.js': `export function audit(ctx, result) {
    ctx.response.setHeader('X-Audit', ctx.request.getAttribute('account').userName + ' ' + typeof result);
  }`,
  'api.js': `export function me(ctx) {
    var account = ctx.request.getAttribute('account');
    if (ctx.query.fail) { var e = new Error('no stock'); e.code = 1001; throw e; }
    return { account: account, at: new Date(Date.UTC(2026, 0, 1)) };
  }
  export function report(ctx) {
    var response = platform.http.request({ url: ctx.query.url });
    response.saveBodyAsFile('reports/report.pdf');
    return { path: 'reports/report.pdf', name: 'report.pdf', contentDisposition: ctx.query.view };
  }
  export function upload(ctx) {
    var out = [];
    var parts = ctx.getParts();
    for (var i = 0; i < parts.length; i++) {
      var part = parts[i];
      out.push({ name: part.name, contentType: part.contentType, size: part.size, submittedFileName: part.submittedFileName,
        saved: part.save('uploads/' + part.submittedFileName), stored: part.saveStorage('shared/' + part.submittedFileName),
        attachment: part.saveAttachment('orders', 'files') });
    }
    return out;
  }
  export function hello(ctx) { return ctx.query.name == null ? null : 'Hello ' + ctx.query.name; }
  export function go(ctx) { return 'https://example.com/next'; }`,
};
afterAll(async () => {
  await new Promise((resolve) => upstream.close(resolve));
  fs.rmSync(root, { recursive: true, force: true });
});

const hooks = { before: { script: 'auth.js', function: 'before' }, onError: { script: 'error.js', function: 'handle' } };
const api = (p, fn, returnType, extra = {}) => ({ path: p, call: { script: 'api.js', function: fn }, returnType, ...extra });
describe.each(['quickjs', 'vm2'])('with the %s engine', (engine) => {
  const { app, router } = makeApp({
    setup: (a) => a.set('trust proxy', true),
    router: { engine, sandboxDir: path.join(sandboxDir, engine), storageDir: path.join(storageDir, engine), outbound: { allowPrivateNetworks: true }, accounts: { getAccountByToken: async (t) => (t === 'good' ? ACCOUNT : null) } },
    apps: {
      shop: {
        scripts,
        apis: [
          api('account/me', 'me', 'JSON', { ...hooks, after: { script: 'audit.js', function: 'audit' } }),
          api('report', 'report', 'File'),
          api('upload', 'upload', 'JSON'),
          api('hello', 'hello', 'Text'),
          api('go', 'go', 'Redirect'),
          api('limited', 'hello', 'Text', { rateLimit: { requestsPerSecond: 1, timeoutMs: 0, identifier: '{ip}' } }),
        ],
      },
    },
  });
  afterAll(() => router.close());

  describe('authentication in the preprocessing script', () => {
    test('no token, or an expired one: the error body with the abort message and code 270001', async () => {
      const missing = await request(app).get('/web0/api/shop/account/me');
      expect([missing.status, missing.body]).toEqual([500, { requestId: missing.headers['x-request-id'], message: 'token is required', code: 270001 }]);
      const expired = await request(app).get('/web0/api/shop/account/me?token=old');
      expect(expired.body).toEqual({ requestId: expired.headers['x-request-id'], message: 'token expired', code: 270001 });
    });

    test('the account stored as a request attribute reaches the call and the after script; dates are integer timestamps', async () => {
      const res = await request(app).get('/web0/api/shop/account/me?token=good');
      expect(res.status).toBe(200);
      expect(res.headers['content-type']).toBe('application/json;charset=UTF-8');
      expect(res.body).toEqual({ account: ACCOUNT, at: Date.UTC(2026, 0, 1) });
      expect(res.headers['x-audit']).toBe('ada object');
    });
  });

  test('the error handling script answers 200 with the APIError as JSON', async () => {
    const res = await request(app).get('/web0/api/shop/account/me?token=good&fail=1');
    expect(res.status).toBe(200);
    expect(res.headers['content-type']).toBe('application/json;charset=UTF-8');
    expect(JSON.parse(res.text)).toEqual({ requestId: res.headers['x-request-id'], message: 'no stock', code: 1001 });
  });

  test('File: a body saved with saveBodyAsFile into the local sandbox, sent inline or as an attachment (the default)', async () => {
    const url = `http://127.0.0.1:${upstream.address().port}/report`;
    const inline = await request(app).get('/web0/api/shop/report').query({ url, view: 'inline' }).buffer(true);
    expect(inline.status).toBe(200);
    expect(inline.headers['content-type']).toBe('application/pdf');
    expect(inline.headers['content-disposition']).toBe('inline; filename=report.pdf');
    expect(inline.body.toString()).toBe('%PDF-1.4 report');
    const download = await request(app).get('/web0/api/shop/report').query({ url });
    expect(download.headers['content-disposition']).toBe('attachment; filename=report.pdf');
    expect(fs.readFileSync(path.join(sandboxDir, engine, 'shop', 'reports', 'report.pdf'), 'utf8')).toBe('%PDF-1.4 report');
  });

  test('uploaded Parts: their fields, save, saveStorage and saveAttachment (a TableAttachment)', async () => {
    const res = await request(app).post('/web0/api/shop/upload').attach('file', Buffer.from('hello'), { filename: 'a.txt', contentType: 'text/plain' });
    expect(res.status).toBe(200);
    const [part] = res.body;
    expect(part).toMatchObject({ name: 'file', contentType: 'text/plain', size: 5, submittedFileName: 'a.txt', saved: { path: 'uploads/a.txt', size: 5 }, stored: { path: 'shared/a.txt', size: 5 } });
    expect(part.attachment).toEqual({ id: expect.any(String), name: 'a.txt', size: 5, contentType: 'text/plain', tableId: 'orders', fieldId: 'files', path: `attachments/orders/files/${part.attachment.id}/a.txt`, createTime: expect.any(Number) });
    expect(fs.readFileSync(path.join(sandboxDir, engine, 'shop', 'uploads', 'a.txt'), 'utf8')).toBe('hello');
    expect(fs.readFileSync(path.join(storageDir, engine, 'shop', 'shared', 'a.txt'), 'utf8')).toBe('hello');
  });

  test('Text: plain text, null gives an empty string; Redirect: 302 to the returned URL', async () => {
    const hello = await request(app).get('/web0/api/shop/hello?name=Ada');
    expect([hello.headers['content-type'], hello.text]).toEqual(['text/plain;charset=UTF-8', 'Hello Ada']);
    expect((await request(app).get('/web0/api/shop/hello')).text).toBe('');
    const go = await request(app).get('/web0/api/shop/go').redirects(0);
    expect([go.status, go.headers.location]).toEqual([302, 'https://example.com/next']);
  });

  test('rate limiting: the same IP may call once per second; another IP is limited separately', async () => {
    await request(app).get('/web0/api/shop/limited').set('X-Forwarded-For', '10.1.1.9'); // (the script compiled: the next calls come within the second)
    const first = await request(app).get('/web0/api/shop/limited').set('X-Forwarded-For', '10.1.1.1');
    const again = await request(app).get('/web0/api/shop/limited').set('X-Forwarded-For', '10.1.1.1');
    const other = await request(app).get('/web0/api/shop/limited').set('X-Forwarded-For', '10.1.1.2');
    expect([first.status, again.status, other.status]).toEqual([200, 429, 200]);
    expect(again.body).toEqual({ requestId: again.headers['x-request-id'], message: 'Too many requests', code: 270400 });
  });
});
