#!/usr/bin/env node
'use strict';
/**
 * One thread, no pool: the bench's job (bench/scripts.js) through the real QuickJS driver and
 * pipeline of two builds of the package, in alternating rounds in one process, so a change to the
 * sandbox adapter or the worker can be measured against the build before it:
 *
 *   node bench/job-ab.js <package dir A> <package dir B> [--kind hooks|empty-hooks|trivial] [--rounds 16] [--jobs 5000]
 *
 * Each package dir is a checkout with `dist/` built (`npm run build`), e.g. `.` and a
 * `git worktree` of the commit before. Each job gets a new request text, as under load. Prints
 * µs per job, best and median round, for each build. Differences under about 1 µs are within
 * the noise of one run: run it twice, with the order of the builds swapped.
 */
const path = require('node:path');
const { MAIN, HOOKS, EMPTY_HOOKS } = require('./scripts');

const argv = process.argv.slice(2);
const opt = (name, fallback) => (argv.includes(name) ? argv[argv.indexOf(name) + 1] : fallback);
const dirs = argv.filter((a, i) => !a.startsWith('--') && !(i > 0 && argv[i - 1].startsWith('--')));
const KIND = opt('--kind', 'hooks');
const ROUNDS = Number(opt('--rounds', 16));
const JOBS = Number(opt('--jobs', 5000));
if (dirs.length < 1 || !['hooks', 'empty-hooks', 'trivial'].includes(KIND) || !(ROUNDS > 0) || !(JOBS > 0)) {
  console.error('usage: node bench/job-ab.js <package dir> [<package dir> ...] [--kind hooks|empty-hooks|trivial] [--rounds N] [--jobs N]');
  process.exit(2);
}

// The request snapshot the router makes for the bench's GET (lib/context/request.ts layout)
const REQUEST = JSON.stringify({
  headers: { host: 'localhost:34187', connection: 'keep-alive' }, headerLists: {}, cookies: {}, query: {}, form: {},
  requestId: 'REQ', appId: 'bench', path: 'p', method: 'GET', url: '/web0/api/bench/p', queryString: null, body: '',
  protocol: 'HTTP/1.1', scheme: 'http', serverName: 'localhost', serverPort: 34187, remoteAddr: '::ffff:127.0.0.1',
  remoteHost: '::ffff:127.0.0.1', remotePort: 49196, contentType: null, characterEncoding: null, authType: null,
  contextPath: '/web0/api', servletPath: '/bench', pathInfo: '/p', requestURI: '/web0/api/bench/p', parts: [],
});
const PRISTINE = {
  status: 200, headers: [], chunks: [], written: false, committed: false, error: null, redirect: null,
  contentType: null, characterEncoding: null, contentLength: null, bufferSize: 8192,
};
let seq = 0;
function newJob() {
  const job = {
    appId: 'bench', requestId: `r${seq}`, returnType: 'JSON', deadline: Date.now() + 60_000, phase: 'all',
    scripts: { 'main.js': { hash: 'm1', source: MAIN }, 'hooks.js': { hash: 'h1', source: KIND === 'empty-hooks' ? EMPTY_HOOKS : HOOKS } },
    call: { script: 'main.js', function: 'fn' },
    requestJson: REQUEST.replace('"REQ"', `"r${seq++}"`),
    state: { attributes: {}, response: PRISTINE },
  };
  if (KIND !== 'trivial') {
    job.before = { script: 'hooks.js', function: 'before' };
    job.after = { script: 'hooks.js', function: 'after' };
  }
  return job;
}

/** A build's driver and pipeline, with the worker's environment reduced to what the job needs. */
async function load(dir) {
  const runtime = path.resolve(dir, 'dist', 'cjs', 'runtime');
  const { QuickJsDriver } = require(path.join(runtime, 'worker', 'quickjs-driver.js'));
  const { runPipeline } = require(path.join(runtime, 'worker', 'pipeline.js'));
  const { adapterSource } = require(path.join(runtime, 'adapter-source.js'));
  const driver = await QuickJsDriver.create({ memoryLimitMb: 64, adapterSource: adapterSource(), host: () => '{"ok":true}' });
  const env = { driver, sourceOf: () => undefined, callHost() {}, takeAbort: () => null, setScript() {} };
  return { dir, run: (job) => runPipeline(job, env), times: [] };
}

async function main() {
  const builds = [];
  for (const dir of dirs) builds.push(await load(dir));
  // every build must give the bench's answer before anything is timed
  for (const b of builds) {
    const r = await b.run(newJob());
    if (r.outcome.kind !== 'output' || r.outcome.output.json !== '{"ok":true}') throw new Error(`${b.dir}: unexpected result ${JSON.stringify(r)}`);
    for (let i = 0; i < 500; i++) await b.run(newJob()); // warm-up
  }
  for (let round = 0; round < ROUNDS; round++) {
    for (const b of builds) {
      const t0 = process.hrtime.bigint();
      for (let i = 0; i < JOBS; i++) await b.run(newJob());
      b.times.push(Number(process.hrtime.bigint() - t0) / JOBS / 1000);
    }
  }
  console.log(`${KIND} job, µs per job, ${ROUNDS} rounds of ${JOBS} jobs (new request per job)`);
  for (const b of builds) {
    const s = b.times.slice().sort((x, y) => x - y);
    console.log(`  ${b.dir.padEnd(40)} best ${s[0].toFixed(2)}  median ${s[s.length >> 1].toFixed(2)}`);
  }
}

main().catch((e) => {
  console.error(e);
  process.exit(1);
});
