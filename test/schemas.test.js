'use strict';
// The JSON Schemas in schemas/ ship with the package and are the validators' own rules: an
// independent JSON Schema validator over the shipped file and the library agree on every sample.
const fs = require('node:fs');
const path = require('node:path');
const Ajv = require('ajv');
const { validateApiDefinition, validateAutomation, MemoryRegistry } = require('..');

const load = (name) => JSON.parse(fs.readFileSync(require.resolve(`scriptable-api/schemas/${name}.json`), 'utf8'));
const ajv = new Ajv({ allErrors: true, strict: false });
const apiSchema = ajv.compile(load('api-definition'));
const automationSchema = ajv.compile(load('automation'));

const accepts = (fn) => {
  try {
    fn();
    return true;
  } catch {
    return false;
  }
};

test('the package ships the schemas (files and exports)', () => {
  const pkg = require('../package.json');
  expect(pkg.files).toContain('schemas');
  expect(pkg.exports['./schemas/*']).toBe('./schemas/*');
  for (const name of ['api-definition', 'automation']) expect(load(name).$schema).toBe('http://json-schema.org/draft-07/schema#');
});

test('unknown keys in an API definition are refused, naming the one meant', () => {
  const reg = new MemoryRegistry();
  const base = { path: 'p', call: { script: 's.js', function: 'f' }, returnType: 'JSON' };
  expect(() => reg.putApi('a', { ...base, method: ['GET'] })).toThrow("invalid api 'p'.method: is not a field (did you mean 'methods'?)");
  expect(() => reg.putApi('a', { ...base, returntype: 'Text' })).toThrow("invalid api 'p'.returntype: is not a field (did you mean 'returnType'?)");
  expect(() => reg.putApi('a', { ...base, rateLimit: { requestsPerSecond: 1, burst: 5 } })).toThrow("invalid api 'p'.rateLimit.burst: is not a field");
  expect(() => reg.putApi('a', { ...base, call: { script: 's.js', function: 'f', args: [] } })).toThrow("invalid api 'p'.call.args: is not a field");
  expect(() => reg.putApi('a', { ...base, $schema: '../schemas/api-definition.json', description: 'ok' })).not.toThrow();
});

test('a definition that is no object is refused as such, without naming a path it does not have', () => {
  const reg = new MemoryRegistry();
  for (const bad of [null, [1, 2], 'p', { path: 1 }]) {
    expect(() => reg.putApi('a', bad)).toThrow(/^scriptable-api: invalid api[:.]/);
    expect(() => reg.putApi('a', bad)).not.toThrow(/undefined/);
  }
});

test('a wrong value nested past the stack (or holding a cycle or a BigInt) is refused naming its field, shown as its kind', () => {
  const reg = new MemoryRegistry();
  const base = { path: 'p', call: { script: 's.js', function: 'f' }, returnType: 'JSON' };
  let deep = [];
  for (let i = 0; i < 100000; i++) deep = [deep];
  const cycle = {};
  cycle.self = cycle;
  expect(() => reg.putApi('a', { ...base, methods: [deep] })).toThrow("invalid api 'p'.methods[0]: […] is not an HTTP method");
  expect(() => reg.putApi('a', { ...base, methods: [cycle] })).toThrow("invalid api 'p'.methods[0]: {…}");
  expect(() => reg.putApi('a', { ...base, methods: [{ n: 1n }] })).toThrow("invalid api 'p'.methods[0]: {…}");
});

const base = { path: 'orders/list', call: { script: 's.js', function: 'f' }, returnType: 'JSON' };
const apiSamples = [
  base,
  { ...base, methods: ['get', 'POST'], enabled: false, description: 'd', before: { script: 'a.js', function: 'b' }, after: { automation: 'x' }, onError: { script: 'e.js', function: 'h' } },
  { ...base, rateLimit: { requestsPerSecond: 0.5, timeoutMs: -1, identifier: '{ip}' } },
  { ...base, path: '/orders' },
  { ...base, path: 'a//b' },
  { ...base, path: 'a/./b' },
  { ...base, path: '..' },
  { ...base, path: '' },
  { ...base, path: '   ' },
  { ...base, returnType: 'json' },
  { ...base, call: { automation: 'x', script: 's.js' } },
  { ...base, call: { script: 's.js', function: 'not-an-identifier' } },
  { ...base, call: { automation: '' } },
  { ...base, before: { automation: 'x' } },
  { ...base, rateLimit: { timeoutMs: 5 } },
  { ...base, rateLimit: { requestsPerSecond: '5' } },
  { ...base, methods: [] },
  { ...base, methods: ['GE T'] },
  { ...base, enabled: 'yes' },
  { ...base, extra: true },
  { ...base, cors: false },
  { ...base, cors: {} },
  { ...base, cors: { origins: '*', methods: ['GET', 'POST'], headers: ['x-token'], exposeHeaders: ['X-Request-Id'], credentials: true, maxAge: 600 } },
  { ...base, cors: { origins: ['https://app.example.com', 'https://*.example.com', 'HTTP://localhost:3000', '*'] } },
  { ...base, cors: true },
  { ...base, cors: 'https://app.example.com' },
  { ...base, cors: { origin: '*' } },
  { ...base, cors: { origins: 'https://app.example.com' } },
  { ...base, cors: { origins: ['https://app.example.com/path'] } },
  { ...base, cors: { origins: ['app.example.com'] } },
  { ...base, cors: { origins: ['https://app.example.com?x', 'https://user@app.example.com', 'https://app.example.com#top'] } },
  { ...base, cors: { origins: ['https://app.example.com:443', 'https://bücher.example', 'https://*.example.com:443'] } },
  { ...base, cors: { origins: [5] } },
  { ...base, cors: { methods: 'GET' } },
  { ...base, cors: { methods: ['GE T'] } },
  { ...base, cors: { headers: ['x token'] } },
  { ...base, cors: { exposeHeaders: [1] } },
  { ...base, cors: { credentials: 'yes' } },
  { ...base, cors: { maxAge: -1 } },
  { ...base, cors: { maxAge: 1.5 } },
  { ...base, cors: { methods: ['*'], headers: ['*'], exposeHeaders: ['*'] } },
  { ...base, cors: { credentials: true, headers: ['x-a', '*'] } },
  { ...base, cors: { credentials: true, exposeHeaders: ['*'] } },
  { ...base, cors: { credentials: true, methods: ['*'] } },
  { ...base, cors: { credentials: false, methods: ['*'] } },
  [],
  null,
];

test('API definitions: the shipped schema and validateApiDefinition agree', () => {
  for (const def of apiSamples) {
    expect({ def, library: accepts(() => validateApiDefinition(def)) }).toEqual({ def, library: apiSchema(def) });
  }
  // the one rule a schema cannot state: identifier placeholders (checked by the library on top)
  expect(apiSchema({ ...base, rateLimit: { requestsPerSecond: 1, identifier: '{nope}' } })).toBe(true);
  expect(() => validateApiDefinition({ ...base, rateLimit: { requestsPerSecond: 1, identifier: '{nope}' } })).toThrow(/is not a placeholder/);
});

const step = (s) => ({ id: 'a', steps: [s] });
const automationSamples = [
  { id: 'a', steps: [] },
  { id: 'a', name: 'n', description: 'd', steps: [{ id: 's1', type: 'script', script: 'x.js', function: 'f', interactive: false }] },
  step({ type: 'http', url: "'https://x.test'", method: 'post', headers: { a: "'1'", b: 2 }, body: { literal: true }, timeoutMs: 100 }),
  step({ type: 'set', vars: { a: 1, b: "'x'" } }),
  step({ type: 'if', condition: 'true', then: [], else: [{ type: 'return' }] }),
  step({ type: 'forEach', items: '[1]', as: 'n', steps: [{ type: 'abort', message: "'m'", status: 404 }] }),
  step({ type: 'http' }),
  step({ type: 'http', url: "'u'", timeoutMs: 0 }),
  step({ type: 'http', url: "'u'", headers: { 'a b': "'1'" } }),
  step({ type: 'http', url: "'u'", method: 'CONNECT' }),
  step({ type: 'http', url: 5 }),
  step({ type: 'if', condition: 1, then: [] }),
  step({ type: 'forEach', items: {}, steps: [] }),
  step({ type: 'forEach', items: [1], steps: [] }),
  step({ type: 'set', vars: { constructor: '1' } }),
  step({ id: 'constructor', type: 'return' }),
  step({ type: 'set', vars: {} }),
  step({ type: 'set', vars: { 'a b': '1' } }),
  step({ type: 'if', condition: 'true' }),
  step({ type: 'forEach', items: '[]', as: 'index', steps: [] }),
  step({ type: 'script', script: 'x.js' }),
  step({ type: 'return', value: '1', extra: 1 }),
  step({ type: 'confirm' }),
  step({ type: 'set', vars: { a: '1' }, interactive: true }),
  step({ type: 'nope' }),
  step({ id: '1st', type: 'return' }),
  { id: 'a' },
  { id: 'a', steps: [], more: 1 },
  { steps: [] },
];

test('automations: the shipped schema and validateAutomation agree on shapes (expressions are the library’s own check)', () => {
  for (const def of automationSamples) {
    expect({ def, library: accepts(() => validateAutomation(def)) }).toEqual({ def, library: automationSchema(def) });
  }
  expect(automationSchema(step({ type: 'return', value: 'this is not CEL' }))).toBe(true);
  expect(() => validateAutomation(step({ type: 'return', value: 'this is not CEL' }))).toThrow(/bad expression/);
});

test('the validators are generated from the shipped schema files at build (no copy that could drift)', () => {
  const dir = path.join(__dirname, '..', 'dist', 'cjs', 'definitions');
  for (const name of ['api-definition', 'automation']) {
    const code = fs.readFileSync(path.join(dir, `validate-${name}.js`), 'utf8');
    expect(code.split('\n')[0]).toBe(`// Generated by scripts/build.js from schemas/${name}.json.`);
    // the generated code embeds the schema it was compiled from: the shipped file, as it is now
    expect(code).toContain(JSON.stringify(load(name).title));
  }
  expect(fs.existsSync(path.join(dir, 'api-definition.json'))).toBe(false);
});
