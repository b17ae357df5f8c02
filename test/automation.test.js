'use strict';
// Automations as the call or the after hook, run by the host's `automations` runner.
const request = require('supertest');
const { makeApp } = require('./helpers/app');

const calls = [];
const runner = {
  async run(inv) {
    calls.push(inv);
    if (inv.automation.fail) throw Object.assign(new Error('automation failed'), { code: 777 });
    if (inv.stage === 'after') return { audited: inv.input.result, user: inv.input.attributes.user };
    return { automation: inv.automation.id, q: inv.input.request.query.q, at: inv.input.request.path };
  },
};

const apps = {
  app1: {
    scripts: { 'h.js': 'export function b(ctx) { ctx.request.setAttribute("user", "ada") }\nexport function main() { return { fromScript: true } }' },
    automations: [{ id: 'report' }, { id: 'broken', fail: true }],
    apis: [
      { path: 'auto', call: { automation: 'report' }, returnType: 'JSON' },
      { path: 'auto-after', call: { script: 'h.js', function: 'main' }, after: { automation: 'report' }, before: { script: 'h.js', function: 'b' }, returnType: 'JSON' },
      { path: 'broken', call: { automation: 'broken' }, returnType: 'JSON' },
      { path: 'unknown', call: { automation: 'nope' }, returnType: 'JSON' },
    ],
  },
};

const { app, router } = makeApp({ apps, router: { automations: runner } });
const bare = makeApp({ apps });
afterAll(() => Promise.all([router.close(), bare.router.close()]));

test('an automation as the call: its result is the response', async () => {
  const res = await request(app).get('/web0/api/app1/auto?q=x');
  expect(res.status).toBe(200);
  expect(res.body).toEqual({ automation: 'report', q: 'x', at: 'auto' });
  expect(calls.at(-1)).toMatchObject({ appId: 'app1', stage: 'call', requestId: res.headers['x-request-id'] });
});

test('an automation as the after hook sees the result and the attributes', async () => {
  const res = await request(app).get('/web0/api/app1/auto-after');
  expect(res.body).toEqual({ audited: { fromScript: true }, user: 'ada' });
});

test('a failing automation gives the error body with its code', async () => {
  const res = await request(app).get('/web0/api/app1/broken');
  expect(res.status).toBe(500);
  expect(res.body).toMatchObject({ message: 'automation failed', code: 777 });
});

test('an unknown automation, or no runner: 501 AUTOMATION_UNAVAILABLE', async () => {
  const unknown = await request(app).get('/web0/api/app1/unknown');
  expect(unknown.status).toBe(501);
  expect(unknown.body.code).toBe(270601);
  const noRunner = await request(bare.app).get('/web0/api/app1/auto');
  expect(noRunner.status).toBe(501);
  expect(noRunner.body.message).toMatch(/automations/);
});
