'use strict';
// Run by test/pool.test.js in a child process (jest cannot load the QuickJS module, which needs a
// dynamic import): the pool's compiled QuickJS module, and what a driver does with a module it is given.
const { quickjsWasmModule } = require('../../dist/cjs/runtime/quickjs-wasm.js');
const { QuickJsDriver } = require('../../dist/cjs/runtime/worker/quickjs-driver.js');
const { adapterSource } = require('../../dist/cjs/runtime/adapter-source.js');

async function stage(wasmModule) {
  const driver = await QuickJsDriver.create({ memoryLimitMb: 64, contextBudgetMb: 16, adapterSource: adapterSource(), interrupt: () => false, wasmModule });
  const ctx = await driver.open('main.js', 'export function fn(ctx) { return { sum: 20 + 22 } }', () => '{"ok":true,"value":null}');
  ctx.start(1, 'fn', JSON.stringify({ stage: 'call', returnType: 'JSON', wantValue: false, async: false }), JSON.stringify({ requestId: 'r1', method: 'GET', url: '/', headers: {}, headerLists: {} }), '{}', '', '');
  return JSON.parse(ctx.drain()).outputs[0].output;
}

async function main() {
  const first = quickjsWasmModule();
  const result = {
    kind: Object.prototype.toString.call(first),
    same: quickjsWasmModule() === first,
    // a driver given the module instantiates it
    withModule: await stage(first),
  };
  // ... and really uses the module it is given: an empty one cannot stand in for QuickJS
  const empty = new WebAssembly.Module(new Uint8Array([0, 0x61, 0x73, 0x6d, 1, 0, 0, 0]));
  result.withEmptyModule = await stage(empty).then(
    () => 'started',
    (e) => `failed: ${e.message}`,
  );
  process.stdout.write(JSON.stringify(result));
}

main().catch((e) => {
  process.stderr.write(String(e?.stack ?? e));
  process.exit(1);
});
