#!/usr/bin/env node
'use strict';
/**
 * Where the server's main thread spends its time per request, under load.
 *
 *   node bench/profile.js [config ...] [--loader autocannon|wrk] [--duration 10] [--connections 50] [--rate R] [--top 25] [--dir DIR]
 *
 * For each config (default: express quickjs) it starts `node --cpu-prof bench/server.js <config>`
 * (every thread gets a profile: the main thread and each script worker), drives it with autocannon
 * (or wrk, `--loader wrk`, as bench/run.js: bench/loaders.js) for the duration, stops it, and prints for the main thread the top functions by self time and by
 * inclusive time in µs per request, then a one-line summary per worker thread. The .cpuprofile
 * files stay in DIR (open them in Chrome DevTools or speedscope for flame graphs). `--rate R` drives
 * a fixed R req/s instead of as many as possible: at a rate every config sustains, the µs per
 * request of the configs compare directly and the cores are not saturated.
 *
 * Notes: times are wall-clock samples of the thread, so on a 2-core machine shared by autocannon,
 * the script workers and the main thread, a syscall that wakes another thread (postMessage,
 * writev) also collects the time the thread spends preempted right after it. Compare with express
 * profiled the same way.
 */
const { fork } = require('node:child_process');
const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');
const { checkLoader, load } = require('./loaders');

const argv = process.argv.slice(2);
const configs = [];
const o = { loader: 'autocannon', rate: 0, duration: 10, connections: 50, top: 25, dir: fs.mkdtempSync(path.join(os.tmpdir(), 'scriptable-api-prof-')), interval: 250 };
for (let i = 0; i < argv.length; i++) {
  const a = argv[i];
  if (a === '--duration') o.duration = Number(argv[++i]);
  else if (a === '--connections') o.connections = Number(argv[++i]);
  else if (a === '--top') o.top = Number(argv[++i]);
  else if (a === '--dir') o.dir = path.resolve(argv[++i]);
  else if (a === '--interval') o.interval = Number(argv[++i]);
  else if (a === '--rate') o.rate = Number(argv[++i]);
  else if (a === '--loader') o.loader = argv[++i];
  else configs.push(a);
}
if (configs.length === 0) configs.push('express', 'quickjs');
checkLoader(o.loader, o);

function frameName(cf) {
  const url = cf.url
    .replace(/^file:\/\//, '')
    .replace(/.*\/node_modules\//, '')
    .replace(/.*\/dist\/cjs\//, 'dist/')
    .replace(/.*\/bench\//, 'bench/');
  return `${cf.functionName || '(anonymous)'} ${url}${cf.url ? `:${cf.lineNumber + 1}` : ''}`;
}

/** Self and inclusive time (µs) per function name, from one .cpuprofile. */
function summarize(file) {
  const p = JSON.parse(fs.readFileSync(file, 'utf8'));
  const byId = new Map(p.nodes.map((n) => [n.id, n]));
  const parent = new Map();
  for (const n of p.nodes) for (const c of n.children ?? []) parent.set(c, n.id);
  const perNode = new Map();
  p.samples.forEach((id, i) => perNode.set(id, (perNode.get(id) ?? 0) + (p.timeDeltas[i] ?? 0)));
  const self = new Map();
  const incl = new Map();
  let total = 0;
  for (const [id, t] of perNode) {
    total += t;
    const name = frameName(byId.get(id).callFrame);
    self.set(name, (self.get(name) ?? 0) + t);
    const seen = new Set();
    for (let cur = id; cur !== undefined; cur = parent.get(cur)) {
      const n = frameName(byId.get(cur).callFrame);
      if (seen.has(n)) continue;
      seen.add(n);
      incl.set(n, (incl.get(n) ?? 0) + t);
    }
  }
  const idle = [...self].filter(([k]) => k.startsWith('(idle)')).reduce((s, [, t]) => s + t, 0);
  const wasm = [...self].filter(([k]) => k.includes('wasm-function')).reduce((s, [, t]) => s + t, 0);
  return { file, total, idle, wasm, self, incl, start: p.startTime };
}

async function profile(config) {
  const dir = path.join(o.dir, config);
  fs.mkdirSync(dir, { recursive: true });
  const child = fork(path.join(__dirname, 'server.js'), [config], {
    execArgv: ['--cpu-prof', `--cpu-prof-dir=${dir}`, `--cpu-prof-interval=${o.interval}`],
    stdio: ['ignore', 'inherit', 'inherit', 'ipc'],
  });
  const port = await new Promise((resolve, reject) => {
    child.once('exit', (code) => reject(new Error(`server exited with ${code}`)));
    child.on('message', (m) => m?.type === 'listening' && resolve(m.port));
  });
  const url = `http://127.0.0.1:${port}/web0/api/bench/p`;
  const drive = { url, connections: o.connections, rate: o.rate, expect: '{"ok":true}' };
  await load(o.loader, { ...drive, duration: 2 }); // warm-up
  const result = await load(o.loader, { ...drive, duration: o.duration });
  await new Promise((r) => {
    if (child.exitCode !== null || child.signalCode !== null) return r();
    child.once('exit', r);
    if (child.connected) child.send({ type: 'close' });
    else child.kill('SIGINT');
  });
  // Requests over the whole profile (warm-up included), since the profile covers the whole run.
  const files = fs.readdirSync(dir).filter((f) => f.endsWith('.cpuprofile')).sort();
  const threads = files.map((f) => summarize(path.join(dir, f))).sort((a, b) => a.start - b.start);
  return { config, result, threads, dir };
}

function us(t, n) {
  return (t / n).toFixed(1).padStart(7);
}

async function main() {
  console.log(`profiles in ${o.dir}; ${o.loader}, ${o.connections} connections, 2 s warm-up + ${o.duration} s; sampling every ${o.interval} µs`);
  for (const config of configs) {
    const { result, threads } = await profile(config);
    // The warm-up's requests are in the profile too: estimate them from the measured rate.
    const requests = Math.round(result.total * (1 + 2 / o.duration));
    const [main, ...workers] = threads;
    console.log(`\n=== ${config}: ${result.reqPerSec.toFixed(0)} req/s measured, non2xx ${result.non2xx}, errors ${result.errors}, ~${requests} requests profiled`);
    console.log(
      `main thread: ${us(main.total - main.idle, requests)} µs busy per request (${(((main.total - main.idle) / main.total) * 100).toFixed(0)}% of wall time)`,
    );
    console.log(`-- main thread, self time, µs per request`);
    for (const [k, t] of [...main.self].filter(([k]) => !k.startsWith('(idle)')).sort((a, b) => b[1] - a[1]).slice(0, o.top)) console.log(`${us(t, requests)}  ${k}`);
    console.log(`-- main thread, inclusive time of the package's functions, µs per request`);
    for (const [k, t] of [...main.incl].filter(([k]) => k.includes('dist/')).sort((a, b) => b[1] - a[1]).slice(0, o.top)) console.log(`${us(t, requests)}  ${k}`);
    // Every other thread together (script workers), WASM functions grouped as one entry.
    const merged = new Map();
    const mergedIncl = new Map();
    for (const w of workers) {
      for (const [k, t] of w.self) {
        if (k.startsWith('(idle)')) continue;
        const key = k.includes('wasm-function') ? '(QuickJS WASM, all functions)' : k;
        merged.set(key, (merged.get(key) ?? 0) + t);
      }
      for (const [k, t] of w.incl) if (k.includes('dist/') || k.includes('vm2/')) mergedIncl.set(k, (mergedIncl.get(k) ?? 0) + t);
    }
    if (workers.length) {
      console.log(`-- worker threads together, self time, µs per request`);
      for (const [k, t] of [...merged].sort((a, b) => b[1] - a[1]).slice(0, o.top)) console.log(`${us(t, requests)}  ${k}`);
      console.log(`-- worker threads together, inclusive time of the package's (and vm2's) functions, µs per request`);
      for (const [k, t] of [...mergedIncl].sort((a, b) => b[1] - a[1]).slice(0, o.top)) console.log(`${us(t, requests)}  ${k}`);
    }
    for (const [i, w] of workers.entries()) {
      console.log(
        `worker ${i + 1}: busy ${us(w.total - w.idle, requests)} µs per request overall (${(((w.total - w.idle) / w.total) * 100).toFixed(0)}% of wall time), ` +
          `of which QuickJS WASM ${us(w.wasm, requests).trim()} µs`,
      );
    }
  }
}

main().catch((e) => {
  console.error(e);
  process.exit(1);
});
