/**
 * The router's Prometheus metrics, through `prom-client` (a dependency, loaded when the first
 * router with metrics is created, never by `require('scriptable-api')`).
 *
 * Labels: `app` and `api` are the app id and the API's configured path; a request that matched no
 * API (unknown app or path, bad path) counts with both empty, so callers cannot grow the label set.
 * `preview` is `true` for requests on the preview path, so trying a draft never shows as the live
 * API's traffic or failures.
 */
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { Registry } from 'prom-client';
import { ConfigError, thrownText } from './errors';
import { SeriesCounter, SeriesHistogram, type CounterSeries, type HistogramSeries } from './metrics-series';
import type { EngineStats } from './runtime/engine';
import type { Logger } from './types';

/** The `metrics` option of createApiRouter. */
export interface MetricsOptions {
  /**
   * A prom-client `Registry` to register the metrics in, e.g. your app's `register` so one scrape
   * serves everything. Default: a registry of the router's own (`router.metrics.registry`).
   * Two routers in one registry need different `prefix`es.
   */
  registry?: Registry;
  /** Prefix of every metric name. Default `scriptable_api_`. */
  prefix?: string;
  /** Buckets (seconds) of the duration histograms: a non-empty list of increasing positive finite numbers (the +Inf bucket is added). Default 1 ms to 10 s. */
  buckets?: number[];
  /**
   * Most (app, API) pairs with series of their own at once. Default 1000. When full, the series
   * of the pair idle longest go if it has been idle for 15 minutes (a deleted app's, say); else a
   * new pair counts as app and api `(other)`.
   */
  maxApis?: number;
}

/** `router.metrics`: the metrics of one router, in the Prometheus text format. */
export interface RouterMetrics {
  /** The prom-client Registry the metrics live in. */
  readonly registry: Registry;
  /** The Content-Type of `text()` (`text/plain; version=0.0.4; charset=utf-8`). */
  readonly contentType: string;
  /** Every metric of the registry, in the Prometheus text exposition format. */
  text(): Promise<string>;
  /** A request handler serving `text()`: `app.get('/metrics', router.metrics.handler)`. */
  handler(req: IncomingMessage, res: ServerResponse): void;
}

/** What the router records. */
export interface MetricsRecorder extends RouterMetrics {
  request(app: string, api: string, preview: boolean, status: number, seconds: number): void;
  /** `scriptSeconds` undefined: the request's scripts never ran (its call never left the line), only its wait counts. */
  script(app: string, api: string, preview: boolean, scriptSeconds: number | undefined, queueSeconds: number | undefined): void;
  rateLimit(app: string, api: string, preview: boolean, outcome: 'admitted' | 'rejected', detail: { waitedMs?: number; reason?: string }): void;
  /** Takes the router's metrics off the registry (router.close): a new router may register them again. */
  close(): void;
}

export const DEFAULT_PREFIX = 'scriptable_api_';
const DEFAULT_BUCKETS = [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10];
const PREFIX = /^[a-zA-Z_:][a-zA-Z0-9_:]*$/;
const DEFAULT_MAX_APIS = 1000;
/** A pair idle this long may give its series up to a new one (several scrapes have read its last values). */
export const IDLE_SERIES_MS = 15 * 60_000;
/** The `app` and `api` label of the requests of pairs beyond `maxApis`. */
export const OTHER = '(other)';
/**
 * Most statuses a series of requests_total counts apart: a script sets any status from 200 to 599
 * (400 series of one API, 37 MB of /metrics for a tenant's thousand APIs); past these, a status
 * counts under its class (`5xx`, which `status=~"5.."` matches as it matches `503`).
 */
export const MAX_STATUSES = 32;
/** The names (after the prefix) of the metrics every router registers (createMetrics checks and closes these); the worker gauges come with an engine's stats. */
const METRICS = ['requests_total', 'request_duration_seconds', 'script_duration_seconds', 'queue_wait_seconds', 'rate_limit_admitted_total', 'rate_limit_waited_total', 'rate_limit_wait_seconds', 'rate_limit_rejected_total'];

/** Checks the `metrics` option. */
export function validateMetrics(v: unknown): void {
  if (v === undefined || v === false) return;
  if (typeof v !== 'object' || v === null || Array.isArray(v)) throw new ConfigError('metrics', 'must be an object { registry?, prefix?, buckets? } or false');
  const o = v as Record<string, unknown>;
  for (const k of Object.keys(o)) {
    if (k !== 'registry' && k !== 'prefix' && k !== 'buckets' && k !== 'maxApis') throw new ConfigError(`metrics.${k}`, 'is not an option; the options are registry, prefix, buckets, maxApis');
  }
  if (o.registry !== undefined) {
    const r = o.registry as Record<string, unknown> | null;
    if (typeof r !== 'object' || r === null || typeof r.registerMetric !== 'function' || typeof r.metrics !== 'function') {
      throw new ConfigError('metrics.registry', 'must be a prom-client Registry (new Registry() or the default `register`)');
    }
  }
  if (o.prefix !== undefined && (typeof o.prefix !== 'string' || (o.prefix !== '' && !PREFIX.test(o.prefix)))) {
    throw new ConfigError('metrics.prefix', `must be a Prometheus metric name prefix like 'scriptable_api_', got ${JSON.stringify(o.prefix)}`);
  }
  if (o.buckets !== undefined) {
    const b = o.buckets;
    // (finite: prom-client adds the +Inf bucket itself, and an Infinity of ours is a second one, le="Infinity")
    if (!Array.isArray(b) || b.length === 0 || b.some((x, i) => typeof x !== 'number' || !(x > 0) || !Number.isFinite(x) || (i > 0 && x <= (b[i - 1] as number)))) {
      throw new ConfigError('metrics.buckets', 'must be a non-empty array of increasing finite numbers of seconds (the +Inf bucket is added)');
    }
  }
  if (o.maxApis !== undefined && !(Number.isSafeInteger(o.maxApis) && (o.maxApis as number) > 0)) {
    throw new ConfigError('metrics.maxApis', `must be a positive integer, got ${JSON.stringify(o.maxApis)}`);
  }
}

/** The labels of one (app, API, preview) series. */
type Labels = { app: string; api: string; preview: string };

/**
 * The series of one (app, API) pair, or of `(other)`, or of requests that matched no API, for one
 * value of `preview`: made when first counted, and kept, so that counting is a field update.
 */
interface Series {
  labels: Labels;
  /** By status, and past MAX_STATUSES of them by class (`5xx`). */
  requests: Map<number | string, CounterSeries<Labels & { status: string }>>;
  /** How many statuses have a series of their own. */
  statuses: number;
  duration?: HistogramSeries<Labels>;
  script?: HistogramSeries<Labels>;
  admitted?: CounterSeries<Labels>;
  waited?: CounterSeries<Labels>;
  waitTime?: HistogramSeries<Labels>;
  rejected: Map<string, CounterSeries<Labels & { reason: string }>>;
}

/** An (app, API) pair that has series of its own. */
interface Pair {
  app: string;
  seen: number;
  /** By preview ('true' / 'false'). */
  series: Map<string, Series>;
}

function seriesOf(byPreview: Map<string, Series>, app: string, api: string, preview: boolean): Series {
  const key = preview ? 'true' : 'false';
  let s = byPreview.get(key);
  if (s === undefined) {
    s = { labels: { app, api, preview: key }, requests: new Map(), statuses: 0, rejected: new Map() };
    byPreview.set(key, s);
  }
  return s;
}

/**
 * Creates the metrics of a router (prom-client is loaded here). `stats` reads the engine's workers
 * when scraped; `logger` gets why a scrape failed (its client gets none of it: a collector of the
 * host's registry, or an engine's stats(), may fail with the host's internals).
 */
export function createMetrics(options: MetricsOptions | undefined, stats: (() => EngineStats) | undefined, logger?: Logger): MetricsRecorder {
  // eslint-disable-next-line @typescript-eslint/no-require-imports
  const prom = require('prom-client') as typeof import('prom-client');
  const registry = options?.registry ?? new prom.Registry();
  const prefix = options?.prefix ?? DEFAULT_PREFIX;
  const buckets = options?.buckets ?? DEFAULT_BUCKETS;
  const gauges = stats ? ['workers', 'workers_busy', 'jobs_queued'] : [];
  const names = [...METRICS, ...gauges].map((n) => prefix + n);
  // (every name is checked before one is registered: a clash leaves nothing of this router behind)
  for (const full of names) {
    if (registry.getSingleMetric(full)) {
      throw new ConfigError('metrics.prefix', `the registry already has a metric '${full}' (another router?): give each router its own prefix`);
    }
  }
  const name = (n: string) => prefix + n;
  const registers = [registry];
  const requests = new SeriesCounter<Labels & { status: string }>({ name: name('requests_total'), help: 'Requests answered, by app, API, preview path and HTTP status', labelNames: ['app', 'api', 'preview', 'status'], registers });
  const duration = new SeriesHistogram<Labels>({ name: name('request_duration_seconds'), help: 'Time from arrival to the response, by app, API and preview path', labelNames: ['app', 'api', 'preview'], buckets, registers });
  const scriptTime = new SeriesHistogram<Labels>({ name: name('script_duration_seconds'), help: "Time a request's scripts ran on the engine (all stages), by app, API and preview path", labelNames: ['app', 'api', 'preview'], buckets, registers });
  const queueWait = new SeriesHistogram<{ app: string }>({ name: name('queue_wait_seconds'), help: 'Time a request waited for a script worker, by app', labelNames: ['app'], buckets, registers });
  const admitted = new SeriesCounter<Labels>({ name: name('rate_limit_admitted_total'), help: 'Requests admitted by a rate limit (at once or after a wait)', labelNames: ['app', 'api', 'preview'], registers });
  const waited = new SeriesCounter<Labels>({ name: name('rate_limit_waited_total'), help: 'Requests admitted by a rate limit after waiting for their slot', labelNames: ['app', 'api', 'preview'], registers });
  const waitTime = new SeriesHistogram<Labels>({ name: name('rate_limit_wait_seconds'), help: 'How long admitted requests waited for their rate-limit slot', labelNames: ['app', 'api', 'preview'], buckets, registers });
  const rejected = new SeriesCounter<Labels & { reason: string }>({ name: name('rate_limit_rejected_total'), help: 'Requests a rate limit turned away, by reason (rate_limited, queue_full, client_gone)', labelNames: ['app', 'api', 'preview', 'reason'], registers });
  const gauge = (n: string, help: string, pick: (s: EngineStats) => number) =>
    new prom.Gauge({
      name: name(n),
      help,
      registers,
      collect() {
        const s = stats?.();
        if (s) this.set(pick(s));
      },
    });
  if (stats) {
    gauge('workers', 'Script workers running', (s) => s.workers);
    gauge('workers_busy', 'Script workers running a job', (s) => s.busy);
    gauge('jobs_queued', 'Script jobs waiting for a worker', (s) => s.queued);
  }
  const maxApis = options?.maxApis ?? DEFAULT_MAX_APIS;
  /** The (app, API) pairs with series of their own, least recently seen first. */
  const pairs = new Map<string, Pair>();
  /** Per app: how many pairs it has there, and its queue_wait_seconds series (by app). Also '' and (other). */
  const apps = new Map<string, { pairs: number; queue?: HistogramSeries<{ app: string }> }>();
  const drop = (p: Pair) => {
    for (const s of p.series.values()) {
      for (const c of s.requests.values()) requests.remove(c);
      for (const c of s.rejected.values()) rejected.remove(c);
      if (s.duration) duration.remove(s.duration);
      if (s.script) scriptTime.remove(s.script);
      if (s.admitted) admitted.remove(s.admitted);
      if (s.waited) waited.remove(s.waited);
      if (s.waitTime) waitTime.remove(s.waitTime);
    }
    const a = apps.get(p.app)!;
    if (--a.pairs > 0) return;
    apps.delete(p.app);
    if (a.queue) queueWait.remove(a.queue);
  };
  /**
   * The record of an (app, API) pair, made the most recently seen; undefined when it counts as
   * (other): `maxApis` pairs have series and none has been idle for IDLE_SERIES_MS. A request that
   * matched no API (both empty) is never counted against the bound: null.
   */
  const pairOf = (app: string, api: string): Pair | null | undefined => {
    if (app === '' && api === '') return null;
    // (an app named `(other)` with an API `(other)` has the labels of the pairs beyond maxApis: its
    // own series would be a second series of the same labels, which Prometheus refuses)
    if (app === OTHER && api === OTHER) return undefined;
    const key = JSON.stringify([app, api]);
    const now = performance.now();
    let p = pairs.get(key);
    if (p !== undefined) {
      p.seen = now;
      pairs.delete(key); // (to the most recently seen end)
      pairs.set(key, p);
      return p;
    }
    if (pairs.size >= maxApis) {
      const [oldKey, oldest] = pairs.entries().next().value as [string, Pair];
      if (now - oldest.seen < IDLE_SERIES_MS) return undefined;
      pairs.delete(oldKey);
      drop(oldest);
    }
    p = { app, seen: now, series: new Map() };
    pairs.set(key, p);
    const a = apps.get(app);
    if (a) a.pairs++;
    else apps.set(app, { pairs: 1 });
    return p;
  };
  /** The series of requests that matched no API, and of the pairs counted as (other). */
  const unmatched = new Map<string, Series>();
  const others = new Map<string, Series>();
  /** The series a request of (app, api) is counted in. */
  const seriesFor = (app: string, api: string, preview: boolean): Series => {
    const p = pairOf(app, api);
    if (p) return seriesOf(p.series, app, api, preview);
    return p === null ? seriesOf(unmatched, app, api, preview) : seriesOf(others, OTHER, OTHER, preview);
  };
  /** The queue_wait_seconds series of an app ('' and (other) included: they are never dropped). */
  const queueOf = (app: string): HistogramSeries<{ app: string }> => {
    let a = apps.get(app);
    if (a === undefined) apps.set(app, (a = { pairs: 0 }));
    return (a.queue ??= queueWait.series({ app }));
  };
  const text = () => registry.metrics();
  return {
    registry,
    contentType: registry.contentType,
    text,
    handler(_req, res) {
      Promise.resolve().then(text).then(
        (body) => {
          res.statusCode = 200;
          res.setHeader('Content-Type', registry.contentType);
          res.end(body);
        },
        (err: unknown) => {
          res.statusCode = 500;
          res.setHeader('Content-Type', 'text/plain; charset=utf-8');
          logger?.error(`scriptable-api: collecting the metrics failed: ${thrownText(err)}`);
          res.end('metrics failed');
        },
      );
    },
    close() {
      for (const n of names.splice(0)) registry.removeSingleMetric(n);
      pairs.clear();
      apps.clear();
      unmatched.clear();
      others.clear();
    },
    request(app, api, preview, status, seconds) {
      const s = seriesFor(app, api, preview);
      let c = s.requests.get(status);
      if (c === undefined) {
        const own = s.statuses < MAX_STATUSES;
        const key = own ? status : `${Math.floor(status / 100)}xx`;
        c = s.requests.get(key);
        if (c === undefined) {
          s.requests.set(key, (c = requests.series({ ...s.labels, status: String(key) })));
          if (own) s.statuses++;
        }
      }
      requests.inc(c);
      duration.observe((s.duration ??= duration.series(s.labels)), seconds);
    },
    script(app, api, preview, scriptSeconds, queueSeconds) {
      const s = seriesFor(app, api, preview);
      if (scriptSeconds !== undefined) scriptTime.observe((s.script ??= scriptTime.series(s.labels)), scriptSeconds);
      if (queueSeconds !== undefined) queueWait.observe(queueOf(s.labels.app), queueSeconds);
    },
    rateLimit(app, api, preview, outcome, detail) {
      const s = seriesFor(app, api, preview);
      if (outcome === 'admitted') {
        admitted.inc((s.admitted ??= admitted.series(s.labels)));
        const ms = detail.waitedMs ?? 0;
        if (ms > 0) waited.inc((s.waited ??= waited.series(s.labels)));
        waitTime.observe((s.waitTime ??= waitTime.series(s.labels)), ms / 1000);
      } else {
        const reason = detail.reason ?? 'rate_limited';
        let c = s.rejected.get(reason);
        if (c === undefined) s.rejected.set(reason, (c = rejected.series({ ...s.labels, reason })));
        rejected.inc(c);
      }
    },
  };
}
