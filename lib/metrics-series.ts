/**
 * Counters and histograms whose series are objects the caller keeps, for the router's per-request
 * metrics (lib/metrics.ts). Counting is a field update on a series the caller already holds;
 * prom-client's own metrics find the series from a labels object on every call (checking the
 * labels and joining them into a key), a cost every request paid several times over. These
 * register in a prom-client Registry like prom-client's metrics (the registry writes the text
 * format from `get()`), so a host's registry serves them with the rest.
 */
import type { Registry } from 'prom-client';

type Labels = Record<string, string>;

/** A value pair of prom-client's `get()` format. */
interface Sample {
  labels: Labels;
  value: number;
  metricName?: string;
}

interface MetricConfig<L extends Labels> {
  name: string;
  help: string;
  labelNames: Array<keyof L & string>;
  registers: Registry[];
}

/** What a series of either kind has: its labels, fixed when it is made. */
interface AnySeries {
  readonly labels: Labels;
}

abstract class SeriesMetric<S extends AnySeries> {
  readonly name: string;
  readonly help: string;
  readonly labelNames: string[];
  readonly aggregator = 'sum';
  abstract readonly type: 'counter' | 'histogram';
  /** The series with a value, in the order they were first counted. */
  protected readonly all = new Set<S>();

  constructor(config: MetricConfig<Labels>) {
    this.name = config.name;
    this.help = config.help;
    this.labelNames = config.labelNames;
    for (const r of config.registers) r.registerMetric(this as never);
  }

  /** Takes a series off, its values back to zero: counting it again starts it over. */
  remove(series: S): void {
    this.all.delete(series);
    this.zero(series);
  }

  /** Takes every series off (prom-client's Registry.resetMetrics). */
  reset(): void {
    for (const s of this.all) this.zero(s);
    this.all.clear();
  }

  protected abstract zero(s: S): void;
  protected abstract samples(s: S): Sample[];

  /** The metric in prom-client's format (what a Registry reads to write the text format). */
  async get(): Promise<{ name: string; help: string; type: string; aggregator: string; values: Sample[] }> {
    const values: Sample[] = [];
    for (const s of this.all) values.push(...this.samples(s));
    return { name: this.name, help: this.help, type: this.type, aggregator: this.aggregator, values };
  }
}

export interface CounterSeries<L extends Labels> {
  readonly labels: L;
  value: number;
}

/** A counter (`type: counter`); `inc(series, n)` adds to one series. */
export class SeriesCounter<L extends Labels> extends SeriesMetric<CounterSeries<L>> {
  readonly type = 'counter';

  /** A series of these labels, not written until counted. */
  series(labels: L): CounterSeries<L> {
    return { labels, value: 0 };
  }

  inc(s: CounterSeries<L>, n = 1): void {
    s.value += n;
    this.all.add(s);
  }

  protected zero(s: CounterSeries<L>): void {
    s.value = 0;
  }

  protected samples(s: CounterSeries<L>): Sample[] {
    return [{ labels: s.labels, value: s.value }];
  }
}

export interface HistogramSeries<L extends Labels> {
  readonly labels: L;
  /** Observations per bucket (not cumulative); the last is past the highest bound (+Inf). */
  readonly counts: number[];
  sum: number;
  count: number;
}

/** A histogram (`type: histogram`) of fixed upper bounds, with the +Inf bucket added. */
export class SeriesHistogram<L extends Labels> extends SeriesMetric<HistogramSeries<L>> {
  readonly type = 'histogram';
  private readonly bounds: number[];

  constructor(config: MetricConfig<L> & { buckets: number[] }) {
    super(config as unknown as MetricConfig<Labels>);
    this.bounds = [...config.buckets];
  }

  /** A series of these labels, not written until an observation. */
  series(labels: L): HistogramSeries<L> {
    return { labels, counts: new Array<number>(this.bounds.length + 1).fill(0), sum: 0, count: 0 };
  }

  observe(s: HistogramSeries<L>, value: number): void {
    let i = 0;
    while (i < this.bounds.length && value > this.bounds[i]) i++;
    s.counts[i]++;
    s.sum += value;
    s.count++;
    this.all.add(s);
  }

  protected zero(s: HistogramSeries<L>): void {
    s.counts.fill(0);
    s.sum = 0;
    s.count = 0;
  }

  protected samples(s: HistogramSeries<L>): Sample[] {
    const out: Sample[] = [];
    let acc = 0;
    for (let i = 0; i < this.bounds.length; i++) {
      acc += s.counts[i];
      out.push({ labels: { ...s.labels, le: String(this.bounds[i]) }, value: acc, metricName: `${this.name}_bucket` });
    }
    out.push(
      { labels: { ...s.labels, le: '+Inf' }, value: s.count, metricName: `${this.name}_bucket` },
      { labels: s.labels, value: s.sum, metricName: `${this.name}_sum` },
      { labels: s.labels, value: s.count, metricName: `${this.name}_count` },
    );
    return out;
  }
}
