#!/usr/bin/env node
// CPU time of script stages on one QuickJS context, without the HTTP server or the worker pool:
// what a worker thread spends per request inside the engine (the adapter's own work included).
//   trivial   one stage: `return { ok: true }`
//   hooks     the same with a before hook (reads a header, sets an attribute) and an after hook
//             (reads it back, sets a response header): bench/scripts.js
// The request is a snapshot as the router builds it for `GET /web0/api/bench/p` from wrk.
// One thread, no I/O. Usage: npm run build && node bench/stage.js [--stages N] [--rounds N]
'use strict';
const path = require('node:path');
const scripts = require('./scripts');

const dist = process.env.SCRIPTABLE_API_PATH ? path.dirname(process.env.SCRIPTABLE_API_PATH) : path.join(__dirname, '..', 'dist', 'cjs');
const { QuickJsDriver } = require(path.join(dist, 'runtime', 'worker', 'quickjs-driver.js'));
const { adapterSource } = require(path.join(dist, 'runtime', 'adapter-source.js'));
const { ctxFields } = require(path.join(dist, 'runtime', 'protocol.js'));
const { prepareScript } = require(path.join(dist, 'runtime', 'worker', 'transpile.js'));

const args = process.argv.slice(2);
const flag = (name, fallback) => (args.includes(name) ? Number(args[args.indexOf(name) + 1]) : fallback);
const STAGES = flag('--stages', 20000);
const ROUNDS = flag('--rounds', 3);

const snapshot = {
  headers: { host: '127.0.0.1:37423', 'user-agent': 'wrk' },
  headerLists: {},
  cookies: {},
  query: {},
  form: {},
  requestId: '3657c877-9998-4058-8e16-9a04f5549191',
  appId: 'bench',
  path: 'p',
  method: 'GET',
  url: '/web0/api/bench/p',
  queryString: null,
  body: '',
  protocol: 'HTTP/1.1',
  scheme: 'http',
  serverName: '127.0.0.1',
  serverPort: 37423,
  remoteAddr: '127.0.0.1',
  remoteHost: '127.0.0.1',
  remotePort: 35322,
  contentType: null,
  characterEncoding: null,
  authType: null,
  contextPath: '/web0/api',
  servletPath: '/bench',
  pathInfo: '/p',
  requestURI: '/web0/api/bench/p',
  parts: [],
};
const request = JSON.stringify(snapshot);
const ctxJson = JSON.stringify(ctxFields(snapshot));
const head = (stage) => JSON.stringify({ stage, returnType: 'JSON', wantValue: false, async: false });

async function main() {
  const driver = await QuickJsDriver.create({ memoryLimitMb: 64, contextBudgetMb: 256, adapterSource: adapterSource(), interrupt: () => false });
  // the worker answers 'stage.request' itself (lib/runtime/worker/stages.ts): so does this host
  const host = (stageId, op) => (op === 'stage.request' ? request : '{"ok":true,"value":null}');
  const open = async (name, source) => driver.open(name, prepareScript(name, source, false).code, host);
  const main = await open('main.js', scripts.MAIN);
  const hooks = await open('hooks.js', scripts.HOOKS);
  let id = 1;
  const stage = (ctx, fn, stageName, attributes) => {
    ctx.start(id++, fn, head(stageName), '', attributes, '', '', ctxJson);
    const out = JSON.parse(ctx.drain()).outputs[0];
    if (out.status !== 'value') throw new Error(`${fn}: ${JSON.stringify(out)}`);
    return out;
  };
  const workloads = {
    trivial: () => stage(main, 'fn', 'call', '{}'),
    hooks: () => {
      const before = stage(hooks, 'before', 'before', '{}');
      const attributes = JSON.stringify(before.attributes ?? {});
      stage(main, 'fn', 'call', attributes);
      stage(hooks, 'after', 'after', attributes);
    },
  };
  console.log(`QuickJS, one context per script, ${STAGES} requests a round, ${ROUNDS} rounds (µs per request, median round)`);
  for (const [name, run] of Object.entries(workloads)) {
    for (let i = 0; i < 2000; i++) run(); // warm-up
    const rounds = [];
    for (let r = 0; r < ROUNDS; r++) {
      const t0 = process.hrtime.bigint();
      for (let i = 0; i < STAGES; i++) run();
      rounds.push(Number(process.hrtime.bigint() - t0) / 1000 / STAGES);
    }
    rounds.sort((a, b) => a - b);
    console.log(`  ${name.padEnd(8)} ${rounds[Math.floor(rounds.length / 2)].toFixed(1)} µs  (rounds ${rounds.map((x) => x.toFixed(1)).join(', ')})`);
  }
}

main().catch((e) => {
  console.error(e);
  process.exit(1);
});
