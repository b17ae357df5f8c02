'use strict';
// Values from the host's own services (accounts, attachments, an automations runner) reach the
// sandbox as JSON: Dates as ms timestamps (the spec's Account has createTime/updateTime as integer
// timestamps, and a JSON result's dates are integers), BigInts as numbers; a value JSON cannot
// hold (a cycle) fails that call with HOST_ERROR, and the host and the other calls go on.
const request = require('supertest');
const { makeApp } = require('./helpers/app');

const CREATED = Date.UTC(2026, 0, 5);
const accounts = {
  getAccountByToken: async (token) => {
    if (token === 'date') return { id: 'u1', name: 'Ada', createTime: new Date(CREATED), updateTime: new Date(CREATED + 1) };
    if (token === 'bigint') return { id: 'u2', companyId: 42n };
    if (token === 'cycle') {
      const account = { id: 'u3' };
      account.self = account;
      return account;
    }
    await new Promise((resolve) => setTimeout(resolve, 50));
    return { id: token };
  },
};
const runner = {
  async run(inv) {
    const q = inv.input.request.query.v;
    if (q === 'objectMessage') throw { message: { detail: 'x' }, code: 5 };
    if (q === 'bigintMessage') throw { message: 10n };
    if (q === 'bare') throw Object.create(null);
    if (q === 'cycle') {
      const out = { n: 1 };
      out.self = out;
      return out;
    }
    return { at: new Date(CREATED), n: 7n };
  },
};
const attachments = { save: async (appId, tableId, fieldId, file) => ({ id: 'a1', name: file.fileName, createTime: new Date(CREATED) }) };

const { app, router } = makeApp({
  router: { accounts, automations: runner, attachments },
  apps: {
    app1: {
      scripts: {
        'a.js': `export function fn(ctx) {
          var account = platform.system.getAccountByToken(ctx.query.token);
          return { account: account, type: typeof account.createTime, isNumber: typeof account.companyId };
        }
        export function attach(ctx) { var a = ctx.getParts()[0].saveAttachment('t1', 'f1'); return { a: a, type: typeof a.createTime } }`,
      },
      automations: [{ id: 'auto', steps: [{ type: 'return', value: null }] }],
      apis: [
        { path: 'account', call: { script: 'a.js', function: 'fn' }, returnType: 'JSON' },
        { path: 'attach', call: { script: 'a.js', function: 'attach' }, returnType: 'JSON' },
        { path: 'auto', call: { automation: 'auto' }, returnType: 'JSON' },
      ],
    },
  },
});
afterAll(() => router.close());

test("an account's Date fields reach the script as integer timestamps", async () => {
  const res = await request(app).get('/web0/api/app1/account?token=date');
  expect(res.status).toBe(200);
  expect(res.body).toEqual({ account: { id: 'u1', name: 'Ada', createTime: CREATED, updateTime: CREATED + 1 }, type: 'number', isNumber: 'undefined' });
});

test('an account with a BigInt: a number; one with a cycle: HOST_ERROR for that call, the host and the calls beside it go on', async () => {
  const big = await request(app).get('/web0/api/app1/account?token=bigint');
  expect(big.status).toBe(200);
  expect(big.body.account).toEqual({ id: 'u2', companyId: 42 });
  const [before, cycle, after] = await Promise.all(['ok1', 'cycle', 'ok2'].map((t) => request(app).get(`/web0/api/app1/account?token=${t}`)));
  expect([before.status, before.body.account]).toEqual([200, { id: 'ok1' }]);
  expect([after.status, after.body.account]).toEqual([200, { id: 'ok2' }]);
  expect(cycle.status).toBe(500);
  expect(cycle.body).toEqual({ requestId: cycle.headers['x-request-id'], message: 'Account lookup failed', code: 270602 });
});

test("an automations runner's result: Dates as integer timestamps, BigInts as numbers; a cycle is HOST_ERROR", async () => {
  const res = await request(app).get('/web0/api/app1/auto');
  expect([res.status, res.body]).toEqual([200, { at: CREATED, n: 7 }]);
  const cycle = await request(app).get('/web0/api/app1/auto?v=cycle');
  expect(cycle.status).toBe(500);
  expect(cycle.body.code).toBe(270602);
});

test("an attachments service's record: its Date as an integer timestamp", async () => {
  const res = await request(app).post('/web0/api/app1/attach').attach('f', Buffer.from('abc'), 'a.txt');
  expect(res.status).toBe(200);
  expect(res.body).toEqual({ a: { id: 'a1', name: 'a.txt', createTime: CREATED }, type: 'number' });
});

test("a runner's error that is not an Error: the body's message is a string, and the host and the calls beside it go on", async () => {
  const [objectMessage, bigintMessage, bare, ok] = await Promise.all(
    ['objectMessage', 'bigintMessage', 'bare', 'ok'].map((v) => request(app).get(`/web0/api/app1/auto?v=${v}`)),
  );
  expect([objectMessage.status, objectMessage.body]).toEqual([500, { requestId: objectMessage.headers['x-request-id'], message: '[object Object]', code: 5 }]);
  expect([bigintMessage.status, bigintMessage.body]).toEqual([500, { requestId: bigintMessage.headers['x-request-id'], message: '10', code: 270000 }]);
  expect(bare.status).toBe(500);
  expect(typeof bare.body.message).toBe('string');
  expect([ok.status, ok.body]).toEqual([200, { at: CREATED, n: 7 }]);
});

test('a registry that throws something other than an Error (an object without a prototype): HOST_ERROR, and the host goes on', async () => {
  const built = makeApp({
    registry: {
      getApi: (appId, path) => {
        if (path === 'bare') throw Object.create(null);
        return { path, call: { script: 'a.js', function: 'fn' }, returnType: 'JSON' };
      },
      getScript: () => 'export function fn() { return { ok: true } }',
    },
  });
  try {
    // (before, String() of the thrown value threw in the failure log: the request was never answered)
    const [bare, ok] = await Promise.all([request(built.app).get('/web0/api/app1/bare').timeout(10000), request(built.app).get('/web0/api/app1/ok').timeout(10000)]);
    expect([bare.status, bare.body]).toEqual([500, { requestId: bare.headers['x-request-id'], message: 'A host service failed', code: 270602 }]);
    expect([ok.status, ok.body]).toEqual([200, { ok: true }]);
  } finally {
    await built.router.close({ force: true });
  }
});
