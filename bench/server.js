'use strict';
/**
 * One benchmark server, run in its own process by bench/run.js:
 *
 *   node bench/server.js <config> [--workers N] [--version-every N]
 *
 * Configs: express | quickjs | quickjs-hooks | vm2 | vm2-hooks | router-noop, and the diagnostics
 * quickjs-inline | vm2-inline | quickjs-empty-hooks | vm2-empty-hooks | quickjs-busy | vm2-busy. Every config answers GET /web0/api/bench/p with `{"ok":true}` (200,
 * JSON). `router-noop` is a diagnostic: the router with a ScriptEngine object that answers at once
 * on the main thread (no workers, no script), so its cost is the router's own main-thread work per
 * request. `-inline` is a diagnostic too: no hooks, but the call does the hooks' work itself (it
 * calls the same before and after functions from inside the call), so it shows what the hooks'
 * work costs without the two extra stages. `-empty-hooks`: before and after hooks whose bodies are
 * empty, so it shows what the two extra stages cost by themselves. `-busy`: no hooks, and a call
 * that loops for about as long as the hooked job runs in QuickJS but sends and returns what the
 * trivial call does, so it shows what the workers' CPU alone costs the main thread.
 *
 * It listens on 127.0.0.1, port 0. Started with an IPC channel (child_process.fork) it reports
 * `{ type: 'listening', port }` and answers `{ type: 'stats' }` with `{ type: 'stats', rss, ... }`
 * and `{ type: 'close' }` by closing the router and exiting. Started by hand it prints the URL, so
 * it can be profiled directly: `node --cpu-prof bench/server.js quickjs` and drive it with
 * autocannon from another shell.
 *
 * `--version-every N` (router configs): every N requests the script's source is replaced by a new
 * version (same code, a comment with a counter), through the registry's putScript — to show that
 * script versions do not leak.
 *
 * The package is loaded from `..` (run `npm run build` first), or from SCRIPTABLE_API_PATH.
 */
const fs = require('node:fs');
const { performance } = require('node:perf_hooks');
const express = require('express');

const args = process.argv.slice(2);
const config = args[0] ?? 'quickjs';
function flag(name, fallback) {
  const i = args.indexOf(name);
  return i >= 0 && args[i + 1] !== undefined ? Number(args[i + 1]) : fallback;
}
const workers = flag('--workers', undefined);
const versionEvery = flag('--version-every', 0);

const APP = 'bench';
const { MAIN, HOOKS, INLINE, EMPTY_HOOKS, BUSY } = require('./scripts');

/** A ScriptEngine that runs nothing: every job ends with the JSON `{"ok":true}`. */
const NOOP_ENGINE = {
  name: 'noop',
  async run(job) {
    return { state: job.state, outcome: { kind: 'output', output: { type: 'JSON', json: '{"ok":true}' } } };
  },
  async close() {},
};

let router;
let versions = 0;
const app = express();

if (config === 'express') {
  app.get('/web0/api/bench/p', (req, res) => {
    res.json({ ok: true });
  });
} else {
  const m = /^(quickjs|vm2|router-noop)(-hooks|-inline|-empty-hooks|-busy)?$/.exec(config);
  if (!m || (m[1] === 'router-noop' && m[2])) {
    console.error(`unknown config '${config}' (express | quickjs | quickjs-hooks | vm2 | vm2-hooks | router-noop | quickjs-inline | vm2-inline | quickjs-empty-hooks | vm2-empty-hooks | quickjs-busy | vm2-busy)`);
    process.exit(2);
  }
  const { createApiRouter, MemoryRegistry } = require(process.env.SCRIPTABLE_API_PATH || '..');
  const registry = new MemoryRegistry();
  const mainSource = m[2] === '-inline' ? INLINE : m[2] === '-busy' ? BUSY : MAIN;
  registry.putScript(APP, 'main.js', mainSource);
  const def = { path: 'p', call: { script: 'main.js', function: 'fn' }, returnType: 'JSON' };
  if (m[2] === '-hooks' || m[2] === '-empty-hooks') {
    registry.putScript(APP, 'hooks.js', m[2] === '-hooks' ? HOOKS : EMPTY_HOOKS);
    def.before = { script: 'hooks.js', function: 'before' };
    def.after = { script: 'hooks.js', function: 'after' };
  }
  registry.putApi(APP, def);
  const engine = m[1] === 'router-noop' ? NOOP_ENGINE : m[1];
  router = createApiRouter({ registry, engine, workers, logger: false });
  if (versionEvery > 0) {
    let count = 0;
    app.use((req, res, next) => {
      if (++count % versionEvery === 0) {
        versions++;
        registry.putScript(APP, 'main.js', `// version ${versions}\n${mainSource}`);
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
function stats() {
  const mem = process.memoryUsage();
  const { idle, active } = performance.eventLoopUtilization();
  return {
    type: 'stats',
    rss: mem.rss,
    heapUsed: mem.heapUsed,
    external: mem.external,
    arrayBuffers: mem.arrayBuffers,
    requests,
    versions,
    // Main-thread event loop (ms idle / active since start) and process CPU (µs, all threads).
    elu: { idle, active },
    cpu: process.cpuUsage(),
    threads: threads(),
  };
}

const server = app.listen(0, '127.0.0.1', () => {
  const { port } = server.address();
  if (process.send) process.send({ type: 'listening', port, pid: process.pid });
  else console.log(`bench server '${config}' on http://127.0.0.1:${port}/web0/api/${APP}/p (pid ${process.pid})`);
});
server.keepAliveTimeout = 60_000;
server.on('request', () => {
  requests++;
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
