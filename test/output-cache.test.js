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

describe('the result message', () => {
  const { resultMessage } = require('../dist/cjs/runtime/worker/result-message.js');
  const cache = new StageOutputCache();
  const call = cache.parse('{"status":"value","hasValue":true,"output":{"type":"JSON","json":"{\\"ok\\":true}"}}');
  const before = cache.parse('{"status":"value","hasValue":false,"attributes":{"t":1,"o":{"a":[1,"x"]}}}');
  const after = cache.parse('{"status":"value","hasValue":false,"response":{"headers":[["X-Hooked","1"]],"status":201}}');
  const sents = [
    { outcome: { kind: 'output', output: call.output } },
    { outcome: { kind: 'output', output: call.output }, attributes: before.attributes, response: { headers: after.response.headers, status: 201 } },
    { outcome: { kind: 'output', output: { type: 'Text', text: 'a "quoted"\n' } }, attributes: { fresh: true } },
    { outcome: { kind: 'written' }, response: { headers: [], chunks: [{ t: 'x' }], written: true, error: null, skipped: undefined } },
    { outcome: { kind: 'continue' } },
    { outcome: { kind: 'error', message: 'Boom \u2028', code: 1001, status: 500 }, attributes: {} },
  ];

  test.each(sents.map((s, i) => [i, s]))('is what JSON.stringify writes (%i)', (i, sent) => {
    for (const [poisoned, ms] of [[false, 0.043], [true, 12], [false, NaN]]) {
      const expected = JSON.stringify({ type: 'result', jobId: 42 + i, result: sent, poisoned, ms });
      expect(resultMessage(42 + i, sent, poisoned, ms)).toBe(expected);
      expect(resultMessage(42 + i, sent, poisoned, ms)).toBe(expected); // (again, from the kept texts)
    }
  });
});
