#!/usr/bin/env node
'use strict';
/**
 * Throughput, latency and memory of the router against a plain Express handler.
 *
 *   npm run bench                                 # build, then every config, 5 rounds (2 s warm-up, 8 s measured each)
 *   node bench/run.js --rounds 3                  # every config 3 times, interleaved; the median round is shown
 *   node bench/run.js --workers 1,2               # router configs once per pool size (default = the library's)
 *   node bench/run.js --configs express,quickjs   # a subset (express quickjs quickjs-hooks vm2 vm2-hooks router-noop;
 *                                                 # also the diagnostics quickjs-inline vm2-inline, quickjs-empty-hooks vm2-empty-hooks,
 *                                                 # quickjs-busy vm2-busy: see server.js)
 *   node bench/run.js --rate 2000                 # a fixed request rate instead of as fast as possible
 *   node bench/run.js --leak --requests 1000000   # RSS over N requests, then over N requests with a new script version every 1000
 *   node bench/run.js --loader autocannon         # drive with autocannon (JavaScript, in this process) instead of wrk
 *                                                 # (the default is wrk, as the issue's reference figures, when it is
 *                                                 # installed: apt-get install wrk; autocannon otherwise, and for --rate)
 *
 * Other options: --duration S (8), --warmup S (2), --connections N (50), --sample S (leak: RSS every S s, 5),
 * --version-every N (leak, 1000), --json FILE (raw results), --wait-idle S (120; 0 = --no-wait-idle),
 * --max-noise CORES (0.3), --retries N (3).
 *
 * Each configuration runs in its own child process (bench/server.js), started fresh; this process
 * drives it with wrk or autocannon (bench/loaders.js) and asks it over IPC for its RSS (which covers its worker threads) and
 * its per-thread CPU. Every response must be a 200 with the body `{"ok":true}`: non-2xx, wrong
 * bodies and socket errors are counted and printed. On a shared machine the run waits for the
 * cores to be idle before each measurement and repeats a measurement that other processes
 * disturbed (more than --max-noise cores busy besides the server and the load generator).
 */
const { fork } = require('node:child_process');
const os = require('node:os');
const path = require('node:path');
const fs = require('node:fs');
const autocannon = require('autocannon');
const { load, checkLoader, defaultLoader } = require('./loaders');
const { pairedLines } = require('./paired');

const CONFIGS = ['express', 'quickjs', 'quickjs-hooks', 'vm2', 'vm2-hooks', 'router-noop'];
/** Configs run only when asked for (see bench/server.js). */
const DIAGNOSTICS = ['quickjs-inline', 'vm2-inline', 'quickjs-empty-hooks', 'vm2-empty-hooks', 'quickjs-busy', 'vm2-busy'];
const URL_PATH = '/web0/api/bench/p';
const EXPECT = '{"ok":true}';
const MiB = 1024 * 1024;

function parseArgs(argv) {
  const o = {
    duration: 8,
    warmup: 2,
    connections: 50,
    rounds: 5,
    configs: CONFIGS,
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
      case '--rounds': o.rounds = Number(next()); break;
      case '--configs': o.configs = next().split(','); break;
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
  for (const c of o.configs) if (!CONFIGS.includes(c) && !DIAGNOSTICS.includes(c)) throw new Error(`unknown config ${c} (${[...CONFIGS, ...DIAGNOSTICS].join(', ')})`);
  return o;
}

/** Start bench/server.js in a child process; resolves once it listens. */
function startServer(config, { workers, versionEvery, execArgv = [] } = {}) {
  const args = [config];
  if (workers !== undefined) args.push('--workers', String(workers));
  if (versionEvery) args.push('--version-every', String(versionEvery));
  const child = fork(path.join(__dirname, 'server.js'), args, { execArgv, stdio: ['ignore', 'inherit', 'inherit', 'ipc'] });
  const waiters = [];
  child.on('message', (msg) => {
    if (msg?.type === 'stats') waiters.shift()?.resolve(msg);
  });
  child.on('exit', (code, signal) => {
    for (const w of waiters.splice(0)) w.reject(new Error(`server '${config}' exited (${signal ?? code})`));
  });
  return new Promise((resolve, reject) => {
    const onExit = (code) => reject(new Error(`server '${config}' exited with code ${code} before listening`));
    child.once('exit', onExit);
    child.on('message', function onListen(msg) {
      if (msg?.type !== 'listening') return;
      child.off('message', onListen);
      child.off('exit', onExit);
      resolve({
        child,
        url: `http://127.0.0.1:${msg.port}${URL_PATH}`,
        stats: (gc = false) =>
          new Promise((res, rej) => {
            if (child.exitCode !== null || child.signalCode !== null) return rej(new Error(`server '${config}' is not running`));
            waiters.push({ resolve: res, reject: rej });
            child.send({ type: 'stats', gc });
          }),
        close: () =>
          new Promise((res) => {
            if (child.exitCode !== null || child.signalCode !== null || !child.connected) {
              if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
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

/** Busy CPU time of the whole machine (ms, all cores). */
function systemCpu() {
  let busy = 0;
  for (const c of os.cpus()) busy += c.times.user + c.times.nice + c.times.sys + c.times.irq;
  return { busy, at: Date.now() };
}

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

/**
 * On a shared machine, wait (at most `maxSeconds`) until other processes leave the cores alone:
 * less than 0.2 cores busy over 2 s. Returns the busy cores seen last.
 */
async function waitIdle(maxSeconds) {
  if (!maxSeconds) return 0;
  const until = Date.now() + maxSeconds * 1000;
  let busy = 0;
  let warned = false;
  for (;;) {
    const a = systemCpu();
    await sleep(2000);
    const b = systemCpu();
    busy = (b.busy - a.busy) / (b.at - a.at);
    if (busy < 0.2) return busy;
    if (Date.now() > until) {
      console.log(`  (machine still busy: ${busy.toFixed(2)} cores used by other processes; measuring anyway)`);
      return busy;
    }
    if (!warned) {
      console.log(`  (waiting for other processes to leave the cores: ${busy.toFixed(2)} cores busy)`);
      warned = true;
    }
  }
}

function cannon(opts) {
  return new Promise((resolve, reject) => {
    autocannon({ connections: 50, expectBody: EXPECT, ...opts }, (err, result) => (err ? reject(err) : resolve(result)));
  });
}

async function checkOnce(url) {
  const res = await fetch(url);
  const body = await res.text();
  if (res.status !== 200 || body !== EXPECT) throw new Error(`${url}: expected 200 ${EXPECT}, got ${res.status} ${body}`);
}

async function measure(config, workers, o) {
  await waitIdle(o.waitIdle);
  const srv = await startServer(config, { workers });
  try {
    await checkOnce(srv.url);
    const start = await srv.stats();
    const drive = { url: srv.url, connections: o.connections, expect: EXPECT };
    if (o.warmup > 0) await load(o.loader, { ...drive, duration: o.warmup });
    const before = await srv.stats();
    const sys0 = systemCpu();
    const r = await load(o.loader, { ...drive, duration: o.duration, rate: o.rate });
    const sys1 = systemCpu();
    const after = await srv.stats();
    await checkOnce(srv.url); // (wrk does not read bodies: one more check after its run)
    const wall = sys1.at - sys0.at;
    const serverCpu = (after.cpu.user + after.cpu.system - before.cpu.user - before.cpu.system) / 1000;
    const loadCpu = r.cpuMs;
    const served = after.requests - before.requests;
    return {
      config,
      workers,
      reqPerSec: r.reqPerSec,
      total: r.total,
      p50: r.p50,
      p99: r.p99,
      rssStart: start.rss,
      rssBefore: before.rss,
      rssAfter: after.rss,
      errors: r.errors,
      non2xx: r.non2xx,
      mismatches: r.mismatches,
      // Main-thread event-loop utilization during the measured run, and the server process's CPU
      // time (main thread + script workers) per request.
      elu: (after.elu.active - before.elu.active) / (after.elu.idle + after.elu.active - before.elu.idle - before.elu.active),
      cpuMsPerReq: serverCpu / Math.max(1, served),
      // Cores busy during the measured run: the server process, the load generator, and
      // everything else on the machine (noise: other processes competing for the 2 cores).
      serverCores: serverCpu / wall,
      loadCores: loadCpu / wall,
      otherCores: Math.max(0, (sys1.busy - sys0.busy) / wall - serverCpu / wall - loadCpu / wall),
      loadUsPerReq: (loadCpu * 1000) / Math.max(1, served),
      ...threadCosts(before.threads, after.threads, served),
    };
  } finally {
    await srv.close();
  }
}

/** µs per request of main-thread CPU, main-thread waiting for a core, and other threads' CPU. */
function threadCosts(a, b, n) {
  if (!a || !b) return { mainCpuUs: NaN, mainWaitUs: NaN, othersCpuUs: NaN };
  const per = (x, y) => (y - x) / 1000 / Math.max(1, n);
  return {
    mainCpuUs: per(a.main.cpuNs, b.main.cpuNs),
    mainWaitUs: per(a.main.waitNs, b.main.waitNs),
    othersCpuUs: per(a.others.cpuNs, b.others.cpuNs),
  };
}

function label(row) {
  return row.workers === undefined || row.config === 'express' ? row.config : `${row.config} w=${row.workers}`;
}

function table(headers, rows) {
  const widths = headers.map((h, i) => Math.max(h.length, ...rows.map((r) => String(r[i]).length)));
  const line = (cells) => '| ' + cells.map((c, i) => (i === 0 ? String(c).padEnd(widths[i]) : String(c).padStart(widths[i]))).join(' | ') + ' |';
  return [line(headers), '|' + widths.map((w, i) => (i === 0 ? ':' : '') + '-'.repeat(w + 1) + (i === 0 ? '' : ':')).join('|') + '|', ...rows.map(line)].join('\n');
}

const mib = (b) => (b / MiB).toFixed(0);

async function runThroughput(o) {
  const cpus = typeof os.availableParallelism === 'function' ? os.availableParallelism() : os.cpus().length;
  const defaultWorkers = Math.max(1, cpus - 1); // the library's default (lib/options.ts)
  console.log(
    `scriptable-api bench — ${new Date().toISOString()} — Node ${process.version} — ${os.cpus().length} cores (${os.cpus()[0]?.model?.trim()})\n` +
      `${o.connections} connections, ${o.warmup} s warm-up + ${o.duration} s measured per config, ${o.rounds} round(s); ` +
      `router workers: ${o.workers.map((w) => w ?? `default (${defaultWorkers})`).join(', ')}\n` +
      `package: ${process.env.SCRIPTABLE_API_PATH || require.resolve('..')}\n` +
      `Note: the load generator (${o.loader}${o.loader === 'autocannon' ? ', in this process' : ', one thread'}) runs on the same ${os.cpus().length} cores as the server under test.\n`,
  );
  const runs = [];
  for (const config of o.configs) {
    for (const workers of config === 'express' ? [undefined] : o.workers) runs.push({ config, workers });
  }
  const results = new Map();
  for (let round = 1; round <= o.rounds; round++) {
    for (const { config, workers } of runs) {
      let row;
      for (let attempt = 0; ; attempt++) {
        row = await measure(config, workers, o);
        if (row.otherCores <= o.maxNoise || attempt >= o.retries) break;
        console.log(`  round ${round} ${label(row).padEnd(18)} discarded: other processes used ${row.otherCores.toFixed(2)} cores (max ${o.maxNoise})`);
      }
      const key = label(row);
      console.log(
        `  round ${round} ${key.padEnd(18)} ${row.reqPerSec.toFixed(0).padStart(6)} req/s  p50 ${row.p50} ms  p99 ${row.p99} ms  ` +
          `non2xx ${row.non2xx}  errors ${row.errors}  other load ${row.otherCores.toFixed(2)} cores`,
      );
      if (!results.has(key)) results.set(key, []);
      results.get(key).push(row);
    }
  }
  // The round with the median req/s stands for each config.
  const chosen = [...results.entries()].map(([key, rows]) => {
    const sorted = [...rows].sort((a, b) => a.reqPerSec - b.reqPerSec);
    return { key, row: sorted[Math.floor((sorted.length - 1) / 2)], all: rows.map((r) => r.reqPerSec) };
  });
  const base = chosen.find((c) => c.key === 'express')?.row;
  const headers = ['config', 'req/s', 'x express', 'p50 ms', 'p99 ms', 'RSS before MiB', 'RSS after MiB', 'errors/non2xx'];
  const rows = chosen.map(({ key, row }) => [
    key,
    row.reqPerSec.toFixed(0),
    base ? (row.reqPerSec / base.reqPerSec).toFixed(2) : '-',
    row.p50,
    row.p99,
    mib(row.rssBefore),
    mib(row.rssAfter),
    `${row.errors}/${row.non2xx}` + (row.mismatches ? ` (${row.mismatches} bad bodies)` : ''),
  ]);
  console.log('\n' + table(headers, rows));
  console.log(
    '\nRSS before = after the warm-up (script workers started), after = at the end of the measured run; RSS covers the\n' +
      'server process with its worker threads. Ratios are against express in the same run.\n\nWhere the CPU goes during the measured run (µs per request):',
  );
  const us = (x) => (Number.isFinite(x) ? x.toFixed(0) : '-');
  console.log(
    '\n' +
      table(
        ['config', 'main thread ELU', 'main thread CPU', 'main thread waiting for a core', 'other server threads CPU', `${o.loader} CPU`, 'other processes (cores)'],
        chosen.map(({ key, row }) => [
          key,
          `${(row.elu * 100).toFixed(0)}%`,
          us(row.mainCpuUs),
          us(row.mainWaitUs),
          us(row.othersCpuUs),
          us(row.loadUsPerReq),
          row.otherCores.toFixed(2),
        ]),
      ),
  );
  console.log(
    '\nmain thread ELU = event-loop utilization of the server main thread; CPU and waiting times are from\n' +
      '/proc/<pid>/task/*/schedstat (waiting = runnable but not running: the cores were busy); other server threads =\n' +
      'the script workers plus V8/libuv helper threads; other processes = noise from the rest of the machine.',
  );
  if (o.rounds > 1) for (const c of chosen) console.log(`  ${c.key}: ${c.all.map((x) => x.toFixed(0)).join(', ')} req/s`);
  if (o.rounds > 1) {
    const series = new Map([...results.entries()].map(([key, rows]) => [key, { config: rows[0].config, workers: rows[0].workers, rps: rows.map((r) => r.reqPerSec) }]));
    const lines = pairedLines(series);
    if (lines.length) console.log(`\nPaired by round (ratio of req/s in the same round; see bench/paired.js):\n${lines.join('\n')}`);
  }

  const bad = chosen.filter((c) => c.row.errors || c.row.non2xx || c.row.mismatches);
  if (bad.length) console.log(`\nFAILED RESPONSES in: ${bad.map((c) => c.key).join(', ')}`);
  const perWorkers = new Map();
  for (const { key, row } of chosen) {
    if (row.config === 'express' || o.workers.length < 2) continue;
    const list = perWorkers.get(row.config) ?? [];
    list.push(row);
    perWorkers.set(row.config, list);
  }
  for (const [config, list] of perWorkers) {
    const best = list.reduce((a, b) => (b.reqPerSec > a.reqPerSec ? b : a));
    console.log(`best pool size for ${config}: ${best.workers ?? `default (${defaultWorkers})`} (${list.map((r) => `${r.workers ?? 'default'}: ${r.reqPerSec.toFixed(0)}`).join(', ')} req/s)`);
  }
  if (o.json) fs.writeFileSync(o.json, JSON.stringify({ date: new Date().toISOString(), node: process.version, cores: os.cpus().length, options: o, results: [...results.values()].flat() }, null, 2));
  return bad.length === 0;
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

async function leakPhase(title, o, versionEvery) {
  const srv = await startServer('quickjs', { workers: o.workers[0], versionEvery, execArgv: ['--expose-gc'] });
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
    await checkOnce(srv.url);
    await sample();
    const timer = setInterval(sample, o.sample * 1000);
    const r = await cannon({ url: srv.url, connections: o.connections, amount: o.requests });
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
    const half = series.filter((s) => s.requests >= o.requests / 2);
    const trend = slope(half.map((s) => [s.requests / 100_000, s.rss / MiB]));
    const summary = {
      title,
      requests: r.requests.total,
      non2xx: r.non2xx,
      errors: r.errors + r.timeouts,
      rssFirst: series[0].rss,
      rssWarm: warm.rss,
      rssLast: last.rss,
      rssMax: Math.max(...series.map((s) => s.rss)),
      trendMiBPer100k: trend,
      versions: last.versions,
      series,
    };
    console.log(
      `RSS: ${mib(summary.rssFirst)} MiB idle, ${mib(warm.rss)} MiB after ${warm.requests} requests, ${mib(last.rss)} MiB at the end ` +
        `(max ${mib(summary.rssMax)}); growth after warm-up ${((last.rss - warm.rss) / MiB).toFixed(1)} MiB; ` +
        `second-half trend ${trend.toFixed(2)} MiB per 100k requests` + (versionEvery ? `; ${last.versions} script versions` : ''),
    );
    return summary;
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
