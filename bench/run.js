#!/usr/bin/env node
'use strict';
/**
 * Throughput, latency and memory of the router against plain Express, side by side.
 *
 *   npm run bench                                 # build, then every configuration, 5 rounds (2 s warm-up, 8 s measured each)
 *   node bench/run.js --configs trivial           # one group (trivial, io, tenants) or single configs (quickjs,io-sync,...)
 *   node bench/run.js --rounds 3                  # every config 3 times, interleaved; the median round is shown
 *   node bench/run.js --workers 1,2               # router configs once per pool size (default = the library's)
 *   node bench/run.js --io-connections 100,400    # the connection counts of the io group (100, 400, 1000)
 *   node bench/run.js --rate 2000                 # a fixed request rate instead of as fast as possible (autocannon)
 *   node bench/run.js --leak --requests 1000000   # RSS over N requests, then over N requests with a new script version every 1000
 *   node bench/run.js --loader autocannon         # drive with autocannon (in this process) instead of wrk
 *
 * Groups: trivial (express quickjs quickjs-hooks vm2 vm2-hooks router-noop, 50 connections),
 * io (io-express io-sync io-await at each --io-connections count, upstream answering in
 * --upstream-delay ms), tenants (tenants-one tenants-rotation: --apps apps each with its own
 * script, one app called or all in rotation). See bench/README.md.
 *
 * Other options: --duration S (8), --warmup S (2), --connections N (50), --apps N (1000),
 * --upstream-delay MS (100), --timeout S (30, per request), --sample S (leak: RSS every S s, 5),
 * --version-every N (leak, 1000), --json FILE (raw results), --wait-idle S (120; 0 = --no-wait-idle),
 * --max-noise CORES (0.3), --retries N (3).
 *
 * Each configuration runs in its own child process (bench/server.js), started fresh; this process
 * drives it with wrk or autocannon (bench/loaders.js) and asks it over IPC for its RSS (which
 * covers its worker threads; sampled every second for the peak) and its per-thread CPU. Every
 * response must be a 200 with the body `{"ok":true}`: non-2xx, wrong bodies and socket errors are
 * counted and printed. On a shared machine the run waits for the cores to be idle before each
 * measurement and repeats a measurement that other processes disturbed (more than --max-noise
 * cores busy besides the server, the upstream and the load generator).
 */
const { fork } = require('node:child_process');
const os = require('node:os');
const path = require('node:path');
const fs = require('node:fs');
const autocannon = require('autocannon');
const { load, checkLoader, defaultLoader } = require('./loaders');
const { pairedLines } = require('./paired');

const GROUPS = {
  trivial: ['express', 'quickjs', 'quickjs-hooks', 'vm2', 'vm2-hooks', 'router-noop'],
  io: ['io-express', 'io-sync', 'io-await'],
  tenants: ['tenants-one', 'tenants-rotation'],
};
const ALL = Object.values(GROUPS).flat();
const BENCH_PATH = '/web0/api/bench/p';
const EXPECT = '{"ok":true}';
const MiB = 1024 * 1024;

function parseArgs(argv) {
  const o = {
    duration: 8,
    warmup: 2,
    connections: 50,
    ioConnections: [100, 400, 1000],
    apps: 1000,
    upstreamDelay: 100,
    timeout: 30,
    rounds: 5,
    configs: ALL,
    workers: [undefined],
    rate: 0,
    leak: false,
    requests: 1_000_000,
    sample: 5,
    versionEvery: 1000,
    json: undefined,
    waitIdle: 120,
    maxNoise: 0.3,
    retries: 3,
    loader: undefined,
  };
  const list = (v) => v.split(',').map(Number);
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i];
    const next = () => {
      if (argv[i + 1] === undefined) throw new Error(`${a} needs a value`);
      return argv[++i];
    };
    switch (a) {
      case '--duration': o.duration = Number(next()); break;
      case '--warmup': o.warmup = Number(next()); break;
      case '--connections': o.connections = Number(next()); break;
      case '--io-connections': o.ioConnections = list(next()); break;
      case '--apps': o.apps = Number(next()); break;
      case '--upstream-delay': o.upstreamDelay = Number(next()); break;
      case '--timeout': o.timeout = Number(next()); break;
      case '--rounds': o.rounds = Number(next()); break;
      case '--configs': o.configs = next().split(',').flatMap((c) => GROUPS[c] ?? [c]); break;
      case '--workers': o.workers = next().split(',').map((w) => (w === 'default' ? undefined : Number(w))); break;
      case '--rate': o.rate = Number(next()); break;
      case '--leak': o.leak = true; break;
      case '--requests': o.requests = Number(next()); break;
      case '--sample': o.sample = Number(next()); break;
      case '--version-every': o.versionEvery = Number(next()); break;
      case '--json': o.json = next(); break;
      case '--wait-idle': o.waitIdle = Number(next()); break;
      case '--no-wait-idle': o.waitIdle = 0; break;
      case '--max-noise': o.maxNoise = Number(next()); break;
      case '--retries': o.retries = Number(next()); break;
      case '--loader': o.loader = next(); break;
      case '-h':
      case '--help':
        {
          const lines = fs.readFileSync(__filename, 'utf8').split('\n');
          console.log(lines.slice(3, lines.indexOf(' */')).join('\n').replace(/^ \* ?/gm, ''));
        }
        process.exit(0);
        break;
      default:
        throw new Error(`unknown option ${a}`);
    }
  }
  if (o.leak) {
    if (o.loader !== undefined && o.loader !== 'autocannon') throw new Error('--leak runs a fixed number of requests with autocannon; drop --loader');
    o.loader = 'autocannon';
  } else {
    o.loader ??= defaultLoader(o);
    checkLoader(o.loader, o);
  }
  for (const c of o.configs) if (!ALL.includes(c)) throw new Error(`unknown config ${c} (groups ${Object.keys(GROUPS).join(', ')}; configs ${ALL.join(', ')})`);
  return o;
}

/**
 * The measurements of one round, in order: for each, the label its rows carry, the server config,
 * the connections, the paths driven, and the labels it is read against.
 */
function plan(o) {
  const runs = [];
  const wanted = (c) => o.configs.includes(c);
  const w = (workers) => (workers === undefined ? '' : ` w=${workers}`);
  for (const config of GROUPS.trivial.filter(wanted)) {
    for (const workers of config === 'express' ? [undefined] : o.workers) {
      const against = config === 'express' ? [] : [{ key: 'express' }];
      if (config.endsWith('-hooks')) against.push({ key: `${config.replace('-hooks', '')}${w(workers)}`, time: true });
      runs.push({ key: `${config}${w(workers)}`, config, server: config, workers, connections: o.connections, against });
    }
  }
  for (const c of o.ioConnections) {
    for (const config of GROUPS.io.filter(wanted)) {
      for (const workers of config === 'io-express' ? [undefined] : o.workers) {
        const against = config === 'io-express' ? [] : [{ key: `io-express c=${c}` }];
        runs.push({ key: `${config} c=${c}${w(workers)}`, config, server: config, workers, connections: c, against });
      }
    }
  }
  for (const config of GROUPS.tenants.filter(wanted)) {
    for (const workers of o.workers) {
      const count = config === 'tenants-one' ? 1 : o.apps;
      const against = config === 'tenants-one' ? [] : [{ key: `tenants-one${w(workers)}` }];
      const rotate = { prefix: '/web0/api/t', count, suffix: '/p' };
      runs.push({ key: `${config}${w(workers)}`, config, server: 'tenants', workers, connections: o.connections, rotate, against });
    }
  }
  return runs;
}

/** Start a child process; resolves once it reports the port it listens on. */
function startChild(file, args, { execArgv = [] } = {}) {
  const child = fork(path.join(__dirname, file), args, { execArgv, stdio: ['ignore', 'inherit', 'inherit', 'ipc'] });
  const waiters = [];
  child.on('message', (msg) => {
    if (msg?.type === 'stats') waiters.shift()?.resolve(msg);
  });
  child.on('exit', (code, signal) => {
    for (const w of waiters.splice(0)) w.reject(new Error(`${file} ${args[0] ?? ''} exited (${signal ?? code})`));
  });
  const running = () => child.exitCode === null && child.signalCode === null;
  return new Promise((resolve, reject) => {
    const onExit = (code) => reject(new Error(`${file} ${args.join(' ')} exited with code ${code} before listening`));
    child.once('exit', onExit);
    child.on('message', function onListen(msg) {
      if (msg?.type !== 'listening') return;
      child.off('message', onListen);
      child.off('exit', onExit);
      resolve({
        child,
        origin: `http://127.0.0.1:${msg.port}`,
        stats: (gc = false) =>
          new Promise((res, rej) => {
            if (!running()) return rej(new Error(`${file} is not running`));
            waiters.push({ resolve: res, reject: rej });
            child.send({ type: 'stats', gc });
          }),
        close: () =>
          new Promise((res) => {
            if (!running() || !child.connected) {
              if (running()) child.kill('SIGKILL');
              return res();
            }
            const kill = setTimeout(() => child.kill('SIGKILL'), 5000);
            child.once('exit', () => {
              clearTimeout(kill);
              res();
            });
            child.send({ type: 'close' });
          }),
      });
    });
  });
}

function startServer(config, { workers, versionEvery, upstream, apps, execArgv } = {}) {
  const args = [config];
  if (workers !== undefined) args.push('--workers', String(workers));
  if (versionEvery) args.push('--version-every', String(versionEvery));
  if (upstream) args.push('--upstream', upstream);
  if (apps) args.push('--apps', String(apps));
  return startChild('server.js', args, { execArgv });
}

/** Busy CPU time of the whole machine (ms, all cores). */
function systemCpu() {
  let busy = 0;
  for (const c of os.cpus()) busy += c.times.user + c.times.nice + c.times.sys + c.times.irq;
  return { busy, at: Date.now() };
}

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

/**
 * On a shared machine, wait (at most `maxSeconds`) until other processes leave the cores alone:
 * less than 0.2 cores busy over 2 s.
 */
async function waitIdle(maxSeconds) {
  if (!maxSeconds) return;
  const until = Date.now() + maxSeconds * 1000;
  let warned = false;
  for (;;) {
    const a = systemCpu();
    await sleep(2000);
    const b = systemCpu();
    const busy = (b.busy - a.busy) / (b.at - a.at);
    if (busy < 0.2) return;
    if (Date.now() > until) return console.log(`  (machine still busy: ${busy.toFixed(2)} cores used by other processes; measuring anyway)`);
    if (!warned) console.log(`  (waiting for other processes to leave the cores: ${busy.toFixed(2)} cores busy)`);
    warned = true;
  }
}

async function checkOnce(url) {
  const res = await fetch(url);
  const body = await res.text();
  if (res.status !== 200 || body !== EXPECT) throw new Error(`${url}: expected 200 ${EXPECT}, got ${res.status} ${body}`);
}

/** Calls every rotated path once (8 at a time): each app's first call, before the warm-up. */
async function firstPass(origin, { prefix, count, suffix }) {
  const t0 = Date.now();
  let n = 0;
  await Promise.all(Array.from({ length: 8 }, async () => {
    while (n < count) await checkOnce(`${origin}${prefix}${n++}${suffix}`);
  }));
  return (Date.now() - t0) / 1000;
}

/**
 * Waits until the server has accepted and closed every connection of the warm-up (at most 30 s):
 * `accepted` connections in all, back to `open` open ones (this process's own checks keep theirs).
 * A server whose event loop is busy accepts one connection per turn (libuv >= 1.45), so the
 * warm-up's last connections can still be queued when it ends: accepted during the measured run
 * they would cost it work and count as served there.
 */
async function warmUpGone(srv, accepted, open) {
  const until = Date.now() + 30_000;
  for (;;) {
    const s = await srv.stats();
    if ((s.connections >= accepted && s.open <= open) || Date.now() > until) return;
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
}

async function measure(run, o, upstream) {
  await waitIdle(o.waitIdle);
  const srv = await startServer(run.server, { workers: run.workers, upstream: upstream?.origin, apps: run.rotate ? o.apps : undefined });
  try {
    const url = run.rotate ? `${srv.origin}${run.rotate.prefix}0${run.rotate.suffix}` : `${srv.origin}${BENCH_PATH}`;
    await checkOnce(url);
    const firstPassS = run.rotate ? await firstPass(srv.origin, run.rotate) : undefined;
    const drive = { url, connections: run.connections, expect: EXPECT, timeout: o.timeout, rotate: run.rotate };
    if (o.warmup > 0) {
      const { connections, open } = await srv.stats();
      await load(o.loader, { ...drive, duration: o.warmup });
      await warmUpGone(srv, connections + run.connections, open);
    }
    const before = await srv.stats();
    const up0 = upstream ? (await upstream.stats()).cpu : 0;
    const sys0 = systemCpu();
    let peakRss = before.rss;
    const sampler = setInterval(() => srv.stats().then((s) => (peakRss = Math.max(peakRss, s.rss)), () => undefined), 1000);
    const r = await load(o.loader, { ...drive, duration: o.duration, rate: o.rate });
    clearInterval(sampler);
    const sys1 = systemCpu();
    const after = await srv.stats();
    const upstreamMs = upstream ? ((await upstream.stats()).cpu - up0) / 1000 : 0;
    await checkOnce(url); // (wrk does not read bodies: one more check after its run)
    const wall = sys1.at - sys0.at;
    const serverMs = (after.cpu.user + after.cpu.system - before.cpu.user - before.cpu.system) / 1000;
    const served = Math.max(1, after.requests - before.requests);
    return {
      ...run,
      reqPerSec: r.reqPerSec,
      total: r.total,
      p50: r.p50,
      p99: r.p99,
      // the load generator's connections that got an answer during the measured run (a
      // connection still in the server's accept queue has none: see bench/README.md)
      connectionsServed: after.connectionsServed - before.connectionsServed,
      rssBefore: before.rss,
      rssAfter: after.rss,
      rssPeak: Math.max(peakRss, after.rss),
      firstPassS,
      errors: r.errors,
      non2xx: r.non2xx,
      mismatches: r.mismatches,
      // Main-thread event-loop utilization during the measured run, and CPU per request.
      elu: (after.elu.active - before.elu.active) / (after.elu.idle + after.elu.active - before.elu.idle - before.elu.active),
      serverUsPerReq: (serverMs * 1000) / served,
      loadUsPerReq: (r.cpuMs * 1000) / served,
      upstreamUsPerReq: (upstreamMs * 1000) / served,
      mainWaitUs: after.threads && before.threads ? (after.threads.main.waitNs - before.threads.main.waitNs) / 1000 / served : NaN,
      // Cores busy during the run besides the server, the upstream and the load generator: noise.
      otherCores: Math.max(0, (sys1.busy - sys0.busy - serverMs - r.cpuMs - upstreamMs) / wall),
    };
  } finally {
    await srv.close();
  }
}

function table(headers, rows) {
  const widths = headers.map((h, i) => Math.max(h.length, ...rows.map((r) => String(r[i]).length)));
  const line = (cells) => '| ' + cells.map((c, i) => (i === 0 ? String(c).padEnd(widths[i]) : String(c).padStart(widths[i]))).join(' | ') + ' |';
  return [line(headers), '|' + widths.map((w, i) => (i === 0 ? ':' : '') + '-'.repeat(w + 1) + (i === 0 ? '' : ':')).join('|') + '|', ...rows.map(line)].join('\n');
}

const mib = (b) => (b / MiB).toFixed(0);
const us = (x) => (Number.isFinite(x) ? x.toFixed(0) : '-');
const ms = (x) => (Number.isFinite(x) ? String(Number(x.toFixed(1))) : '-');

function printResults(o, runs, results) {
  // The round with the median req/s stands for each configuration.
  const chosen = runs.map((run) => {
    const rows = [...results.get(run.key)].sort((a, b) => a.reqPerSec - b.reqPerSec);
    return rows[Math.floor((rows.length - 1) / 2)];
  });
  const byKey = new Map(chosen.map((row) => [row.key, row]));
  console.log(
    '\n' +
      table(
        ['config', 'connections (served)', 'req/s', 'x baseline', 'p50 ms', 'p99 ms', 'RSS peak MiB', 'errors/non2xx'],
        chosen.map((row) => {
          const base = byKey.get(row.against[0]?.key);
          const failures = `${row.errors}/${row.non2xx}` + (row.mismatches ? ` (${row.mismatches} bad bodies)` : '');
          const conns = row.connectionsServed < row.connections ? `${row.connections} (${row.connectionsServed})` : String(row.connections);
          return [row.key, conns, row.reqPerSec.toFixed(0), base ? (row.reqPerSec / base.reqPerSec).toFixed(2) : '-', ms(row.p50), ms(row.p99), mib(row.rssPeak), failures];
        }),
      ),
  );
  console.log(
    '\nx baseline: router configs against express, io- configs against io-express at the same connections,\n' +
      'tenants-rotation against tenants-one, each in the same run. RSS covers the server process with its worker threads.',
  );
  for (const row of chosen) if (row.firstPassS !== undefined) console.log(`${row.key}: first call of each of ${row.rotate.count} app(s) ${row.firstPassS.toFixed(1)} s (before the warm-up)`);
  console.log('\nWhere the CPU goes during the measured run (µs per request):\n');
  console.log(
    table(
      ['config', 'main thread ELU', 'server CPU', 'main thread waiting for a core', `${o.loader} CPU`, 'upstream CPU', 'other processes (cores)'],
      chosen.map((row) => [row.key, `${(row.elu * 100).toFixed(0)}%`, us(row.serverUsPerReq), us(row.mainWaitUs), us(row.loadUsPerReq), us(row.upstreamUsPerReq), row.otherCores.toFixed(2)]),
    ),
  );
  if (o.rounds > 1) {
    for (const run of runs) console.log(`  ${run.key}: ${results.get(run.key).map((x) => x.reqPerSec.toFixed(0)).join(', ')} req/s`);
    const series = new Map(runs.map((run) => [run.key, { rps: results.get(run.key).map((r) => r.reqPerSec), against: run.against }]));
    const lines = pairedLines(series);
    if (lines.length) console.log(`\nPaired by round (ratio of req/s in the same round; see bench/paired.js):\n${lines.join('\n')}`);
  }
  const bad = chosen.filter((row) => row.errors || row.non2xx || row.mismatches);
  if (bad.length) console.log(`\nFAILED RESPONSES in: ${bad.map((row) => row.key).join(', ')}`);
  return bad.length === 0;
}

async function runThroughput(o) {
  const cpus = typeof os.availableParallelism === 'function' ? os.availableParallelism() : os.cpus().length;
  const runs = plan(o);
  console.log(
    `scriptable-api bench — ${new Date().toISOString()} — Node ${process.version} — ${os.cpus().length} cores (${os.cpus()[0]?.model?.trim()})\n` +
      `${o.warmup} s warm-up + ${o.duration} s measured per config, ${o.rounds} round(s), ${o.loader}` +
      `${o.loader === 'autocannon' ? ' (in this process)' : ' (one thread)'} on the same cores as the server; ` +
      `router workers: ${o.workers.map((w) => w ?? `default (${Math.max(1, cpus - 1)})`).join(', ')}\n` +
      `package: ${process.env.SCRIPTABLE_API_PATH || require.resolve('..')}\n`,
  );
  const upstream = runs.some((r) => r.server.startsWith('io-')) ? await startChild('upstream.js', ['--delay', String(o.upstreamDelay)]) : undefined;
  if (upstream) console.log(`upstream: ${upstream.origin} answering in ${o.upstreamDelay} ms (bench/upstream.js)\n`);
  const results = new Map(runs.map((run) => [run.key, []]));
  try {
    for (let round = 1; round <= o.rounds; round++) {
      for (const run of runs) {
        let row;
        for (let attempt = 0; ; attempt++) {
          row = await measure(run, o, upstream);
          if (row.otherCores <= o.maxNoise || attempt >= o.retries) break;
          console.log(`  round ${round} ${run.key.padEnd(24)} discarded: other processes used ${row.otherCores.toFixed(2)} cores (max ${o.maxNoise})`);
        }
        console.log(
          `  round ${round} ${run.key.padEnd(24)} ${row.reqPerSec.toFixed(0).padStart(6)} req/s  p50 ${ms(row.p50)} ms  p99 ${ms(row.p99)} ms  ` +
            `RSS peak ${mib(row.rssPeak)} MiB  non2xx ${row.non2xx}  errors ${row.errors}  other load ${row.otherCores.toFixed(2)} cores`,
        );
        results.get(run.key).push(row);
      }
    }
  } finally {
    await upstream?.close();
  }
  const ok = printResults(o, runs, results);
  if (o.json) fs.writeFileSync(o.json, JSON.stringify({ date: new Date().toISOString(), node: process.version, cores: os.cpus().length, options: o, results: [...results.values()].flat() }, null, 2));
  return ok;
}

/** Least-squares slope of y over x. */
function slope(points) {
  const n = points.length;
  if (n < 2) return 0;
  const mx = points.reduce((s, p) => s + p[0], 0) / n;
  const my = points.reduce((s, p) => s + p[1], 0) / n;
  let num = 0;
  let den = 0;
  for (const [x, y] of points) {
    num += (x - mx) * (y - my);
    den += (x - mx) ** 2;
  }
  return den === 0 ? 0 : num / den;
}

function cannon(opts) {
  return new Promise((resolve, reject) => {
    autocannon({ expectBody: EXPECT, ...opts }, (err, result) => (err ? reject(err) : resolve(result)));
  });
}

async function leakPhase(title, o, versionEvery) {
  const srv = await startServer('quickjs', { workers: o.workers[0], versionEvery, execArgv: ['--expose-gc'] });
  const url = `${srv.origin}${BENCH_PATH}`;
  const series = [];
  const t0 = Date.now();
  let sampling = Promise.resolve();
  const sample = () => {
    sampling = sampling.then(async () => {
      const s = await srv.stats(true);
      series.push({ t: (Date.now() - t0) / 1000, requests: s.requests, rss: s.rss, heapUsed: s.heapUsed, external: s.external, versions: s.versions });
    });
    return sampling;
  };
  try {
    await checkOnce(url);
    await sample();
    const timer = setInterval(sample, o.sample * 1000);
    const r = await cannon({ url, connections: o.connections, amount: o.requests });
    clearInterval(timer);
    await sample();
    console.log(`\n${title}: ${r.requests.total} requests in ${r.duration.toFixed(0)} s (${r.requests.average.toFixed(0)} req/s), non2xx ${r.non2xx}, errors ${r.errors + r.timeouts}, bad bodies ${r.mismatches}`);
    console.log(table(
      ['t s', 'requests', 'RSS MiB', 'heap MiB', 'external MiB', 'script versions'],
      series.map((s) => [s.t.toFixed(0), s.requests, (s.rss / MiB).toFixed(1), (s.heapUsed / MiB).toFixed(1), (s.external / MiB).toFixed(1), s.versions]),
    ));
    // Growth after the first 10% of the requests (start-up, JIT, caches and pools filling), and the
    // trend over the second half as MiB per 100k requests.
    const warm = series.find((s) => s.requests >= o.requests * 0.1) ?? series[0];
    const last = series[series.length - 1];
    const trend = slope(series.filter((s) => s.requests >= o.requests / 2).map((s) => [s.requests / 100_000, s.rss / MiB]));
    const rssMax = Math.max(...series.map((s) => s.rss));
    console.log(
      `RSS: ${mib(series[0].rss)} MiB idle, ${mib(warm.rss)} MiB after ${warm.requests} requests, ${mib(last.rss)} MiB at the end ` +
        `(max ${mib(rssMax)}); growth after warm-up ${((last.rss - warm.rss) / MiB).toFixed(1)} MiB; ` +
        `second-half trend ${trend.toFixed(2)} MiB per 100k requests` + (versionEvery ? `; ${last.versions} script versions` : ''),
    );
    return { title, requests: r.requests.total, non2xx: r.non2xx, errors: r.errors + r.timeouts, rssFirst: series[0].rss, rssWarm: warm.rss, rssLast: last.rss, rssMax, trendMiBPer100k: trend, series };
  } finally {
    await srv.close();
  }
}

async function runLeak(o) {
  console.log(
    `scriptable-api leak check — ${new Date().toISOString()} — Node ${process.version} — ${os.cpus().length} cores\n` +
      `quickjs, ${o.requests} requests per phase, ${o.connections} connections, RSS sampled every ${o.sample} s (after a GC)` +
      (o.workers[0] !== undefined ? `, workers ${o.workers[0]}` : ''),
  );
  const a = await leakPhase('Phase 1: one script', o, 0);
  const b = await leakPhase(`Phase 2: a new script version every ${o.versionEvery} requests`, o, o.versionEvery);
  if (o.json) fs.writeFileSync(o.json, JSON.stringify({ date: new Date().toISOString(), node: process.version, cores: os.cpus().length, options: o, phases: [a, b] }, null, 2));
  return a.non2xx + a.errors + b.non2xx + b.errors === 0;
}

async function main() {
  const o = parseArgs(process.argv.slice(2));
  const ok = o.leak ? await runLeak(o) : await runThroughput(o);
  process.exitCode = ok ? 0 : 1;
}

main().catch((e) => {
  console.error(e);
  process.exit(1);
});
