'use strict';
// The package as a stranger installs it: require and import entries, Express 4 and 5, typings.
const { execFileSync } = require('node:child_process');
const fs = require('node:fs');
const path = require('node:path');
const request = require('supertest');
const { makeApp } = require('./helpers/app');

const root = path.join(__dirname, '..');

test('require("scriptable-api") and import both load the same API', () => {
  const cjs = require('scriptable-api');
  expect(typeof cjs.createApiRouter).toBe('function');
  expect(typeof cjs.MemoryRegistry).toBe('function');
  expect(typeof cjs.RedisRateLimitStore).toBe('function');
  const out = execFileSync(process.execPath, ['--input-type=module', '-e', `
    import { createApiRouter, MemoryRegistry, ERRORS } from 'scriptable-api';
    import def from 'scriptable-api';
    console.log(typeof createApiRouter, typeof MemoryRegistry, ERRORS.ABORTED.code, def.createApiRouter === createApiRouter);
  `], { cwd: root, encoding: 'utf8' });
  expect(out.trim()).toBe('function function 270001 true');
});

test('the exports map ships type declarations for both entries', () => {
  const pkg = require('../package.json');
  for (const cond of ['import', 'require']) {
    const types = pkg.exports['.'][cond].types;
    expect(fs.existsSync(path.join(root, types))).toBe(true);
  }
  expect(pkg.engines.node).toBe('>=20');
  expect(pkg.peerDependencies.express).toMatch(/\^4.*\^5/);
});

describe.each([4, 5])('mounted in an Express %i app', (major) => {
  const apps = {
    app1: {
      scripts: { 'main.js': 'export function fn(ctx) { return { q: ctx.query, method: ctx.method, body: ctx.body } }' },
      apis: [{ path: 'a/b', call: { script: 'main.js', function: 'fn' }, returnType: 'JSON' }],
    },
  };
  const { app, router } = makeApp({ express: major, apps });
  afterAll(() => router.close());

  test('serves a nested API path with a query and a body', async () => {
    const res = await request(app).post('/web0/api/app1/a/b?x=1&x=2').set('content-type', 'application/json').send('{"a":1}');
    expect(res.status).toBe(200);
    expect(res.body).toEqual({ q: { x: ['1', '2'] }, method: 'POST', body: '{"a":1}' });
  });

  test('works behind a host body parser', async () => {
    const parsed = makeApp({ express: major, apps, setup: (a) => a.use(require(major === 4 ? 'express4' : 'express').json()) });
    try {
      const res = await request(parsed.app).post('/web0/api/app1/a/b').send({ a: 1 });
      expect(res.body.body).toBe('{"a":1}');
    } finally {
      await parsed.router.close();
    }
  });
});

test('invalid options fail at startup with the field named', () => {
  const { createApiRouter, MemoryRegistry } = require('scriptable-api');
  expect(() => createApiRouter()).toThrow(/options/);
  expect(() => createApiRouter({})).toThrow(/invalid registry/);
  expect(() => createApiRouter({ registry: new MemoryRegistry(), scriptTimeoutMs: -1 })).toThrow(/invalid scriptTimeoutMs/);
  expect(() => createApiRouter({ registry: new MemoryRegistry(), engine: 'v8' })).toThrow(/invalid engine/);
  expect(() => createApiRouter({ registry: new MemoryRegistry(), bodyLimit: 'lots' })).toThrow(/invalid bodyLimit/);
  expect(() => createApiRouter({ registry: new MemoryRegistry(), outbound: { allowHosts: 'x' } })).toThrow(/outbound\.allowHosts/);
  expect(() => createApiRouter({ registry: new MemoryRegistry(), accounts: {} })).toThrow(/accounts\.getAccountByToken/);
});

test('MemoryRegistry rejects invalid definitions at registration, naming the field', () => {
  const { MemoryRegistry, ConfigError } = require('scriptable-api');
  const reg = new MemoryRegistry();
  const base = { path: 'p', call: { script: 's.js', function: 'f' }, returnType: 'JSON' };
  const bad = [
    [{ ...base, path: '/p' }, /path/],
    [{ ...base, path: 'a/../b' }, /path/],
    [{ ...base, returnType: 'XML' }, /returnType/],
    [{ ...base, call: { script: 's.js' } }, /call\.function/],
    [{ ...base, call: { script: 's.js', function: 'f', automation: 'x' } }, /call/],
    [{ ...base, before: { script: '', function: 'f' } }, /before\.script/],
    [{ ...base, rateLimit: { requestsPerSecond: -1 } }, /rateLimit\.requestsPerSecond/],
    [{ ...base, rateLimit: { requestsPerSecond: 1, identifier: 5 } }, /rateLimit\.identifier/],
    [{ ...base, methods: ['GET', 'NOT A METHOD'] }, /methods\[1\]/],
  ];
  for (const [def, field] of bad) {
    expect(() => reg.putApi('app', def)).toThrow(ConfigError);
    expect(() => reg.putApi('app', def)).toThrow(field);
  }
  expect(() => reg.putApi('a/b', base)).toThrow(/appId/);
  reg.putApi('app', { ...base, methods: ['get'] });
  expect(reg.getApi('app', 'p').methods).toEqual(['GET']);
  expect(reg.listApis('app')).toHaveLength(1);
  expect(reg.removeApi('app', 'p')).toBe(true);
  expect(reg.getApi('app', 'p')).toBeUndefined();
});
