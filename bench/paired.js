'use strict';
/**
 * Paired comparisons between the configs of one bench run (bench/run.js --rounds N).
 *
 * Every round runs each config once, one after the other, so two configs measured in the same
 * round share the machine's state of that moment. Their ratio per round (`b / a` req/s) is the
 * paired sample; across rounds it gives a median, a mean and a 95% confidence interval of the
 * mean (Student's t). On a 2-core machine two runs of the same config differ by up to ±4% in one
 * 8 s round, so one round's ratio says little: read a target against the interval. `time` is the
 * same comparison as extra time per request (a / b - 1).
 */

/** Two-sided 95% critical values of Student's t, by degrees of freedom (1..30); 1.96 beyond. */
const T95 = [NaN, 12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228, 2.201, 2.179, 2.16, 2.145, 2.131, 2.12, 2.11, 2.101, 2.093, 2.086, 2.08, 2.074, 2.069, 2.064, 2.06, 2.056, 2.052, 2.048, 2.045, 2.042];

function tCritical(df) {
  return df < T95.length ? T95[df] : 1.96;
}

function median(values) {
  const s = [...values].sort((x, y) => x - y);
  const m = s.length >> 1;
  return s.length % 2 ? s[m] : (s[m - 1] + s[m]) / 2;
}

/**
 * The per-round ratios b[i] / a[i] of two req/s series of the same run (round i of each), with
 * their median, mean and the 95% confidence interval of the mean (low = high = mean with one
 * round). Throws when the series are not paired (different lengths, or no rounds).
 */
function pairedRatio(a, b) {
  if (!Array.isArray(a) || !Array.isArray(b) || a.length !== b.length || a.length === 0) {
    throw new Error(`pairedRatio: needs two series of the same non-zero length (got ${a?.length} and ${b?.length})`);
  }
  const ratios = a.map((x, i) => b[i] / x);
  const n = ratios.length;
  const mean = ratios.reduce((s, r) => s + r, 0) / n;
  const sd = n > 1 ? Math.sqrt(ratios.reduce((s, r) => s + (r - mean) ** 2, 0) / (n - 1)) : 0;
  const half = n > 1 ? (tCritical(n - 1) * sd) / Math.sqrt(n) : 0;
  return { n, ratios, median: median(ratios), mean, low: mean - half, high: mean + half };
}

const pct = (x) => `${x >= 0 ? '+' : ''}${(x * 100).toFixed(1)}%`;

/**
 * Lines describing every pair of a run. `series` maps a row label (`quickjs`, `io-sync c=400`,
 * ...) to `{ rps: [req/s by round], against: [{ key, time }] }`: the labels it is read against,
 * and whether to show the ratio as extra time per request too (for hooks). A pair whose baseline
 * did not run, or that has fewer than two rounds, gives no line.
 */
function pairedLines(series) {
  const lines = [];
  for (const [key, s] of series) {
    for (const { key: baseKey, time } of s.against ?? []) {
      const b = series.get(baseKey);
      if (!b || b.rps.length !== s.rps.length || s.rps.length < 2) continue;
      const r = pairedRatio(b.rps, s.rps);
      let line =
        `  ${`${key} / ${baseKey}`.padEnd(34)} median ${r.median.toFixed(3)}, mean ${r.mean.toFixed(3)} (95% CI ${r.low.toFixed(3)}–${r.high.toFixed(3)}), ` +
        `${r.n} rounds; rounds ${r.ratios.map((x) => x.toFixed(3)).join(' ')}`;
      if (time) line += `\n  ${''.padEnd(34)} time per request ${pct(1 / r.mean - 1)} (95% CI ${pct(1 / r.high - 1)} to ${pct(1 / r.low - 1)})`;
      lines.push(line);
    }
  }
  return lines;
}

module.exports = { pairedRatio, pairedLines, tCritical };
