'use strict';
// Lean packaging: ioredis and vm2 are optional peer dependencies, loaded only by the features that
// use them. Measured in child processes, so this test's own requires do not count.
const { execFileSync } = require('node:child_process');
const path = require('node:path');

const root = path.join(__dirname, '..', '..');

function runChild(code) {
  return JSON.parse(execFileSync(process.execPath, ['-e', code], { cwd: root, encoding: 'utf8', env: { ...process.env, NODE_ENV: 'production' } }));
}

/** Makes `require(name)` fail as it does when the package is not installed. */
const HIDE = (names) => `
  const Module = require('node:module');
  const resolve = Module._resolveFilename;
  Module._resolveFilename = function (request, ...rest) {
    if (${JSON.stringify(names)}.includes(request)) {
      const e = new Error("Cannot find module '" + request + "'");
      e.code = 'MODULE_NOT_FOUND';
      throw e;
    }
    return resolve.call(this, request, ...rest);
  };`;

test('require("scriptable-api") loads neither ioredis, vm2 nor prom-client, and reports its import time', () => {
  const out = runChild(`
    const t0 = process.hrtime.bigint();
    const lib = require('scriptable-api');
    const ms = Number(process.hrtime.bigint() - t0) / 1e6;
    const packages = new Set(Object.keys(require.cache).filter((f) => f.includes('node_modules')).map((f) => {
      const rest = f.split('node_modules' + require('node:path').sep).pop().split(require('node:path').sep);
      return rest[0].startsWith('@') ? rest[0] + '/' + rest[1] : rest[0];
    }));
    console.log(JSON.stringify({ ms, packages: [...packages], exports: typeof lib.RedisRateLimitStore }));
  `);
  // eslint-disable-next-line no-console
  console.info(`require('scriptable-api'): ${out.ms.toFixed(1)} ms; packages loaded: ${out.packages.join(', ')}`);
  expect(out.exports).toBe('function');
  expect(out.packages).not.toContain('ioredis');
  expect(out.packages).not.toContain('vm2');
  expect(out.packages).not.toContain('prom-client');
});

test('without ioredis installed: the package loads, a store on your own client works, one from a url names the package', () => {
  const out = runChild(`${HIDE(['ioredis'])}
    const { RedisRateLimitStore, ConfigError } = require('scriptable-api');
    const fake = { status: 'ready', evalsha: async () => [1, 0], eval: async () => [1, 0], on() {}, once() {}, off() {}, connect: async () => {}, quit: async () => {}, disconnect() {} };
    const own = new RedisRateLimitStore({ client: fake });
    let err;
    try { new RedisRateLimitStore({ url: 'redis://127.0.0.1:1' }); } catch (e) { err = e; }
    own.reserve('k', 1000, 0).then((r) => console.log(JSON.stringify({ admitted: r.admitted, name: err && err.name, isConfig: err instanceof ConfigError, message: err && err.message })));
  `);
  expect(out.admitted).toBe(true);
  expect(out.isConfig).toBe(true);
  expect(out.message).toMatch(/'ioredis'.*npm install ioredis/);
});

test("without vm2 installed: engine 'vm2' fails at startup with a ConfigError naming the package; quickjs still runs", () => {
  const out = runChild(`${HIDE(['vm2'])}
    const { createApiRouter, MemoryRegistry, WorkerPool } = require('scriptable-api');
    const registry = new MemoryRegistry();
    const errors = [];
    try { createApiRouter({ registry, engine: 'vm2' }); } catch (e) { errors.push([e.name, e.field, e.message]); }
    try { new WorkerPool({ engine: 'vm2' }); } catch (e) { errors.push([e.name, e.field, e.message]); }
    const router = createApiRouter({ registry, workers: 1 });
    router.close().then(() => console.log(JSON.stringify({ errors })));
  `);
  expect(out.errors).toHaveLength(2);
  for (const [name, field, message] of out.errors) {
    expect(name).toBe('ConfigError');
    expect(field).toBe('engine');
    expect(message).toMatch(/'vm2'.*npm install vm2/);
  }
});

test('package.json: ioredis, vm2 and @types/express are optional peers (and dev dependencies for the tests)', () => {
  const pkg = require('../../package.json');
  for (const name of ['ioredis', 'vm2', '@types/express']) {
    expect(pkg.peerDependencies[name]).toBeDefined();
    expect(pkg.peerDependenciesMeta[name]).toEqual({ optional: true });
    expect(pkg.dependencies[name]).toBeUndefined();
    expect(pkg.devDependencies[name]).toBeDefined();
  }
});
