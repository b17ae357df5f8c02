'use strict';
// Run by test/stages.test.js in a child process (jest cannot load the QuickJS module, which needs
// a dynamic import): one QuickJS context serves `calls` stages that use ctx.request and
// ctx.response; prints the WebAssembly heap before and after, as JSON.
const { QuickJsDriver } = require('../../dist/cjs/runtime/worker/quickjs-driver.js');
const { adapterSource } = require('../../dist/cjs/runtime/adapter-source.js');

async function main(calls) {
  const driver = await QuickJsDriver.create({ memoryLimitMb: 64, adapterSource: adapterSource(), host: () => '{"ok":true,"value":null}' });
  const deadline = Date.now() + 600_000;
  const mod = driver.load(
    'app1',
    'main.js',
    'hash1',
    `export function fn(ctx) {
      ctx.request.setAttribute('self', ctx.request.getHeader('host'));
      ctx.response.setHeader('X-A', ctx.request.getMethod());
      ctx.response.getWriter().write(ctx.url);
      return ctx.headers;
    }`,
    deadline,
  );
  const head = JSON.stringify({ stage: 'call', returnType: 'JSON', wantValue: false });
  const stage = (i) =>
    driver.invoke(
      mod,
      'fn',
      {
        head,
        request: JSON.stringify({ requestId: `r${i}`, method: 'GET', url: `/u/${i}`, headers: { host: `h${i}`, 'x-pad': 'p'.repeat(200) }, headerLists: {} }),
        attributes: '{}',
        response: '',
        value: '',
      },
      deadline,
    );
  for (let i = 0; i < 500; i++) await stage(i);
  const before = driver.memory.buffer.byteLength;
  let first;
  for (let i = 0; i < calls; i++) {
    const out = await stage(i);
    if (i === 0) first = out;
  }
  process.stdout.write(JSON.stringify({ before, after: driver.memory.buffer.byteLength, poisoned: driver.poisoned, first }));
}

void main(Number(process.argv[2] ?? 20000));
