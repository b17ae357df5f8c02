'use strict';
// Run by test/stages.test.js in a child process (jest cannot load the QuickJS module, which needs
// a dynamic import): runs calls of each script below on a QuickJS context and prints, as JSON,
// what each call leaves for QuickJS's cycle collection: the growth per call of the runtime's
// memory in use (QuickJS's own count, which drops when that collection runs), the median over
// batches that grew. Garbage that reference counting frees never shows there; what it cannot
// free waits for a collection that walks every object of the worker's runtime (all the apps'
// contexts), so the more of it a call leaves, the more often that pause comes.
const { QuickJsDriver } = require('../../dist/cjs/runtime/worker/quickjs-driver.js');
const { adapterSource } = require('../../dist/cjs/runtime/adapter-source.js');
const { inUse } = require('./quickjs-in-use');

const SCRIPTS = {
  trivial: 'export function fn(ctx) { return { ok: true } }',
  request: 'export function fn(ctx) { return { h: ctx.headers.host, q: ctx.query, m: ctx.request.getMethod(), a: ctx.request.getHeader("host") } }',
  response: 'export function fn(ctx) { ctx.response.setHeader("X-A", "1"); ctx.response.setStatus(201); return { ok: true } }',
  writer: 'export function fn(ctx) { ctx.response.getWriter().append("a").printf("%s", "b"); ctx.response.getWriter().write("c") }',
  stream: 'export function fn(ctx) { ctx.response.getOutputStream().write([65, 66]) }',
  async: 'export async function fn(ctx) { await null; return { ok: ctx.method } }',
  thrown: 'export function fn(ctx) { throw new Error("no") }',
};
const HOOKS = `export function before(ctx) { ctx.request.setAttribute("t", ctx.request.getHeader("host")) }
export function after(ctx, r) { ctx.response.setHeader("X-T", String(ctx.request.getAttribute("t"))) }`;

const request = JSON.stringify({ requestId: 'r1', appId: 'app', path: 'p', method: 'GET', url: '/web0/api/app/p?q=1', headers: { host: 'h', 'user-agent': 'test' }, headerLists: {}, cookies: {}, query: { q: '1' } });
const head = JSON.stringify({ stage: 'call', returnType: 'JSON', wantValue: false, async: false });
const link = (stage, module, fn) => ({ stage, returnType: 'JSON', wantValue: false, async: false, module, fn });
const chainHead = JSON.stringify({ stage: 'before', returnType: 'JSON', wantValue: false, async: false, module: 0, next: [link('call', 1, 'fn'), link('after', 0, 'after')] });

async function main() {
  const driver = await QuickJsDriver.create({ memoryLimitMb: 64, contextBudgetMb: 64, adapterSource: adapterSource(), interrupt: () => false });
  const host = () => '{"ok":true,"value":null}';
  let id = 1;
  /** One call: its outputs (drained again while its stages run on to the next of their chain). */
  const call = (ctx, fn, stageHead) => {
    ctx.start(id++, fn, stageHead, request, '{}', '', '');
    const outputs = [];
    let d;
    do {
      d = JSON.parse(ctx.drain());
      outputs.push(...d.outputs);
    } while (d.more);
    return outputs;
  };
  /** Median growth per call of the memory in use of `context`'s runtime, over batches of 20 calls that grew. */
  const perCall = (run, context) => {
    const sizes = [];
    for (let i = 0; i < 200; i++) run();
    let prev = inUse(context);
    for (let b = 0; b < 150; b++) {
      for (let i = 0; i < 20; i++) run();
      const now = inUse(context);
      if (now > prev) sizes.push((now - prev) / 20);
      prev = now;
    }
    sizes.sort((x, y) => x - y);
    return sizes.length === 0 ? 0 : Math.round(sizes[sizes.length >> 1]);
  };
  const result = {};
  for (const [name, code] of Object.entries(SCRIPTS)) {
    const ctx = await driver.open(`${name}.js`, code, host);
    result[name] = { first: call(ctx, 'fn', head)[0], bytesPerCall: perCall(() => call(ctx, 'fn', head), ctx) };
  }
  const hooked = await driver.open('hooks.js', HOOKS, host, undefined, [{ name: 'main.js', code: SCRIPTS.trivial }]);
  result.hooks = { first: call(hooked, 'before', chainHead)[0], bytesPerCall: perCall(() => call(hooked, 'before', chainHead), hooked) };
  process.stdout.write(JSON.stringify(result));
}

void main();
