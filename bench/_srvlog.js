'use strict';
/**
 * One benchmark server, run in its own process by bench/run.js:
 *
 *   node bench/server.js <config> [--workers N] [--version-every N] [--upstream URL] [--apps N] [--no-metrics]
 *
 * Configs (every one answers `{"ok":true}`, 200, JSON):
 *   express          a plain Express 5 handler at GET /web0/api/bench/p (the baseline)
 *   quickjs, vm2     the router at /web0/api; API `p` of app `bench` runs a trivial script
 *   quickjs-hooks,   the same with a before and an after hook (bench/scripts.js)
 *   vm2-hooks
 *   router-noop      the router with a ScriptEngine that answers at once on the main thread (no
 *                    workers, no script): the router's own cost
 *   io-express       Express, GET /web0/api/bench/p does `await fetch(upstream)` and answers its JSON
 *   io-sync          the router (QuickJS); the script calls the upstream with
 *                    `platform.http.request` in the spec's synchronous style
 *   io-await         the same script written with `await`
 *   tenants          the router (QuickJS) with N apps (`--apps`, 1000) `t0` .. `t<N-1>`, each with a
 *                    script of its own, at /web0/api/t<n>/p
 *
 * `--upstream URL`: the upstream of the io- configs (bench/upstream.js). `--version-every N`
 * (router configs): every N requests the script's source is replaced by a new version, through
 * the registry's putScript, to show that script versions do not leak. `--no-metrics` (router
 * configs): `metrics: false`, to measure what counting costs against the same config with them.
 *
 * It listens on 127.0.0.1, port 0. Started with an IPC channel (child_process.fork) it reports
 * `{ type: 'listening', port }`, answers `{ type: 'stats' }` with its RSS, CPU and per-thread CPU,
 * and `{ type: 'close' }` by closing the router and exiting. Started by hand it prints its URL,
 * so it can be profiled directly: `node --cpu-prof bench/server.js quickjs`, then drive it with
 * wrk or autocannon from another shell.
 *
 * The package is loaded from `..` (run `npm run build` first), or from SCRIPTABLE_API_PATH.
 */
const fs = require('node:fs');
const { performance } = require('node:perf_hooks');
const express = require('express');
const scripts = require('./scripts');

const args = process.argv.slice(2);
const config = args[0] ?? 'quickjs';
function flag(name, fallback) {
  const i = args.indexOf(name);
  return i >= 0 && args[i + 1] !== undefined ? args[i + 1] : fallback;
}
const workers = flag('--workers') === undefined ? undefined : Number(flag('--workers'));
const versionEvery = Number(flag('--version-every', 0));
const upstream = flag('--upstream');
const apps = Number(flag('--apps', 1000));
const metrics = !args.includes('--no-metrics');

const CONFIGS = ['express', 'quickjs', 'quickjs-hooks', 'vm2', 'vm2-hooks', 'router-noop', 'io-express', 'io-sync', 'io-await', 'tenants'];
if (!CONFIGS.includes(config)) {
  console.error(`unknown config '${config}' (${CONFIGS.join(' | ')})`);
  process.exit(2);
}
if (config.startsWith('io-') && !upstream) {
  console.error(`config '${config}' needs --upstream URL (node bench/upstream.js)`);
  process.exit(2);
}

/** A ScriptEngine that runs nothing: every job ends with the JSON `{"ok":true}`. */
const NOOP_ENGINE = {
  name: 'noop',
  async run(job) {
    return { state: job.state, outcome: { kind: 'output', output: { type: 'JSON', json: '{"ok":true}' } } };
  },
  async close() {},
};

const app = express();
let router;
let versions = 0;

if (config === 'express') {
  app.get('/web0/api/bench/p', (req, res) => {
    res.json({ ok: true });
  });
} else if (config === 'io-express') {
  app.get('/web0/api/bench/p', async (req, res) => {
    const answer = await fetch(upstream);
    res.json(await answer.json());
  });
} else {
  const { createApiRouter, MemoryRegistry } = require(process.env.SCRIPTABLE_API_PATH || '..');
  const registry = new MemoryRegistry();
  const call = { script: 'main.js', function: 'fn' };
  let mainSource = scripts.MAIN;
  if (config === 'io-sync') mainSource = scripts.ioSync(upstream);
  if (config === 'io-await') mainSource = scripts.ioAwait(upstream);

  if (config === 'tenants') {
    for (let n = 0; n < apps; n++) {
      registry.putScript(`t${n}`, 'main.js', scripts.tenant(n));
      registry.putApi(`t${n}`, { path: 'p', call, returnType: 'JSON' });
    }
  } else {
    registry.putScript('bench', 'main.js', mainSource);
    const def = { path: 'p', call, returnType: 'JSON' };
    if (config.endsWith('-hooks')) {
      registry.putScript('bench', 'hooks.js', scripts.HOOKS);
      def.before = { script: 'hooks.js', function: 'before' };
      def.after = { script: 'hooks.js', function: 'after' };
    }
    registry.putApi('bench', def);
  }

  const options = { registry, workers, logger: { info: (...a) => console.error("INFO", ...a), warn: (...a) => console.error("WARN", ...a), error: (...a) => console.error("ERROR", ...a) } };
  if (config === 'router-noop') options.engine = NOOP_ENGINE;
  else if (config.startsWith('vm2')) options.engine = 'vm2';
  if (config.startsWith('io-')) options.outbound = { allowPrivateNetworks: true, allowHosts: [new URL(upstream).hostname] };
  if (!metrics) options.metrics = false;
  router = createApiRouter(options);

  if (versionEvery > 0) {
    let count = 0;
    app.use((req, res, next) => {
      if (++count % versionEvery === 0) {
        versions++;
        registry.putScript('bench', 'main.js', `// version ${versions}\n${mainSource}`);
      }
      next();
    });
  }
  app.use('/web0/api', router);
}

/**
 * Per-thread scheduler statistics (Linux): CPU time and time spent runnable but waiting for a core,
 * for the main thread and for all other threads together (the script workers, V8 and libuv helpers).
 */
function threads() {
  const out = { main: { cpuNs: 0, waitNs: 0 }, others: { cpuNs: 0, waitNs: 0 } };
  let tids;
  try {
    tids = fs.readdirSync('/proc/self/task');
  } catch {
    return null;
  }
  for (const tid of tids) {
    let line;
    try {
      line = fs.readFileSync(`/proc/self/task/${tid}/schedstat`, 'utf8');
    } catch {
      continue; // the thread ended
    }
    const [cpu, wait] = line.trim().split(/\s+/).map(Number);
    const t = Number(tid) === process.pid ? out.main : out.others;
    t.cpuNs += cpu;
    t.waitNs += wait;
  }
  return out;
}

let requests = 0;
/** Connections accepted, open now, and that got at least one answer (each counted once). */
let connections = 0;
let open = 0;
let connectionsServed = 0;
function stats() {
  const mem = process.memoryUsage();
  const { idle, active } = performance.eventLoopUtilization();
  return {
    type: 'stats',
    rss: mem.rss,
    heapUsed: mem.heapUsed,
    external: mem.external,
    requests,
    connections,
    open,
    connectionsServed,
    versions,
    // Main-thread event loop (ms idle / active since start) and process CPU (µs, all threads).
    elu: { idle, active },
    cpu: process.cpuUsage(),
    threads: threads(),
  };
}

const server = app.listen(0, '127.0.0.1', () => {
  const { port } = server.address();
  const path = config === 'tenants' ? '/web0/api/t0/p' : '/web0/api/bench/p';
  if (process.send) process.send({ type: 'listening', port, pid: process.pid });
  else console.log(`bench server '${config}' on http://127.0.0.1:${port}${path} (pid ${process.pid})`);
});
server.keepAliveTimeout = 60_000;
server.on('connection', (socket) => {
  connections++;
  open++;
  socket.on('close', () => open--);
});
const served = new WeakSet();
server.on('request', (req) => {
  requests++;
  if (!served.has(req.socket)) {
    served.add(req.socket);
    connectionsServed++;
  }
});

async function shutdown() {
  server.close();
  server.closeAllConnections?.();
  if (router) await router.close();
  process.exit(0);
}

process.on('message', (msg) => {
  if (msg?.type === 'stats') {
    // A GC first, when exposed, so samples compare live memory rather than GC timing.
    if (msg.gc && global.gc) global.gc();
    process.send(stats());
  } else if (msg?.type === 'close') void shutdown();
});
process.on('disconnect', () => void shutdown());
process.on('SIGINT', () => void shutdown());
process.on('SIGTERM', () => void shutdown());
