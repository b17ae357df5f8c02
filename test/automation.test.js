'use strict';
// Automations run by the host's own `automations` runner (it replaces the built-in interpreter).
const request = require('supertest');
const { makeApp } = require('./helpers/app');

const calls = [];
const runner = {
  async run(inv) {
    calls.push(inv);
    if (inv.automation.id === 'broken') throw Object.assign(new Error('automation failed'), { code: 777 });
    if (inv.automation.id === 'status') throw Object.assign(new Error('upstream said no'), { status: Number(inv.input.request.query.s), code: Number(inv.input.request.query.c) });
    if (inv.automation.id === 'keep') return inv.input.request.query.v === 'null' ? null : undefined;
    if (inv.stage === 'after') return { audited: inv.input.result, user: inv.input.attributes.user };
    return { automation: inv.automation.id, q: inv.input.request.query.q, at: inv.input.request.path };
  },
};

// (definitions in MemoryRegistry are validated as the built-in format even when a host runner runs them)
const steps = [{ type: 'return', value: "'built-in'" }];
const apps = {
  app1: {
    scripts: { 'h.js': 'export function b(ctx) { ctx.request.setAttribute("user", "ada") }\nexport function main() { return { fromScript: true } }' },
    automations: [{ id: 'report', steps }, { id: 'broken', steps }, { id: 'status', steps }, { id: 'keep', steps }],
    apis: [
      { path: 'auto', call: { automation: 'report' }, returnType: 'JSON' },
      { path: 'auto-after', call: { script: 'h.js', function: 'main' }, after: { automation: 'report' }, before: { script: 'h.js', function: 'b' }, returnType: 'JSON' },
      { path: 'keep-after', call: { script: 'h.js', function: 'main' }, after: { automation: 'keep' }, returnType: 'JSON' },
      { path: 'broken', call: { automation: 'broken' }, returnType: 'JSON' },
      { path: 'status', call: { automation: 'status' }, returnType: 'JSON' },
      { path: 'unknown', call: { automation: 'nope' }, returnType: 'JSON' },
    ],
  },
};

const { app, router } = makeApp({ apps, router: { automations: runner } });
const builtIn = makeApp({ apps });
const noLookup = makeApp({
  registry: { getApi: () => ({ path: 'p', call: { automation: 'report' }, returnType: 'JSON' }), getScript: () => undefined },
  router: { automations: runner },
});
afterAll(() => Promise.all([router.close(), builtIn.router.close(), noLookup.router.close()]));

test('an automation as the call: the host runner gets the definition and its result is the response', async () => {
  const res = await request(app).get('/web0/api/app1/auto?q=x');
  expect(res.status).toBe(200);
  expect(res.body).toEqual({ automation: 'report', q: 'x', at: 'auto' });
  expect(calls.at(-1)).toMatchObject({ appId: 'app1', stage: 'call', requestId: res.headers['x-request-id'], automation: { id: 'report', steps } });
});

test('an automation as the after hook sees the result and the attributes', async () => {
  const res = await request(app).get('/web0/api/app1/auto-after');
  expect(res.body).toEqual({ audited: { fromScript: true }, user: 'ada' });
});

test("as the after hook, a runner's undefined or null keeps the call's result (undefined crosses as JSON null)", async () => {
  for (const v of ['undefined', 'null']) {
    const res = await request(app).get(`/web0/api/app1/keep-after?v=${v}`);
    expect({ v, status: res.status, body: res.body }).toEqual({ v, status: 200, body: { fromScript: true } });
  }
});

test('a failing runner gives the error body with its code', async () => {
  const res = await request(app).get('/web0/api/app1/broken');
  expect(res.status).toBe(500);
  expect(res.body).toMatchObject({ message: 'automation failed', code: 777 });
});

test("a runner's error keeps an error status (400-599) and an integer code; any other status is 500, any other code the script error's", async () => {
  const kept = await request(app).get('/web0/api/app1/status?s=404&c=12');
  expect(kept.status).toBe(404);
  expect(kept.body).toEqual({ requestId: kept.headers['x-request-id'], message: 'upstream said no', code: 12 });
  for (const [s, c] of [[101, 'NaN'], [204, '1.5'], [302, 'NaN'], [304, '1.5'], [200, 'NaN']]) {
    const res = await request(app).get(`/web0/api/app1/status?s=${s}&c=${c}`).redirects(0);
    expect({ s, status: res.status, type: res.headers['content-type'] }).toEqual({ s, status: 500, type: 'application/json;charset=UTF-8' });
    expect(res.body).toEqual({ requestId: res.headers['x-request-id'], message: 'upstream said no', code: 270000 });
  }
});

test("an unknown automation is not found in the app (270603); a registry without getAutomation cannot load one (501)", async () => {
  const unknown = await request(app).get('/web0/api/app1/unknown');
  expect(unknown.status).toBe(500);
  expect(unknown.body).toMatchObject({ code: 270603, message: "Automation 'nope' not found in app 'app1'" });
  const none = await request(noLookup.app).get('/web0/api/a/p');
  expect(none.status).toBe(501);
  expect(none.body).toMatchObject({ code: 270601, message: expect.stringMatching(/no getAutomation/) });
});

test('without a runner, the built-in interpreter runs the same definitions', async () => {
  const res = await request(builtIn.app).get('/web0/api/app1/auto');
  expect(res.status).toBe(200);
  expect(res.body).toBe('built-in');
  const unknown = await request(builtIn.app).get('/web0/api/app1/unknown');
  expect(unknown.body).toMatchObject({ code: 270603, message: "Automation 'nope' not found in app 'app1'" });
});

test("a registry whose getAutomation fails: HOST_ERROR without its message (logged), with the host's runner as with the built-in interpreter", async () => {
  const failing = {
    getApi: (_app, path) => ({ path, call: { automation: 'report' }, returnType: 'JSON' }),
    getScript: () => undefined,
    getAutomation: async () => {
      throw new Error('connect ECONNREFUSED 10.1.2.3:5432 (db tenants)');
    },
  };
  const logged = [];
  const logger = { info() {}, warn() {}, error: (m) => logged.push(String(m)) };
  for (const router of [{ automations: runner, logger }, { logger }]) {
    const host = makeApp({ registry: failing, router });
    try {
      const res = await request(host.app).get('/web0/api/a/p');
      expect(res.status).toBe(500);
      expect(res.body).toEqual({ requestId: res.headers['x-request-id'], message: 'A host service failed', code: 270602 });
    } finally {
      await host.router.close();
    }
  }
  expect(logged.filter((m) => m.includes('ECONNREFUSED 10.1.2.3')).length).toBe(2);
});

test("a request runs one version of its app: the host runner gets the automation as it was when the request's scripts were read, not one changed while the before script ran", async () => {
  const { MemoryRegistry } = require('..');
  const version = (v) => ({
    scripts: { 'b.js': `export function b(ctx) { platform.system.getAccountByToken('t'); ctx.request.setAttribute('v', '${v}') }` },
    automation: { id: 'report', name: v, steps },
  });
  const registry = new MemoryRegistry({
    apps: { app1: { scripts: version('v1').scripts, automations: [version('v1').automation], apis: [{ path: 'p', before: { script: 'b.js', function: 'b' }, call: { automation: 'report' }, returnType: 'JSON' }] } },
  });
  let reached;
  const inBefore = new Promise((r) => (reached = r));
  let release;
  const gate = new Promise((r) => (release = r));
  const accounts = {
    async getAccountByToken() {
      reached();
      await gate;
      return null;
    },
  };
  const seen = { async run(inv) { return { automation: inv.automation.name, before: inv.input.attributes.v } } };
  const host = makeApp({ registry, router: { automations: seen, accounts } });
  try {
    const answer = request(host.app).get('/web0/api/app1/p').then((r) => r);
    await inBefore; // (the before script of v1 is running: a deploy of v2 lands now)
    registry.putScript('app1', 'b.js', version('v2').scripts['b.js']).putAutomation('app1', version('v2').automation);
    release();
    const res = await answer;
    expect(res.status).toBe(200);
    expect(res.body).toEqual({ automation: 'v1', before: 'v1' });
    const next = await request(host.app).get('/web0/api/app1/p');
    expect(next.body).toEqual({ automation: 'v2', before: 'v2' });
  } finally {
    await host.router.close();
  }
});
