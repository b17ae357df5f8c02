'use strict';
// bench/paired.js: the per-round paired ratios bench/run.js prints for a run of several rounds
// (each row against the rows it is read against).
const { pairedRatio, pairedLines, tCritical } = require('../bench/paired');

test('pairedRatio: ratios by round, their median, mean and the t interval of the mean', () => {
  const r = pairedRatio([100, 200, 100, 400], [90, 190, 92, 360]);
  expect(r.ratios).toEqual([0.9, 0.95, 0.92, 0.9]);
  expect(r.n).toBe(4);
  expect(r.median).toBeCloseTo(0.91, 10);
  expect(r.mean).toBeCloseTo(0.9175, 10);
  // sd of (0.9, 0.95, 0.92, 0.9) = 0.023629..., t(3) = 3.182, half width = 3.182 * sd / 2
  const sd = Math.sqrt(((0.9 - 0.9175) ** 2 * 2 + (0.95 - 0.9175) ** 2 + (0.92 - 0.9175) ** 2) / 3);
  expect(r.high - r.mean).toBeCloseTo((3.182 * sd) / 2, 10);
  expect(r.mean - r.low).toBeCloseTo((3.182 * sd) / 2, 10);
});

test('pairedRatio: one round has no interval; unpaired series are refused', () => {
  expect(pairedRatio([100], [80])).toEqual({ n: 1, ratios: [0.8], median: 0.8, mean: 0.8, low: 0.8, high: 0.8 });
  expect(() => pairedRatio([1, 2], [1])).toThrow(/same non-zero length/);
  expect(() => pairedRatio([], [])).toThrow(/same non-zero length/);
});

test('tCritical: the two-sided 95% values, and the normal value for large samples', () => {
  expect(tCritical(1)).toBe(12.706);
  expect(tCritical(4)).toBe(2.776);
  expect(tCritical(15)).toBe(2.131);
  expect(tCritical(100)).toBe(1.96);
});

test('pairedLines: each row against the rows it names, hooks also as extra time', () => {
  const series = new Map([
    ['express', { rps: [1000, 1000, 1000] }],
    ['quickjs w=2', { rps: [900, 920, 910], against: [{ key: 'express' }] }],
    ['quickjs-hooks w=2', { rps: [810, 828, 819], against: [{ key: 'express' }, { key: 'quickjs w=2', time: true }] }],
    ['quickjs-hooks w=1', { rps: [800, 800, 800], against: [{ key: 'quickjs w=1', time: true }] }], // no quickjs w=1: no line
  ]);
  const lines = pairedLines(series);
  expect(lines).toHaveLength(3);
  expect(lines[0]).toMatch(/^ {2}quickjs w=2 \/ express +median 0\.910, mean 0\.910 \(95% CI 0\.885–0\.935\), 3 rounds; rounds 0\.900 0\.920 0\.910$/);
  expect(lines[1]).toMatch(/^ {2}quickjs-hooks w=2 \/ express +median 0\.819/);
  expect(lines[1]).not.toMatch(/time per request/);
  // 0.9 in every round: no spread, and 1 / 0.9 - 1 = 11.1% more time per request
  expect(lines[2]).toMatch(/^ {2}quickjs-hooks w=2 \/ quickjs w=2 +median 0\.900, mean 0\.900 \(95% CI 0\.900–0\.900\), 3 rounds/);
  expect(lines[2]).toMatch(/time per request \+11\.1% \(95% CI \+11\.1% to \+11\.1%\)$/);
  // a single round gives no paired line
  expect(pairedLines(new Map([['express', { rps: [1] }], ['quickjs', { rps: [1], against: [{ key: 'express' }] }]]))).toEqual([]);
});
