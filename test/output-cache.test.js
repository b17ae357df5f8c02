'use strict';
// The worker's cache of parsed stage outputs (lib/runtime/worker/output-cache.ts): a text answered
// again gives the same frozen StageOutput; long texts are parsed each time; the cache is bounded.
const { StageOutputCache } = require('../dist/cjs/runtime/worker/output-cache.js');

const TEXT = '{"status":"value","hasValue":false,"attributes":{"t":1},"response":{"headers":[["X-A","1"]]}}';

test('a text answered again gives the same StageOutput, deeply frozen', () => {
  const cache = new StageOutputCache();
  const a = cache.parse(TEXT);
  expect(a).toEqual({ status: 'value', hasValue: false, attributes: { t: 1 }, response: { headers: [['X-A', '1']] } });
  expect(cache.parse(String(TEXT))).toBe(a);
  expect(Object.isFrozen(a)).toBe(true);
  expect(Object.isFrozen(a.attributes)).toBe(true);
  expect(Object.isFrozen(a.response.headers[0])).toBe(true);
  // a write would reach every later stage that answers the same text: it throws instead
  expect(() => {
    a.attributes.t = 2;
  }).toThrow(TypeError);
  expect(() => a.response.headers.push(['X-B', '2'])).toThrow(TypeError);
  expect(cache.parse(TEXT).attributes.t).toBe(1);
});

test('a long text is parsed each time, and not frozen', () => {
  const cache = new StageOutputCache();
  const long = JSON.stringify({ status: 'value', hasValue: true, value: 'x'.repeat(2000) });
  const a = cache.parse(long);
  const b = cache.parse(long);
  expect(a).toEqual(b);
  expect(a).not.toBe(b);
  expect(Object.isFrozen(a)).toBe(false);
  expect(cache.size).toBe(0);
});

test('the cache holds at most 64 texts, and text that is not JSON throws as JSON.parse does', () => {
  const cache = new StageOutputCache();
  for (let i = 0; i < 200; i++) cache.parse(`{"status":"value","hasValue":true,"value":${i}}`);
  expect(cache.size).toBeLessThanOrEqual(64);
  expect(cache.parse('{"status":"value","hasValue":true,"value":199}').value).toBe(199);
  expect(() => cache.parse('{"status":')).toThrow(SyntaxError);
});
