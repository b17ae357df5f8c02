#!/usr/bin/env node
'use strict';
/**
 * Where the cost of a hook stage lies, on one thread, in QuickJS: the bench's hooked job
 * (bench/server.js HOOKS and MAIN) run three ways, with a new request text per job:
 *
 *   sequence  three calls into the sandbox (before, call, after), the host passing the attributes
 *             and the call's result from one to the next, as lib/runtime/worker/pipeline.ts does
 *   fused     one call into the sandbox: a runner in main.js's context calls the hooks context's
 *             stage function, then its own, then the hooks' again (contexts of one QuickJS
 *             runtime may call each other's functions), passing the attributes and the result
 *             inside the sandbox
 *   inline    the same work in one stage: main.js holds both hooks and its `fn` calls them
 *             (the bench's `quickjs-inline` diagnostic)
 *
 *   node bench/stage-boundary.js [--jobs 10000] [--rounds 12] [--no-merge]
 *
 * `--no-merge`: the fused runner passes fixed attribute and result texts instead of reading them
 * from the earlier stages' outputs (a lower bound for any fused design). The three ways run in
 * turn within each round, in one process, and the best round of each is printed with every round.
 * It drives the adapter directly (the engine's `callForText`, no pool, no pipeline, no interrupt
 * handler), so only the differences between the three ways are meaningful.
 *
 * Loads the package from `../dist` (run `npm run build` first).
 */
const path = require('node:path');
const { newQuickJSWASMModuleFromVariant } = require('quickjs-emscripten-core');
const releaseSync = require('@jitl/quickjs-wasmfile-release-sync').default;

const DIST = path.join(__dirname, '..', 'dist', 'cjs', 'runtime');
const { adapterSource } = require(path.join(DIST, 'adapter-source.js'));
const { callForText, newString } = require(path.join(DIST, 'worker', 'quickjs-fast.js'));

const argv = process.argv.slice(2);
const opt = (name, fallback) => (argv.includes(name) ? Number(argv[argv.indexOf(name) + 1]) : fallback);
const JOBS = opt('--jobs', 10000);
const ROUNDS = opt('--rounds', 12);
const NO_MERGE = argv.includes('--no-merge');

const { MAIN, HOOKS, INLINE } = require('./scripts'); // the bench's scripts

// A request snapshot as the router makes it for the bench's GET (a new requestId per job)
const REQUEST = JSON.stringify({
  headers: { host: 'localhost:34187', connection: 'keep-alive' }, headerLists: {}, cookies: {}, query: {}, form: {},
  requestId: 'REQ', appId: 'bench', path: 'p', method: 'GET', url: '/web0/api/bench/p', queryString: null, body: '',
  protocol: 'HTTP/1.1', scheme: 'http', serverName: 'localhost', serverPort: 34187, remoteAddr: '::ffff:127.0.0.1',
  remoteHost: '::ffff:127.0.0.1', remotePort: 49196, contentType: null, characterEncoding: null, authType: null,
  contextPath: '/web0/api', servletPath: '/bench', pathInfo: '/p', requestURI: '/web0/api/bench/p', parts: [],
});
let seq = 0;
const nextRequest = () => REQUEST.replace('"REQ"', `"r${seq++}"`);

// The fused runner, in main.js's context. Stage outputs are JSON texts (never a raw newline).
const RUNNER = `(function (hooksRun, before, mainRun, fn, after, headB, headC, headA, req, attrs, resp) {
  var o1 = hooksRun(before, headB, req, attrs, resp, '');
  var a = ${NO_MERGE ? `'{"t":1}'` : `JSON.parse(o1).attributes; a = a ? JSON.stringify(a) : attrs`};
  var o2 = mainRun(fn, headC, req, a, resp, '');
  var v = ${NO_MERGE ? `'{"ok":true}'` : 'JSON.parse(o2).output.json'};
  var o3 = hooksRun(after, headA, req, a, resp, v);
  return o1 + '\\n' + o2 + '\\n' + o3;
})`;

async function main() {
  const wasm = await newQuickJSWASMModuleFromVariant(releaseSync);
  const rt = wasm.newRuntime(); // one runtime: its contexts may call each other's functions
  const adapter = adapterSource();
  const head = (stage, wantValue) => JSON.stringify({ stage, returnType: 'JSON', wantValue });
  function context(source, name) {
    const ctx = rt.newContext();
    const host = ctx.newFunction('__host', () => ctx.newString('{"ok":true}'));
    ctx.setProp(ctx.global, '__host', host);
    host.dispose();
    const engine = ctx.newString('quickjs');
    ctx.setProp(ctx.global, '__saEngine', engine);
    engine.dispose();
    ctx.unwrapResult(ctx.evalCode(adapter, 'adapter.js')).dispose();
    const sa = ctx.getProp(ctx.global, '__sa');
    const ns = ctx.unwrapResult(ctx.evalCode(source, name, { type: 'module' }));
    const fn = (n) => ctx.getProp(ns, n);
    const text = (s) => ctx.newString(s);
    return { ctx, run: ctx.getProp(sa, 'run'), fn, text, empty: text(''), object: text('{}') };
  }
  const H = context(HOOKS, 'hooks.js');
  const M = context(MAIN, 'main.js');
  const I = context(INLINE, 'inline.js');
  const before = H.fn('before');
  const after = H.fn('after');
  const fn = M.fn('fn');
  const inlineFn = I.fn('fn');
  const headB = H.text(head('before', false));
  const headA = H.text(head('after', false));
  const headC = M.text(head('call', true));
  const headI = I.text(head('call', false));
  const runner = M.ctx.unwrapResult(M.ctx.evalCode(RUNNER, 'runner.js'));

  const call = (c, fnH, args) => {
    const r = callForText(c.ctx, fnH, args);
    if (r.error) throw new Error(JSON.stringify(c.ctx.dump(r.error)));
    if (rt.hasPendingJob()) throw new Error('unexpected promise jobs');
    return r.text;
  };
  const ways = {
    sequence() {
      const req = newString(H.ctx, nextRequest());
      const o1 = JSON.parse(call(H, H.run, [before, headB, req, H.object, H.empty, H.empty]));
      const attrs = M.ctx.newString(JSON.stringify(o1.attributes ?? {}));
      const o2 = JSON.parse(call(M, M.run, [fn, headC, req, attrs, M.empty, M.empty]));
      const value = H.ctx.newString(o2.output.json);
      const o3 = JSON.parse(call(H, H.run, [after, headA, req, attrs, H.empty, value]));
      attrs.dispose();
      value.dispose();
      req.dispose();
      return [o1, o2, o3];
    },
    fused() {
      const req = newString(M.ctx, nextRequest());
      const out = call(M, runner, [H.run, before, M.run, fn, after, headB, headC, headA, req, M.object, M.empty]);
      req.dispose();
      return out.split('\n').map((t) => JSON.parse(t));
    },
    inline() {
      const req = newString(I.ctx, nextRequest());
      const out = JSON.parse(call(I, I.run, [inlineFn, headI, req, I.object, I.empty, I.empty]));
      req.dispose();
      return [out];
    },
  };
  // every way must do the hooks' work: attribute t = 1, header X-Hooked: 1, body {"ok":true}
  for (const [name, way] of Object.entries(ways)) {
    const outs = way();
    const all = JSON.stringify(outs);
    if (!all.includes('"X-Hooked","1"') || !all.includes('{\\"ok\\":true}')) throw new Error(`${name}: unexpected output ${all}`);
  }
  for (let i = 0; i < 3000; i++) for (const way of Object.values(ways)) way();
  const rounds = Object.fromEntries(Object.keys(ways).map((k) => [k, []]));
  for (let r = 0; r < ROUNDS; r++) {
    const order = Object.entries(ways);
    if (r % 2) order.reverse();
    for (const [name, way] of order) {
      const t = process.hrtime.bigint();
      for (let i = 0; i < JOBS; i++) way();
      rounds[name].push(Number(process.hrtime.bigint() - t) / 1e3 / JOBS);
    }
  }
  console.log(`bench's hooked job, µs per job, one thread (${ROUNDS} rounds of ${JOBS} jobs${NO_MERGE ? ', fused runner without merging' : ''}):`);
  for (const [name, list] of Object.entries(rounds)) {
    console.log(`  ${name.padEnd(9)} best ${Math.min(...list).toFixed(1).padStart(5)}   rounds ${list.map((x) => x.toFixed(1)).join(' ')}`);
  }
}

main().catch((e) => {
  console.error(e);
  process.exit(1);
});
