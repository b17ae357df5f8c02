'use strict';
// Run by test/stages.test.js in a child process (jest cannot load the QuickJS module, which needs
// a dynamic import): one QuickJS context serves `calls` stages that use ctx.request and
// ctx.response; prints the WebAssembly heap before and after, as JSON.
const { QuickJsDriver } = require('../../dist/cjs/runtime/worker/quickjs-driver.js');
const { adapterSource } = require('../../dist/cjs/runtime/adapter-source.js');

async function main(calls) {
  const driver = await QuickJsDriver.create({ memoryLimitMb: 64, contextBudgetMb: 64, adapterSource: adapterSource(), interrupt: () => false });
  const ctx = await driver.open(
    'main.js',
    `export function fn(ctx) {
      ctx.request.setAttribute('self', ctx.request.getHeader('host'));
      ctx.response.setHeader('X-A', ctx.request.getMethod());
      ctx.response.getWriter().write(ctx.url);
      return ctx.headers;
    }`,
    () => '{"ok":true,"value":null}',
  );
  const head = JSON.stringify({ stage: 'call', returnType: 'JSON', wantValue: false, async: false });
  const stage = (i) => {
    const request = JSON.stringify({ requestId: `r${i}`, method: 'GET', url: `/u/${i}`, headers: { host: `h${i}`, 'x-pad': 'p'.repeat(200) }, headerLists: {} });
    ctx.start(i + 1, 'fn', head, request, '{}', '', '');
    return JSON.parse(ctx.drain()).outputs[0];
  };
  for (let i = 0; i < 500; i++) stage(i);
  const before = driver.memory.buffer.byteLength;
  let first;
  for (let i = 0; i < calls; i++) {
    const out = stage(i);
    if (i === 0) first = out;
  }
  process.stdout.write(JSON.stringify({ before, after: driver.memory.buffer.byteLength, poisoned: driver.poisoned, first }));
}

void main(Number(process.argv[2] ?? 20000));
