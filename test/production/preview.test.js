'use strict';
// The preview path serves an app's unpublished definitions and scripts, only to requests the
// host's authorize(req) accepts.
const request = require('supertest');
const express = require('express');
const { createApiRouter, MemoryRegistry } = require('../..');

const routers = [];
afterAll(() => Promise.all(routers.map((r) => r.close())));

const LIVE = 'export function fn(ctx) { return { version: "live", servletPath: ctx.request.getServletPath() } }';
const DRAFT = 'export function fn(ctx) { return { version: "draft", servletPath: ctx.request.getServletPath() } }';
const api = (path, script = 'main.js', extra = {}) => ({ path, call: { script, function: 'fn' }, returnType: 'JSON', ...extra });

function setup(routerOptions) {
  const registry = new MemoryRegistry({ apps: { app1: { scripts: { 'main.js': LIVE, 'other.js': 'export function fn() { return "unchanged" }' }, apis: [api('orders'), api('other', 'other.js')] } } });
  registry.putScript('app1', 'main.js', DRAFT, { stage: 'preview' });
  registry.putScript('app1', 'new.js', 'export function fn() { return "new api" }', { stage: 'preview' });
  registry.putApi('app1', api('brand-new', 'new.js'), { stage: 'preview' });
  const router = createApiRouter({ registry, workers: 1, ...routerOptions });
  routers.push(router);
  const app = express();
  app.use('/web0/api', router);
  return { app, registry, router };
}

const authorize = (req) => req.get('x-preview-token') === 'letmein';

test('preview and published versions side by side, never mixed (alternating requests on one worker)', async () => {
  const { app } = setup({ preview: { authorize } });
  for (let i = 0; i < 2; i++) {
    const live = await request(app).get('/web0/api/app1/orders');
    expect(live.body).toEqual({ version: 'live', servletPath: '/app1' });
    const draft = await request(app).get('/web0/api/preview/app1/orders').set('x-preview-token', 'letmein');
    expect(draft.body).toEqual({ version: 'draft', servletPath: '/preview/app1' });
  }
  // unchanged entries preview as they are live; new ones exist only in preview
  expect((await request(app).get('/web0/api/preview/app1/other').set('x-preview-token', 'letmein')).body).toBe('unchanged');
  expect((await request(app).get('/web0/api/preview/app1/brand-new').set('x-preview-token', 'letmein')).body).toBe('new api');
  expect((await request(app).get('/web0/api/app1/brand-new')).status).toBe(404);
});

test('a request authorize() refuses gets 403 PREVIEW_FORBIDDEN with the error body; an async authorize works', async () => {
  const { app } = setup({ preview: { authorize: async (req) => authorize(req) } });
  const res = await request(app).get('/web0/api/preview/app1/orders');
  expect(res.status).toBe(403);
  expect(res.body).toEqual({ requestId: res.headers['x-request-id'], message: 'Preview not allowed', code: 270105 });
  const wrong = await request(app).get('/web0/api/preview/app1/orders').set('x-preview-token', 'nope');
  expect(wrong.status).toBe(403);
});

test('off by default: /preview/... is an app named "preview"', async () => {
  const { app } = setup({});
  const res = await request(app).get('/web0/api/preview/app1/orders').set('x-preview-token', 'letmein');
  expect(res.status).toBe(404);
  expect(res.body.message).toBe("No API 'app1/orders' in app 'preview'");
});

test('the preview segment is read as the app id is, decoded and past empty segments: an app named like it stays unreachable (%70review, //preview)', async () => {
  const { app, registry } = setup({ preview: { authorize } });
  registry.putScript('preview', 'main.js', LIVE).putApi('preview', api('orders'));
  for (const url of ['/web0/api/%70review/orders', '/web0/api//preview/orders', '/web0/api/preview/orders']) {
    const res = await request(app).get(url);
    expect([url, res.status, res.body.code]).toEqual([url, 403, 270105]);
  }
  for (const url of ['/web0/api/%70review/app1/orders', '/web0/api//preview//app1/orders']) {
    const res = await request(app).get(url).set('x-preview-token', 'letmein');
    expect([url, res.status, res.body]).toEqual([url, 200, { version: 'draft', servletPath: '/preview/app1' }]);
  }
  // (an app id with an encoded slash is not the preview segment)
  const slash = await request(app).get('/web0/api/preview%2Fapp1/orders');
  expect([slash.status, slash.body.message]).toEqual([404, "No API 'orders' in app 'preview/app1'"]);
});

test('publish() makes the preview live and empties the preview stage', async () => {
  const { app, registry } = setup({ preview: { authorize } });
  expect(registry.publish('app1')).toBe(true);
  expect((await request(app).get('/web0/api/app1/orders')).body.version).toBe('draft');
  expect((await request(app).get('/web0/api/app1/brand-new')).body).toBe('new api');
  expect(registry.publish('app1')).toBe(false);
  expect(registry.listApis('app1', { stage: 'preview' }).map((d) => d.path).sort()).toEqual(['brand-new', 'orders', 'other']);
});

test('automations are looked up in the stage of the request', async () => {
  const registry = new MemoryRegistry({ apps: { app1: { apis: [{ path: 'auto', call: { automation: 'a1' }, returnType: 'JSON' }], automations: [{ id: 'a1', description: 'live', steps: [] }] } } });
  registry.putAutomation('app1', { id: 'a1', description: 'draft', steps: [] }, { stage: 'preview' });
  const router = createApiRouter({ registry, workers: 1, preview: { authorize: () => true }, automations: { run: (inv) => inv.automation.description } });
  routers.push(router);
  const app = express().use('/api', router);
  expect((await request(app).get('/api/app1/auto')).body).toBe('live');
  expect((await request(app).get('/api/preview/app1/auto')).body).toBe('draft');
});

test('a custom automations runner is told which stage it runs for (invocation.preview)', async () => {
  const registry = new MemoryRegistry({ apps: { app1: { apis: [{ path: 'auto', call: { automation: 'a1' }, returnType: 'JSON' }], automations: [{ id: 'a1', steps: [] }] } } });
  // (a runner that runs the definition's steps, or scripts they name, picks them from the same stage)
  const router = createApiRouter({ registry, workers: 1, preview: { authorize: () => true }, automations: { run: (inv) => ({ preview: inv.preview }) } });
  routers.push(router);
  const app = express().use('/api', router);
  expect((await request(app).get('/api/app1/auto')).body).toEqual({ preview: false });
  expect((await request(app).get('/api/preview/app1/auto')).body).toEqual({ preview: true });
});

test('a custom registry receives the stage as the last argument', async () => {
  const seen = [];
  const registry = {
    getApi: (appId, path, stage) => (seen.push(['api', stage]), api(path)),
    getScript: (appId, name, stage) => (seen.push(['script', stage]), stage === 'preview' ? DRAFT : LIVE),
  };
  const router = createApiRouter({ registry, workers: 1, preview: { authorize: () => true, segment: '_draft' } });
  routers.push(router);
  const app = express().use('/api', router);
  expect((await request(app).get('/api/_draft/app1/x')).body.version).toBe('draft');
  expect((await request(app).get('/api/app1/x')).body.version).toBe('live');
  expect(seen).toEqual([['api', 'preview'], ['script', 'preview'], ['api', 'published'], ['script', 'published']]);
});

test('preview options are checked: authorize is required', () => {
  const registry = new MemoryRegistry();
  expect(() => createApiRouter({ registry, preview: true })).toThrow(/invalid preview: must be/);
  expect(() => createApiRouter({ registry, preview: {} })).toThrow(/invalid preview\.authorize: .*must not be public/);
  expect(() => createApiRouter({ registry, preview: { authorize, segment: 'a/b' } })).toThrow(/invalid preview\.segment/);
  // (clients remove '.' and '..' segments from a URL: such a preview path would never arrive)
  for (const segment of ['.', '..']) expect(() => createApiRouter({ registry, preview: { authorize, segment } })).toThrow(/invalid preview\.segment/);
  expect(() => registry.putApi('a', api('p'), { stage: 'draft' })).toThrow(/invalid stage/);
});

test("MemoryRegistry refuses a stage option that is not { stage } (the write went to the published stage, live at once)", () => {
  const registry = new MemoryRegistry({ apps: { app1: { scripts: { 'main.js': LIVE }, apis: [api('orders')] } } });
  const bad = [
    ['preview', /invalid options: must be \{ stage: 'published' \| 'preview' \}.*got "preview"/], // (DirectoryRegistry's methods take the stage so)
    [{ stge: 'preview' }, /invalid stge: is not an option \(did you mean 'stage'\?\)/],
    [null, /invalid options: must be \{ stage/],
    [['preview'], /invalid options: must be \{ stage/],
  ];
  for (const [options, message] of bad) {
    expect(() => registry.putApi('app1', api('draft'), options)).toThrow(message);
    expect(() => registry.putScript('app1', 'draft.js', DRAFT, options)).toThrow(message);
    expect(() => registry.putAutomation('app1', { id: 'a1', steps: [] }, options)).toThrow(message);
    expect(() => registry.removeApi('app1', 'orders', options)).toThrow(message);
    expect(() => registry.removeScript('app1', 'main.js', options)).toThrow(message);
    expect(() => registry.removeApp('app1', options)).toThrow(message);
    expect(() => registry.listApis('app1', options)).toThrow(message);
  }
  // nothing reached the published stage, nor left it
  expect(registry.getApi('app1', 'draft')).toBeUndefined();
  expect(registry.getScript('app1', 'draft.js')).toBeUndefined();
  expect(registry.getAutomation('app1', 'a1')).toBeUndefined();
  expect(registry.getApi('app1', 'orders')).toBeDefined();
  expect(registry.getScript('app1', 'main.js')).toBe(LIVE);
  // what is given right still works
  registry.putApi('app1', api('draft'), { stage: 'preview' });
  expect(registry.getApi('app1', 'draft')).toBeUndefined();
  expect(registry.getApi('app1', 'draft', 'preview')).toBeDefined();
  registry.putApi('app1', api('live'), {});
  registry.putApi('app1', api('live2'), { stage: undefined });
  expect(registry.listApis('app1').map((d) => d.path).sort()).toEqual(['live', 'live2', 'orders']);
});

describe.each(['quickjs', 'vm2'])('module state is the stage\'s own (%s)', (engine) => {
  test('a script unchanged in preview keeps separate module state for preview and live calls', async () => {
    const COUNTER = 'let calls = 0; export function fn(ctx) { calls++; return { calls } }';
    const registry = new MemoryRegistry({ apps: { app1: { scripts: { 'count.js': COUNTER }, apis: [api('count', 'count.js')] } } });
    const router = createApiRouter({ registry, workers: 1, engine, preview: { authorize: () => true } });
    routers.push(router);
    const app = express().use('/api', router);
    // the preview stage shows the published script as it is (same source): still its own context
    expect((await request(app).get('/api/app1/count')).body).toEqual({ calls: 1 });
    expect((await request(app).get('/api/preview/app1/count')).body).toEqual({ calls: 1 });
    expect((await request(app).get('/api/preview/app1/count')).body).toEqual({ calls: 2 });
    expect((await request(app).get('/api/app1/count')).body).toEqual({ calls: 2 });
  });
});

test("a preview script's console lines say so (preview: true), as its failure lines do", async () => {
  const lines = [];
  const logger = { info: (m, meta) => lines.push({ m, meta }), warn: (m, meta) => lines.push({ m, meta }), error: (m, meta) => lines.push({ m, meta }) };
  const registry = new MemoryRegistry({ apps: { app1: { scripts: { 'log.js': 'export function fn(ctx) { console.log("hi"); return 1 }' }, apis: [api('log', 'log.js')] } } });
  const router = createApiRouter({ registry, workers: 1, logger, preview: { authorize: () => true } });
  routers.push(router);
  const app = express().use('/api', router);
  const live = await request(app).get('/api/app1/log').expect(200);
  const draft = await request(app).get('/api/preview/app1/log').expect(200);
  const of = (res) => lines.find((l) => l.meta?.requestId === res.headers['x-request-id'] && /hi$/.test(l.m));
  expect(of(live).meta).toEqual({ appId: 'app1', script: 'log.js', requestId: live.headers['x-request-id'] });
  expect(of(live).m).toBe('[app1/log.js] hi');
  expect(of(draft).meta).toEqual({ appId: 'app1', script: 'log.js', requestId: draft.headers['x-request-id'], preview: true });
  expect(of(draft).m).toBe('[preview/app1/log.js] hi');
});
