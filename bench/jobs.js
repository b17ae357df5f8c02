#!/usr/bin/env node
// CPU time per job through the worker pool, without HTTP: the pool, the messages to the worker and
// back, the worker's pipeline and the engine, for the trivial script and for it with the two hooks
// (bench/scripts.js), on wrk's request as the router snapshots it. One WorkerPool of one worker
// (`--workers N`: N, the calls of the one app spread over them while calls wait to start),
// `--inflight` jobs at a time; the CPU of every thread of this process (Linux /proc) over
// `--jobs` jobs after a warm-up, per job. Steadier than a whole request under wrk, whose rounds
// spread widely on a shared VM: compare builds by alternating runs (SCRIPTABLE_API_PATH).
// Usage: npm run build && node bench/jobs.js [--only trivial,hooks] [--engine quickjs|vm2] [--jobs N] [--inflight N] [--workers N]
'use strict';
const path = require('node:path');
const fs = require('node:fs');
const crypto = require('node:crypto');
const scripts = require('./scripts');

const dist = process.env.SCRIPTABLE_API_PATH ? path.dirname(process.env.SCRIPTABLE_API_PATH) : path.join(__dirname, '..', 'dist', 'cjs');
const { WorkerPool } = require(path.join(dist, 'runtime', 'pool.js'));
const { newResponseState } = require(path.join(dist, 'runtime', 'protocol.js'));

const args = process.argv.slice(2);
const opt = (name, fallback) => (args.includes(name) ? args[args.indexOf(name) + 1] : fallback);
const JOBS = Number(opt('--jobs', 20000));
const INFLIGHT = Number(opt('--inflight', 20));
const ENGINE = opt('--engine', 'quickjs');
const ONLY = opt('--only', 'trivial,hooks').split(',');
const WORKERS = Number(opt('--workers', 1));

/** A script as the router hands it to an engine (lib/runtime/engine.ts, ScriptSource). */
const source = (name, text) => ({ name, source: text, hash: crypto.createHash('sha1').update(`${name}\0${text}`).digest('hex') });
const SCRIPTS = { 'main.js': source('main.js', scripts.MAIN), 'hooks.js': source('hooks.js', scripts.HOOKS) };
const HOOKS = { before: { script: 'hooks.js', function: 'before' }, after: { script: 'hooks.js', function: 'after' } };
const snapshot = scripts.WRK_REQUEST;

function job(kind, n) {
  const requestId = `r${n}`;
  return {
    requestId,
    appId: 'bench',
    apiPath: 'p',
    returnType: 'JSON',
    phase: 'all',
    call: { script: 'main.js', function: 'fn' },
    ...(kind === 'hooks' ? HOOKS : {}),
    scripts: SCRIPTS,
    request: { ...snapshot, requestId },
    state: { attributes: {}, response: newResponseState() },
    timeoutMs: 5000,
  };
}

/** CPU ticks (1/100 s) of every thread of this process so far. */
function ticks() {
  let t = 0;
  for (const task of fs.readdirSync('/proc/self/task')) {
    const f = fs.readFileSync(`/proc/self/task/${task}/stat`, 'utf8').split(') ')[1].split(' ');
    t += Number(f[11]) + Number(f[12]); // utime, stime
  }
  return t;
}

async function main() {
  const pool = new WorkerPool({ engine: ENGINE, size: WORKERS, maxWorkersPerApp: WORKERS, maxConcurrentPerApp: 1000 });
  const host = { call: async () => null };
  let n = 0;
  const run = async (kind, count) => {
    let started = 0;
    const line = async () => {
      while (started < count) {
        started++;
        const r = await pool.run(job(kind, n++), host);
        if (r.outcome.kind !== 'output') throw new Error(`${kind}: ${JSON.stringify(r.outcome)}`);
      }
    };
    await Promise.all(Array.from({ length: INFLIGHT }, line));
  };
  console.log(`${ENGINE}, ${WORKERS === 1 ? 'one worker' : `${WORKERS} workers`}, ${INFLIGHT} jobs in flight, ${JOBS} jobs (µs per job)`);
  for (const kind of ONLY) {
    await run(kind, Math.min(3000, JOBS));
    const t0 = ticks();
    const w0 = process.hrtime.bigint();
    await run(kind, JOBS);
    const cpu = ((ticks() - t0) * 10000) / JOBS;
    const wall = Number(process.hrtime.bigint() - w0) / 1000 / JOBS;
    console.log(`  ${kind.padEnd(8)} CPU ${cpu.toFixed(0)} µs, wall ${wall.toFixed(0)} µs`);
  }
  await pool.close();
}

main().catch((e) => {
  console.error(e);
  process.exit(1);
});
