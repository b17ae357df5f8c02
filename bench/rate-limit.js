#!/usr/bin/env node
'use strict';
/**
 * Rate limiting benchmarks (run `npm run build` first):
 *
 *   node bench/rate-limit.js                      # overhead + accuracy (memory and Redis)
 *   node bench/rate-limit.js --duration 10 --rounds 9
 *   node bench/rate-limit.js --only overhead      # or: --only accuracy
 *   REDIS_URL=redis://127.0.0.1:6379 node bench/rate-limit.js   # use this Redis (else a
 *                                                 # throw-away redis-server is started, if installed)
 *
 * 1. Overhead: one server process, one router, three APIs running the same script:
 *      none  — no rateLimit
 *      zero  — rateLimit { requestsPerSecond: 0 } (enabled but unlimited: inactive)
 *      perip — rateLimit { requestsPerSecond: 1e6 } per IP (every request reserves a slot)
 *    Requests carry X-Forwarded-For from a pool of 1000 addresses (trust proxy on), so the per-IP
 *    rule keeps 1000 buckets. Each round runs the three APIs back to back (order alternating);
 *    the cost is the median over rounds of each round's req/s against that round's `none`, which
 *    keeps other load on the machine from skewing it. Before that, the limiter alone is timed in
 *    this process (ns per isActive / acquire).
 * 2. Accuracy: a 10 req/s `global` rule (timeoutMs 0) for 10 s under 200 req/s of evenly paced
 *    offered load: in memory (one process), and with Redis (two server processes sharing it,
 *    requests alternating between them).
 *    Prints admitted (200) and rejected (429) counts; the rule allows 10 × 10 s = 100 (+1 for the
 *    request at t = 0, since admissions are spaced by 100 ms from the first one). Run twice: with
 *    timeoutMs 0, a request arriving a moment before its slot is rejected and the next admission
 *    starts the spacing again from its own arrival, so each period gains the gap between arrivals
 *    (on average half of 5 ms here) and a little less than the rule is admitted; with timeoutMs 10
 *    (more than the gap between arrivals) that request waits for the slot and the schedule holds.
 */
const { fork } = require('node:child_process');
const path = require('node:path');
const { performance } = require('node:perf_hooks');

// ---------------------------------------------------------------------------------------------
// Server mode (a child process): node bench/rate-limit.js --serve '{"store":"memory"|"redis", ...}'
// ---------------------------------------------------------------------------------------------

function serve(cfg) {
  const express = require('express');
  const { createApiRouter, MemoryRegistry, RedisRateLimitStore } = require(process.env.SCRIPTABLE_API_PATH || '..');
  const registry = new MemoryRegistry();
  const APP = 'bench';
  registry.putScript(APP, 'main.js', 'export function fn(ctx) { return { ok: true } }');
  const call = { script: 'main.js', function: 'fn' };
  registry.putApi(APP, { path: 'none', call, returnType: 'JSON' });
  registry.putApi(APP, { path: 'zero', call, returnType: 'JSON', rateLimit: { requestsPerSecond: 0 } });
  registry.putApi(APP, { path: 'perip', call, returnType: 'JSON', rateLimit: { requestsPerSecond: 1e6 } });
  for (const timeoutMs of [0, 10]) {
    registry.putApi(APP, { path: `accuracy${timeoutMs}`, call, returnType: 'JSON', rateLimit: { requestsPerSecond: 10, timeoutMs, identifier: 'global' } });
  }
  const store = cfg.redisUrl ? new RedisRateLimitStore({ url: cfg.redisUrl, prefix: cfg.prefix }) : undefined;
  const router = createApiRouter({ registry, logger: false, rateLimit: store ? { store } : undefined });
  const app = express();
  app.set('trust proxy', true);
  app.use('/web0/api', router);
  const server = app.listen(0, '127.0.0.1', () => process.send({ type: 'listening', port: server.address().port }));
  server.keepAliveTimeout = 60_000;
  const shutdown = async () => {
    server.close();
    server.closeAllConnections?.();
    await router.close();
    if (store) await store.close();
    process.exit(0);
  };
  process.on('message', (m) => m?.type === 'close' && void shutdown());
  process.on('disconnect', () => void shutdown());
}

// ---------------------------------------------------------------------------------------------
// Driver
// ---------------------------------------------------------------------------------------------
function parseArgs(argv) {
  const o = { duration: 3, warmup: 2, rounds: 7, connections: 50, only: undefined, accuracySeconds: 10, offered: 200 };
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i];
    const next = () => argv[++i];
    if (a === '--duration') o.duration = Number(next());
    else if (a === '--warmup') o.warmup = Number(next());
    else if (a === '--rounds') o.rounds = Number(next());
    else if (a === '--connections') o.connections = Number(next());
    else if (a === '--only') o.only = next();
    else if (a === '--accuracy-seconds') o.accuracySeconds = Number(next());
    else if (a === '--offered') o.offered = Number(next());
    else throw new Error(`unknown option ${a}`);
  }
  return o;
}

function startServer(cfg) {
  return new Promise((resolve, reject) => {
    const child = fork(__filename, ['--serve', JSON.stringify(cfg)], { stdio: ['ignore', 'inherit', 'inherit', 'ipc'] });
    child.once('error', reject);
    child.once('exit', (code) => reject(new Error(`bench server exited with ${code}`)));
    child.on('message', (m) => {
      if (m?.type === 'listening') {
        child.removeAllListeners('exit');
        resolve({
          url: `http://127.0.0.1:${m.port}`,
          close: () =>
            new Promise((r) => {
              child.once('exit', r);
              child.send({ type: 'close' });
            }),
        });
      }
    });
  });
}

const IPS = Array.from({ length: 1000 }, (_, i) => `10.${(i >> 8) & 255}.${i & 255}.${(i * 7) % 250 + 1}`);

function cannon(opts) {
  const autocannon = require('autocannon');
  let n = 0;
  return autocannon({
    ...opts,
    requests: [
      {
        setupRequest(req) {
          req.headers = { ...req.headers, 'x-forwarded-for': IPS[n++ % IPS.length] };
          return req;
        },
      },
    ],
  });
}

const median = (xs) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];

async function overhead(o) {
  const server = await startServer({});
  const apis = ['none', 'zero', 'perip'];
  const label = { none: 'no rule', zero: 'rule, 0 req/s (inactive)', perip: 'per-IP rule, 1e6 req/s' };
  const rps = { none: [], zero: [], perip: [] };
  const p99 = { none: [], zero: [], perip: [] };
  const errors = { none: 0, zero: 0, perip: 0 };
  try {
    for (const api of apis) await cannon({ url: `${server.url}/web0/api/bench/${api}`, connections: o.connections, duration: o.warmup });
    for (let r = 0; r < o.rounds; r++) {
      for (const api of r % 2 ? [...apis].reverse() : apis) {
        const res = await cannon({ url: `${server.url}/web0/api/bench/${api}`, connections: o.connections, duration: o.duration });
        rps[api].push(res.requests.average);
        p99[api].push(res.latency.p99);
        errors[api] += res.non2xx + res.errors + res.timeouts;
      }
    }
  } finally {
    await server.close();
  }
  // Other load on the machine moves whole rounds up and down: compare APIs within each round.
  const ratio = (api) => rps[api].map((x, i) => x / rps.none[i] - 1);
  console.log(`\nOverhead: ${o.rounds} rounds × ${o.duration} s, ${o.connections} connections, 1000 client IPs`);
  console.log(
    `${'API'.padEnd(28)}${'req/s'.padStart(9)}${'p99 ms'.padStart(8)}${'vs none'.padStart(9)}${'non-2xx'.padStart(9)}   per round: req/s (vs none)`,
  );
  console.log(`${''.padEnd(28)}${'median'.padStart(9)}${'median'.padStart(8)}${'median'.padStart(9)}`);
  for (const api of apis) {
    const delta = api === 'none' ? '' : `${(median(ratio(api)) * 100).toFixed(1)}%`;
    const perRound = rps[api]
      .map((x, i) => (api === 'none' ? x.toFixed(0) : `${x.toFixed(0)} (${(ratio(api)[i] * 100).toFixed(1)}%)`))
      .join('  ');
    console.log(
      `${label[api].padEnd(28)}${median(rps[api]).toFixed(0).padStart(9)}${String(median(p99[api])).padStart(8)}${delta.padStart(9)}${String(errors[api]).padStart(9)}   ${perRound}`,
    );
  }
}

/** The limiter alone, in this process: ns per acquire() of a request admitted at once. */
async function micro() {
  const { createRateLimiter } = require(path.join(process.env.SCRIPTABLE_API_PATH || path.join(__dirname, '..'), 'dist', 'cjs', 'rate-limit'));
  const limiter = createRateLimiter(undefined, undefined);
  const reqs = IPS.map((ip) => ({ ip, headers: {}, url: '/', socket: { remoteAddress: ip } }));
  const cases = [
    ['isActive, rule 0 req/s', { requestsPerSecond: 0 }, 'active'],
    ['acquire, per-IP rule', { requestsPerSecond: 1e6 }, 'acquire'],
    ['acquire, {header.x-user}', { requestsPerSecond: 1e6, identifier: 'u:{header.x-user}' }, 'acquire'],
  ];
  console.log('\nThe limiter alone (this process, 1000 IPs, every request admitted at once)');
  for (const [name, rule, kind] of cases) {
    const n = kind === 'active' ? 5_000_000 : 500_000;
    for (let round = 0; round < 2; round++) {
      const t0 = process.hrtime.bigint();
      if (kind === 'active') {
        let k = 0;
        for (let i = 0; i < n; i++) if (limiter.isActive(rule)) k++;
        if (k) throw new Error('unexpected');
      } else {
        for (let i = 0; i < n; i += 1000) {
          const batch = [];
          for (let j = 0; j < 1000; j++) batch.push(limiter.acquire({ appId: 'bench', apiPath: 'p', rule, req: reqs[j] }));
          const out = await Promise.all(batch);
          if (!out[0].ok) throw new Error('unexpected rejection');
        }
      }
      const ns = Number(process.hrtime.bigint() - t0) / n;
      if (round === 1) console.log(`${name.padEnd(28)}${ns.toFixed(0).padStart(8)} ns/op`);
    }
  }
  await limiter.close();
}

/**
 * Evenly paced load: one request every 1000 / rate ms (scheduled against the clock, so timer
 * drift does not accumulate), spread round-robin over the servers. (autocannon's overallRate
 * sends each second's quota in a burst at the start of the second, which a no-burst limiter
 * answers with one admission per burst: not the load this run is about.)
 */
async function pacedLoad(urls, rate, seconds) {
  const http = require('node:http');
  const agent = new http.Agent({ keepAlive: true, maxSockets: 64 });
  const counts = { sent: 0, admitted: 0, rejected: 0, other: 0 };
  const admittedAt = [];
  const every = 1000 / rate;
  const total = Math.round(rate * seconds);
  const t0 = performance.now();
  const pending = [];
  for (let i = 0; i < total; i++) {
    const due = t0 + i * every;
    const delay = due - performance.now();
    if (delay > 1) await new Promise((r) => setTimeout(r, delay));
    counts.sent++;
    pending.push(
      new Promise((resolve) => {
        const req = http.get(urls[i % urls.length], { agent }, (res) => {
          res.resume();
          res.on('end', () => {
            if (res.statusCode === 200) {
              counts.admitted++;
              admittedAt.push(performance.now() - t0);
            } else if (res.statusCode === 429) counts.rejected++;
            else counts.other++;
            resolve();
          });
        });
        req.on('error', () => {
          counts.other++;
          resolve();
        });
      }),
    );
  }
  await Promise.all(pending);
  agent.destroy();
  return { ...counts, elapsed: (performance.now() - t0) / 1000, admittedAt: admittedAt.sort((a, b) => a - b) };
}

async function accuracyRun(servers, o, api) {
  const r = await pacedLoad(
    servers.map((s) => `${s.url}/web0/api/bench/${api}`),
    o.offered,
    o.accuracySeconds,
  );
  const gaps = [];
  for (let i = 1; i < r.admittedAt.length; i++) gaps.push(r.admittedAt[i] - r.admittedAt[i - 1]);
  gaps.sort((a, b) => a - b);
  return {
    sent: r.sent,
    admitted: r.admitted,
    rejected: r.rejected,
    other: r.other,
    gaps: gaps.length ? `${gaps[0].toFixed(0)} / ${median(gaps).toFixed(0)} / ${gaps[gaps.length - 1].toFixed(0)}` : '-',
  };
}

async function accuracy(o) {
  const rows = [];
  const expected = 10 * o.accuracySeconds;
  {
    const server = await startServer({});
    try {
      // warm the script up on another API so compile time does not shift the first admission
      await cannon({ url: `${server.url}/web0/api/bench/none`, connections: 2, amount: 50 });
      for (const t of [0, 10]) rows.push({ store: `memory, 1 process`, t, ...(await accuracyRun([server], o, `accuracy${t}`)) });
    } finally {
      await server.close();
    }
  }
  let redis;
  let redisUrl = process.env.REDIS_URL;
  if (!redisUrl) {
    const { startRedis, redisServerPath } = require(path.join(__dirname, '..', 'test', 'helpers', 'redis.js'));
    if (redisServerPath()) {
      redis = await startRedis();
      redisUrl = redis.url;
    }
  }
  if (redisUrl) {
    const prefix = `bench:${process.pid}:${Date.now()}:`;
    const servers = await Promise.all([startServer({ redisUrl, prefix }), startServer({ redisUrl, prefix })]);
    try {
      await Promise.all(servers.map((s) => cannon({ url: `${s.url}/web0/api/bench/none`, connections: 2, amount: 50 })));
      for (const t of [0, 10]) rows.push({ store: 'Redis, 2 processes', t, ...(await accuracyRun(servers, o, `accuracy${t}`)) });
    } finally {
      await Promise.all(servers.map((s) => s.close()));
      if (redis) await redis.stop();
    }
  } else {
    rows.push({ store: 'Redis: skipped (no REDIS_URL, no redis-server)' });
  }
  console.log(`\nAccuracy: 10 req/s global rule, ${o.accuracySeconds} s, ~${o.offered} req/s offered; allowed ${expected} (+1 at t = 0)`);
  console.log(`${'store'.padEnd(22)}${'timeoutMs'.padStart(10)}${'sent'.padStart(8)}${'admitted'.padStart(10)}${'429'.padStart(8)}${'other'.padStart(8)}   gap between admissions, ms (min / median / max)`);
  for (const r of rows) {
    if (r.sent === undefined) console.log(r.store);
    else console.log(`${r.store.padEnd(22)}${String(r.t).padStart(10)}${String(r.sent).padStart(8)}${String(r.admitted).padStart(10)}${String(r.rejected).padStart(8)}${String(r.other).padStart(8)}   ${r.gaps}`);
  }
}

async function main() {
  const o = parseArgs(process.argv.slice(2));
  if (o.only !== 'accuracy') await micro();
  if (o.only !== 'accuracy') await overhead(o);
  if (o.only !== 'overhead') await accuracy(o);
}

if (process.argv[2] === '--serve') {
  serve(JSON.parse(process.argv[3] || '{}'));
} else {
  main().catch((err) => {
    console.error(err);
    process.exit(1);
  });
}
