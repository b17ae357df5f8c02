'use strict';
// bench/paired.js: the per-round paired ratios bench/run.js prints for a run of several rounds
// (each router config against express, each hooked or diagnostic config against its plain one).
const { pairedRatio, pairedLines, baselineOf, tCritical } = require('../bench/paired');

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

test('baselineOf: hooked and diagnostic configs against their plain one, router configs against express', () => {
  expect(baselineOf('quickjs-hooks')).toBe('quickjs');
  expect(baselineOf('vm2-empty-hooks')).toBe('vm2');
  expect(baselineOf('quickjs-busy')).toBe('quickjs');
  expect(baselineOf('quickjs')).toBe('express');
  expect(baselineOf('router-noop')).toBe('express');
  expect(baselineOf('express')).toBeUndefined();
});

test('pairedLines: every pair the run allows, with the pool size kept apart, and hooks as extra time', () => {
  const series = new Map([
    ['express', { config: 'express', workers: undefined, rps: [1000, 1000, 1000] }],
    ['quickjs w=2', { config: 'quickjs', workers: 2, rps: [900, 920, 910] }],
    ['quickjs-hooks w=2', { config: 'quickjs-hooks', workers: 2, rps: [810, 828, 819] }],
    ['quickjs-hooks w=1', { config: 'quickjs-hooks', workers: 1, rps: [800, 800, 800] }], // no quickjs w=1: no pair
  ]);
  const lines = pairedLines(series);
  expect(lines).toHaveLength(2);
  expect(lines[0]).toMatch(/^ {2}quickjs w=2 \/ express +median 0\.910, mean 0\.910 \(95% CI 0\.885–0\.935\), 3 rounds; rounds 0\.900 0\.920 0\.910$/);
  // 0.9 in every round: no spread, and 1 / 0.9 - 1 = 11.1% more time per request
  expect(lines[1]).toMatch(/^ {2}quickjs-hooks w=2 \/ quickjs w=2 +median 0\.900, mean 0\.900 \(95% CI 0\.900–0\.900\), 3 rounds/);
  expect(lines[1]).toMatch(/time per request \+11\.1% \(95% CI \+11\.1% to \+11\.1%\)$/);
  // a single round gives no paired line
  expect(pairedLines(new Map([['express', { config: 'express', rps: [1] }], ['quickjs', { config: 'quickjs', rps: [1] }]]))).toEqual([]);
});
