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
  // entries that could never match a host: refused at startup, naming the entry
  for (const entry of ['api.example.com:443', 'https://api.example.com', 'api.example.com/', '*example.com']) {
    expect(() => createApiRouter({ registry: new MemoryRegistry(), outbound: { allowHosts: ['ok.example.com', entry] } })).toThrow(/outbound\.allowHosts\[1\]: .* is not a host name/);
  }
  expect(() => createApiRouter({ registry: new MemoryRegistry(), accounts: {} })).toThrow(/accounts\.getAccountByToken/);
  // timeouts become Node.js timers, which fire at once past 2^31 - 1 ms: refused, not a 1 ms limit
  expect(() => createApiRouter({ registry: new MemoryRegistry(), scriptTimeoutMs: 3e9 })).toThrow(/invalid scriptTimeoutMs: must be at most 2147483647/);
  expect(() => createApiRouter({ registry: new MemoryRegistry(), outbound: { timeoutMs: 3e9 } })).toThrow(/invalid outbound\.timeoutMs: must be at most/);
  // NaN and Infinity are shown as themselves, not as JSON's null
  expect(() => createApiRouter({ registry: new MemoryRegistry(), workers: NaN })).toThrow(/invalid workers: must be an integer >= 1, got NaN/);
  // (a thread each, started one after another: a million would hang the start, growing by 100 MiB a second)
  expect(() => createApiRouter({ registry: new MemoryRegistry(), workers: 1e6 })).toThrow('invalid workers: must be at most 1024, got 1000000');
  expect(() => createApiRouter({ registry: new MemoryRegistry(), maxWorkers: 2000 })).toThrow('invalid maxWorkers: must be at most 1024, got 2000');
  expect(() => createApiRouter({ registry: new MemoryRegistry(), scriptTimeoutMs: Infinity })).toThrow(/got Infinity/);
  const logger = { info() {}, warn() {}, error() {} };
  expect(() => createApiRouter({ registry: new MemoryRegistry(), logger: { ...logger, debug: 'x' } })).toThrow(/invalid logger\.debug/);
});

test('an unknown option is refused, with the nearest known name', () => {
  const { createApiRouter, MemoryRegistry } = require('scriptable-api');
  const registry = new MemoryRegistry();
  expect(() => createApiRouter({ registry, scriptTimeoutMS: 500 })).toThrow("invalid scriptTimeoutMS: is not an option (did you mean 'scriptTimeoutMs'?)");
  expect(() => createApiRouter({ registry, worker: 2 })).toThrow("did you mean 'workers'?");
  expect(() => createApiRouter({ registry, outbound: { allowPrivateNetwork: true } })).toThrow("invalid outbound.allowPrivateNetwork: is not an option (did you mean 'outbound.allowPrivateNetworks'?)");
  expect(() => createApiRouter({ registry, rateLimit: { onstoreerror: 'open' } })).toThrow("did you mean 'rateLimit.onStoreError'?");
  expect(() => createApiRouter({ registry, mountPath: '/api' })).toThrow(/invalid mountPath: is not an option; the options are registry, engine, /);
  try {
    createApiRouter({ registry, scriptTimeoutMS: 500 });
  } catch (e) {
    expect(e).toMatchObject({ name: 'ConfigError', field: 'scriptTimeoutMS' });
  }
});

test('the longest timer-sized script timeout works (the pool\'s grace on top of it stays a valid timer)', async () => {
  const { createApiRouter, MemoryRegistry } = require('scriptable-api');
  const express = require('express');
  const request = require('supertest');
  const registry = new MemoryRegistry({ apps: { a: { scripts: { 's.js': 'export function f() { return { ok: 1 } }' }, apis: [{ path: 'p', call: { script: 's.js', function: 'f' }, returnType: 'JSON' }] } } });
  const router = createApiRouter({ registry, scriptTimeoutMs: 2147483647, workers: 1, logger: false });
  const app = express().use('/api', router);
  try {
    await request(app).get('/api/a/p').expect(200, { ok: 1 });
  } finally {
    await router.close();
  }
});

test('a registry handing back something other than an object is an invalid definition (500, 270600)', async () => {
  const { createApiRouter } = require('scriptable-api');
  const express = require('express');
  const request = require('supertest');
  const errors = [];
  const registry = { getApi: () => '{"path":"p"}', getScript: () => undefined };
  const router = createApiRouter({ registry, workers: 1, logger: { info() {}, warn() {}, error: (m) => errors.push(m) } });
  const app = express().use('/api', router);
  try {
    const res = await request(app).get('/api/a/p').expect(500);
    expect(res.body).toMatchObject({ code: 270600, message: expect.stringContaining('returned a string, not an object') });
    expect(errors.join('\n')).toMatch(/getApi returned a string/);
  } finally {
    await router.close();
  }
});

test('new MemoryRegistry({ apps }) refuses a malformed app, naming it', () => {
  const { MemoryRegistry, ConfigError } = require('scriptable-api');
  const bad = [
    [{ apps: { x: null } }, 'apps.x'],
    [{ apps: { x: { apis: {} } } }, 'apps.x.apis'],
    [{ apps: { x: { automations: 'a' } } }, 'apps.x.automations'],
    [{ apps: { x: { scripts: ['a.js'] } } }, 'apps.x.scripts'],
    [{ apps: [] }, 'apps'],
    ['apps', 'options'],
  ];
  for (const [init, field] of bad) {
    let error;
    try {
      new MemoryRegistry(init);
    } catch (e) {
      error = e;
    }
    expect(error).toBeInstanceOf(ConfigError);
    expect(error.field).toBe(field);
  }
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
    // a mistyped placeholder would be literal text: one bucket for every caller
    [{ ...base, rateLimit: { requestsPerSecond: 1, identifier: '{headers.x-key}' } }, /rateLimit\.identifier: "\{headers\.x-key\}" is not a placeholder/],
    [{ ...base, rateLimit: { requestsPerSecond: 1, identifier: 'k-{IP}' } }, /"\{IP\}" is not a placeholder/],
    [{ ...base, rateLimit: { requestsPerSecond: 1, identifier: '{ip' } }, /"\{ip" is not a placeholder/],
    [{ ...base, rateLimit: { requestsPerSecond: 1, identifier: '{ip}:{header.x}}' } }, /"\}" is not a placeholder/],
    // a header name no request can carry: the key would always be the IP
    [{ ...base, rateLimit: { requestsPerSecond: 1, identifier: '{header.x api-key}' } }, /rateLimit\.identifier: "\{header\.x api-key\}": "x api-key" is not a header name/],
    [{ ...base, rateLimit: { requestsPerSecond: 1, identifier: 'k:{header. x-key}' } }, /" x-key" is not a header name/],
    [{ ...base, rateLimit: { requestsPerSecond: 1, identifier: '{header.x-key:}' } }, /"x-key:" is not a header name/],
    [{ ...base, methods: ['GET', 'NOT A METHOD'] }, /methods\[1\]/],
  ];
  for (const [def, field] of bad) {
    expect(() => reg.putApi('app', def)).toThrow(ConfigError);
    expect(() => reg.putApi('app', def)).toThrow(field);
  }
  expect(() => reg.putApi('a/b', base)).toThrow(/appId/);
  reg.putApi('app2', { ...base, rateLimit: { requestsPerSecond: 1, identifier: 'global:{ip}:{header.X-Key}:{attr.user}' } });
  reg.putApi('app', { ...base, methods: ['get'] });
  expect(reg.getApi('app', 'p').methods).toEqual(['GET']);
  expect(reg.listApis('app')).toHaveLength(1);
  expect(reg.removeApi('app', 'p')).toBe(true);
  expect(reg.getApi('app', 'p')).toBeUndefined();
});

test('MemoryRegistry.putApi keeps what it validated: later changes to the object given do not reach it', () => {
  const { MemoryRegistry } = require('scriptable-api');
  const reg = new MemoryRegistry();
  const def = { path: 'p', call: { script: 's.js', function: 'fn' }, returnType: 'JSON', rateLimit: { requestsPerSecond: 1, identifier: 'global' } };
  reg.putApi('app', def);
  def.rateLimit.requestsPerSecond = -5;
  def.call.function = 'not a name';
  expect(reg.getApi('app', 'p')).toMatchObject({ call: { function: 'fn' }, rateLimit: { requestsPerSecond: 1 } });
  expect(Object.isFrozen(reg.getApi('app', 'p').rateLimit)).toBe(true);
});

test('maxWorkers below the default worker count (CPUs - 1) lowers that default instead of failing', () => {
  const os = require('node:os');
  const spy = jest.spyOn(os, 'availableParallelism').mockReturnValue(8);
  try {
    const { parseOptions } = require('../dist/cjs/options.js');
    const { MemoryRegistry } = require('scriptable-api');
    expect(parseOptions({ registry: new MemoryRegistry(), maxWorkers: 4 })).toMatchObject({ workers: 4, maxWorkers: 4 });
    expect(parseOptions({ registry: new MemoryRegistry() })).toMatchObject({ workers: 7 });
  } finally {
    spy.mockRestore();
  }
});

test("the package's other constructors refuse a key that is not an option too, naming the one meant", () => {
  const { MemoryRegistry, DirectoryRegistry, LocalFileStorage, S3FileStorage, MemoryRateLimitStore, RedisRateLimitStore, ConfigError } = require('scriptable-api');
  const cases = [
    // an app under `app` (or its APIs under `api`) would leave the registry empty: every call a 404
    [() => new MemoryRegistry({ app: {} }), 'app', "(did you mean 'apps'?)"],
    [() => new MemoryRegistry({ apps: { shop: { api: [] } } }), 'apps.shop.api', "(did you mean 'apps.shop.apis'?)"],
    [() => new LocalFileStorage({ root: '/tmp/x', rot: '/tmp/y' }), 'rot', "(did you mean 'root'?)"],
    // a misspelt prefix would put every app's files at the top of a shared bucket
    [() => new S3FileStorage({ bucket: 'b', prefx: 'files/' }), 'prefx', "(did you mean 'prefix'?)"],
    [() => new S3FileStorage({ bucket: 'b', clientoptions: {} }), 'clientoptions', "(did you mean 'clientOptions'?)"],
    [() => new MemoryRateLimitStore({ maxkeys: 10 }), 'maxkeys', "(did you mean 'maxKeys'?)"],
    [() => new RedisRateLimitStore({ url: 'redis://127.0.0.1:1', prefx: 'tenant:' }), 'prefx', "(did you mean 'prefix'?)"],
    // a misspelt required option is named as such, not reported missing
    [() => new RedisRateLimitStore({ uri: 'redis://127.0.0.1:1' }), 'uri', "(did you mean 'url'?)"],
    [() => new S3FileStorage({ bucekt: 'b' }), 'bucekt', "(did you mean 'bucket'?)"],
    [() => new LocalFileStorage({ rot: '/tmp/x' }), 'rot', "(did you mean 'root'?)"],
    [() => new DirectoryRegistry({ rot: '/tmp/x' }), 'rot', "(did you mean 'root'?)"],
  ];
  for (const [make, field, hint] of cases) {
    let error;
    try {
      make();
    } catch (e) {
      error = e;
    }
    expect(error).toBeInstanceOf(ConfigError);
    expect(error).toMatchObject({ field, message: `scriptable-api: invalid ${field}: is not an option ${hint}` });
  }
  // the documented options still pass
  new MemoryRegistry({ apps: { shop: { apis: [], scripts: {}, automations: [] } } });
  new LocalFileStorage({ root: '/tmp/x' });
  new MemoryRateLimitStore({ maxKeys: 10, sweepIntervalMs: 0, now: () => 0 });
});

test('the package ships what its README links to in docs/, and the dist files its entries load', () => {
  const [packed] = JSON.parse(execFileSync('npm', ['pack', '--dry-run', '--json', '--ignore-scripts'], { cwd: root, encoding: 'utf8' }));
  const files = new Set(packed.files.map((f) => f.path));
  const readme = fs.readFileSync(path.join(root, 'README.md'), 'utf8');
  const links = [...readme.matchAll(/\]\((docs\/[^)#\s]+)/g)].map((m) => m[1]);
  expect(links.length).toBeGreaterThanOrEqual(3);
  for (const link of links) expect({ link, shipped: files.has(link) }).toEqual({ link, shipped: true });
  const pkg = require('../package.json');
  for (const entry of [pkg.main, pkg.types, pkg.bin['scriptable-api'], ...Object.values(pkg.exports['.']).flatMap((c) => Object.values(c))]) {
    expect({ entry, shipped: files.has(entry.replace(/^\.\//, '')) }).toEqual({ entry, shipped: true });
  }
  expect(files.has('dist/cjs/runtime/sandbox/adapter.js')).toBe(true);
  // sources and tests stay out
  expect([...files].filter((f) => /^(lib|test|bench|scripts|examples)\//.test(f))).toEqual([]);
});

test('a sandboxDir, storageDir or upload.tmpDir that is a file is refused at startup, naming it (every file operation failed with a 500)', () => {
  const os = require('node:os');
  const { createApiRouter, MemoryRegistry, ConfigError } = require('scriptable-api');
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'sapi-roots-'));
  const file = path.join(dir, 'not-a-folder');
  fs.writeFileSync(file, 'x');
  try {
    for (const [options, field] of [[{ sandboxDir: file }, 'sandboxDir'], [{ storageDir: file }, 'storageDir'], [{ upload: { tmpDir: file } }, 'upload.tmpDir']]) {
      let error;
      try {
        createApiRouter({ registry: new MemoryRegistry(), logger: false, ...options }).close({ force: true });
      } catch (e) {
        error = e;
      }
      expect(error).toBeInstanceOf(ConfigError);
      expect(error.field).toBe(field);
      expect(error.message).toContain('is a file, not a folder');
    }
    expect(() => createApiRouter({ registry: new MemoryRegistry(), logger: false, storageDir: path.join(file, 'sub') })).toThrow('invalid storageDir: ' + JSON.stringify(path.join(file, 'sub')) + ' is under a file, not a folder');
    // folders that do not exist yet are made on first use
    createApiRouter({ registry: new MemoryRegistry(), logger: false, workers: 1, sandboxDir: path.join(dir, 'sandbox'), storageDir: path.join(dir, 'storage') }).close({ force: true });
  } finally {
    fs.rmSync(dir, { recursive: true, force: true });
  }
});
