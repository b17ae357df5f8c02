'use strict';
// Run by test/rewrite-quickjs.test.js in a child process (jest cannot load the QuickJS module,
// which needs a dynamic import). Runs every corpus program in QuickJS (the sync build, as the
// pool does): as written, with host helpers that return values, and rewritten, with host helpers
// that return promises settled by a host timer (the promise bridge). Prints one JSON line per
// program and call with both outcomes.
const { newQuickJSWASMModuleFromVariant } = require('quickjs-emscripten-core');
const releaseSync = require('@jitl/quickjs-wasmfile-release-sync');
const { rewriteHostCalls } = require('../../dist/cjs/runtime/rewrite/index.js');
const { corpus, QUERIES } = require('./rewrite-corpus');
const { CONTINUATIONS } = require('./rewrite-check');

/** `platform` and a `ctx` factory inside the sandbox; `__later()` is the host's timer promise. */
const PRELUDE = `
globalThis.__log = [];
globalThis.__setMode = (mode) => { globalThis.__mode = mode; };
const reply = (fn) => {
  if (__mode === 'sync') return fn();
  let value, error, failed = false;
  try { value = fn() } catch (e) { error = e; failed = true }
  return __later().then(() => { if (failed) throw error; return value; });
};
const response = (url) => ({
  status: url.includes('missing') ? 404 : 200,
  body: 'body:' + url,
  text() { return this.body },
  json: () => ({ url }),
  saveBodyAsFile: (p) => reply(() => (__log.push('saveBodyAsFile ' + url + ' -> ' + p), { path: p })),
});
globalThis.platform = {
  http: { request: (o) => reply(() => { __log.push('request ' + o.url); if (o.url.includes('down')) throw new Error('ECONNREFUSED ' + o.url); return response(o.url); }) },
  system: { getAccountByToken: (t) => reply(() => (__log.push('account ' + t), t === 'good' ? { id: 'u1' } : null)) },
  app: { abort: (m) => { throw new Error(m) } },
};
globalThis.__run = async (f, query) => {
  __log = [];
  const ctx = { query: JSON.parse(query), getParts: () => [] };
  try { return JSON.stringify({ value: await f(ctx), log: __log }) }
  catch (e) { return JSON.stringify({ error: String(e && e.message), log: __log }) }
};
`;

async function main() {
  const qjs = await newQuickJSWASMModuleFromVariant(releaseSync.default ?? releaseSync);
  const rt = qjs.newRuntime();
  const vm = rt.newContext();
  const later = vm.newFunction('__later', () => {
    const deferred = vm.newPromise();
    setTimeout(() => {
      deferred.resolve();
      deferred.dispose();
      rt.executePendingJobs();
    }, 1);
    return deferred.handle;
  });
  vm.setProp(vm.global, '__later', later);
  later.dispose();
  vm.unwrapResult(vm.evalCode(PRELUDE + CONTINUATIONS)).dispose();
  const run = vm.getProp(vm.global, '__run');
  const setMode = vm.getProp(vm.global, '__setMode');

  let n = 0;
  async function call(code, mode, query) {
    const modeArg = vm.newString(mode);
    vm.unwrapResult(vm.callFunction(setMode, vm.undefined, modeArg)).dispose();
    modeArg.dispose();
    const loaded = vm.evalCode(code, `m${n++}.js`, { type: 'module' });
    if (loaded.error) {
      const err = vm.dump(loaded.error);
      loaded.error.dispose();
      return { loadError: String(err && err.message) };
    }
    const ns = loaded.value;
    const fn = vm.getProp(ns, 'main');
    const q = vm.newString(JSON.stringify(query));
    const promise = vm.unwrapResult(vm.callFunction(run, vm.undefined, fn, q));
    fn.dispose();
    q.dispose();
    ns.dispose();
    const settled = vm.resolvePromise(promise);
    promise.dispose();
    rt.executePendingJobs();
    const out = vm.unwrapResult(await settled);
    const text = vm.getString(out);
    out.dispose();
    return JSON.parse(text);
  }

  for (const [i, j, src, fallback] of corpus()) {
    const r = rewriteHostCalls(src);
    for (const query of QUERIES) {
      const before = await call(src, 'sync', query);
      const after = r.async ? await call(r.code, 'async', query) : null;
      // the harness can tell: the first program as written, with host calls returning promises
      const control = i === 0 && j === 0 ? await call(src, 'async', query) : undefined;
      process.stdout.write(`${JSON.stringify({ i, j, async: r.async, reason: r.reason ?? null, expectFallback: fallback !== null, before, after, control })}\n`);
    }
  }
  run.dispose();
  setMode.dispose();
  vm.dispose();
  rt.dispose();
}

main().catch((e) => {
  process.stderr.write(String(e?.stack ?? e));
  process.exit(1);
});
