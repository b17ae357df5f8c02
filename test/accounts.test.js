'use strict';
// The `accounts` option behind platform.system.getAccountByToken(token): what the provider gets,
// what it must answer (an account object with a string id, or null / undefined for none), and
// what the script and the log see when it fails or answers something else.
const request = require('supertest');
const { makeApp } = require('./helpers/app');

/** Answers by token: the provider's answers the contract allows and those it does not. */
const ANSWERS = {
  good: () => ({ id: 'u1', userName: 'ada' }),
  none: () => null,
  undef: () => undefined,
  number: () => 42,
  string: () => 'u1',
  false: () => false,
  true: () => true,
  array: () => [{ id: 'u1' }],
  noId: () => ({ userName: 'ada' }),
  numericId: () => ({ id: 7 }),
  toJsonString: () => ({ toJSON: () => 'u1' }),
  throws: () => {
    throw new Error('db down');
  },
  rejectsText: () => Promise.reject('pool exhausted'),
  throwsBare: () => {
    throw Object.assign(Object.create(null), { reason: 'bare' });
  },
};

function setup(engine) {
  const lines = [];
  const logger = { info() {}, warn() {}, error: (message, meta) => lines.push({ message, meta }) };
  const accounts = { getAccountByToken: async (token) => ANSWERS[token]() };
  const { app, router } = makeApp({
    router: { accounts, engine, logger },
    apps: {
      app1: {
        scripts: {
          // the README's check: anything but null passes as an account
          'auth.js': `export function fn(ctx) {
            var account = platform.system.getAccountByToken(ctx.query.token);
            if (account == null) platform.app.abort('token expired or invalid', 401);
            return { account: account };
          }`,
        },
        apis: [{ path: 'p', call: { script: 'auth.js', function: 'fn' }, returnType: 'JSON' }],
      },
    },
  });
  return { app, router, lines };
}

describe('a lookup that fails', () => {
  let t;
  beforeAll(() => {
    t = setup('quickjs');
  });
  afterAll(() => t.router.close());

  test.each([
    ['throws', /Error: db down/],
    ['rejectsText', /pool exhausted/],
    ['throwsBare', /reason: 'bare'/],
  ])("(%s) is HOST_ERROR to the script; the log line has the request's id and the provider's reason", async (token, reason) => {
    const res = await request(t.app).get(`/web0/api/app1/p?token=${token}`);
    expect(res.status).toBe(500);
    expect(res.body).toEqual({ requestId: res.headers['x-request-id'], message: 'Account lookup failed', code: 270602 });
    const line = t.lines.find((l) => /accounts\.getAccountByToken failed/.test(l.message));
    expect(line.meta).toEqual({ appId: 'app1', requestId: res.headers['x-request-id'] });
    expect(line.message).toMatch(reason);
    t.lines.length = 0;
  });
});

describe.each(['quickjs', 'vm2'])('accounts.getAccountByToken answers (%s)', (engine) => {
  let t;
  beforeAll(() => {
    t = setup(engine);
  });
  afterAll(() => t.router.close());

  test('an account object reaches the script; null and undefined are no account', async () => {
    const good = await request(t.app).get('/web0/api/app1/p?token=good');
    expect([good.status, good.body]).toEqual([200, { account: { id: 'u1', userName: 'ada' } }]);
    for (const token of ['none', 'undef']) {
      const res = await request(t.app).get(`/web0/api/app1/p?token=${token}`);
      expect([token, res.status, res.body.code]).toEqual([token, 401, 270001]);
    }
  });

  test.each(['number', 'string', 'false', 'true', 'array', 'noId', 'numericId', 'toJsonString'])(
    'an answer that is no account (%s) is HOST_ERROR, logged naming the provider; the script never sees it',
    async (token) => {
      const res = await request(t.app).get(`/web0/api/app1/p?token=${token}`);
      expect(res.status).toBe(500);
      expect(res.body).toEqual({ requestId: res.headers['x-request-id'], message: 'Account lookup failed', code: 270602 });
      const line = t.lines.find((l) => l.meta?.requestId === res.headers['x-request-id'] && /accounts\.getAccountByToken/.test(l.message));
      expect(line?.message).toMatch(/accounts\.getAccountByToken returned .*not an account/);
    },
  );
});

// A lookup that never answers ends its call at scriptTimeoutMs (SCRIPT_TIMEOUT); the failure line
// names the stage and script that were waiting on it (the worker goes on: no stage is unknown).
describe.each(['quickjs', 'vm2'])('a lookup that never answers (%s)', (engine) => {
  const lines = [];
  const logger = { info() {}, warn() {}, error: (message, meta) => lines.push({ message, meta }) };
  const accounts = { getAccountByToken: () => new Promise(() => {}) };
  const { app, router } = makeApp({
    router: { accounts, engine, logger, scriptTimeoutMs: 1000 },
    apps: {
      app1: {
        scripts: {
          'auth.js': 'export function check(ctx) { platform.system.getAccountByToken(ctx.query.token) }',
          'main.js': 'export function fn(ctx) { return platform.system.getAccountByToken(ctx.query.token) }\nexport function ok(ctx) { return 1 }',
        },
        apis: [
          { path: 'before', before: { script: 'auth.js', function: 'check' }, call: { script: 'main.js', function: 'ok' }, returnType: 'JSON' },
          { path: 'call', call: { script: 'main.js', function: 'fn' }, returnType: 'JSON' },
        ],
      },
    },
  });
  afterAll(() => router.close());

  test.each([
    ['before', 'auth.js'],
    ['call', 'main.js'],
  ])('in %s: SCRIPT_TIMEOUT, logged at that stage and script', async (path, script) => {
    const res = await request(app).get(`/web0/api/app1/${path}?token=t`);
    expect([res.status, res.body.code]).toEqual([500, 270200]);
    const line = lines.find((l) => l.meta?.requestId === res.headers['x-request-id']);
    expect(line.meta).toMatchObject({ stage: path, script, code: 270200 });
  });
});

// The service is told which app asks (the same service serves every app): one whose apps have
// their own users answers null for another app's token. Its `signal` aborts when the call ends.
describe.each(['quickjs', 'vm2'])('what the service is given (%s)', (engine) => {
  const USERS = { app1: { t1: { id: 'u1' } }, app2: { t2: { id: 'u2' } } };
  const asked = [];
  const accounts = {
    getAccountByToken: (token, lookup) => {
      asked.push({ token, lookup });
      if (token === 'hang') return new Promise(() => {});
      return (lookup && Object.hasOwn(USERS, lookup.appId) && Object.hasOwn(USERS[lookup.appId], token) && USERS[lookup.appId][token]) || null;
    },
  };
  const app = (id) => ({
    scripts: { 's.js': 'export function fn(ctx) { return { account: platform.system.getAccountByToken(ctx.query.token) } }' },
    apis: [{ path: 'who', call: { script: 's.js', function: 'fn' }, returnType: 'JSON' }],
  });
  const t = makeApp({ router: { accounts, engine, logger: false, scriptTimeoutMs: 1000 }, apps: { app1: app('app1'), app2: app('app2') } });
  afterAll(() => t.router.close());

  test("the asking app's id, the request's id and preview: another app's token is no account there", async () => {
    const own = await request(t.app).get('/web0/api/app1/who?token=t1');
    expect([own.status, own.body]).toEqual([200, { account: { id: 'u1' } }]);
    const other = await request(t.app).get('/web0/api/app2/who?token=t1');
    expect([other.status, other.body]).toEqual([200, { account: null }]);
    expect(asked[1].lookup).toMatchObject({ appId: 'app2', requestId: other.headers['x-request-id'], preview: false });
  });

  test('its signal aborts when the call ends (a lookup that never answers, past scriptTimeoutMs)', async () => {
    const res = await request(t.app).get('/web0/api/app1/who?token=hang');
    expect(res.body.code).toBe(270200);
    const { lookup } = asked.find((a) => a.token === 'hang');
    if (!lookup.signal.aborted) await new Promise((resolve) => lookup.signal.addEventListener('abort', resolve));
    expect(lookup.signal.aborted).toBe(true);
    // (the reason a fetch or stream given the signal rejects with, as for a bare abort())
    expect(lookup.signal.reason).toBeInstanceOf(DOMException);
    expect(lookup.signal.reason.name).toBe('AbortError');
  });
});
