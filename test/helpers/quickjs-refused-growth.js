'use strict';
// Run by test/stages.test.js in a child process (jest cannot load the QuickJS module, which needs
// a dynamic import): a QuickJS driver whose heap refuses to grow outside any stage (as when the
// leftover promise jobs of a failed call are flushed) is poisoned at once; a context opened
// before still answers. Prints JSON.
const { QuickJsDriver } = require('../../dist/cjs/runtime/worker/quickjs-driver.js');
const { adapterSource } = require('../../dist/cjs/runtime/adapter-source.js');

async function main() {
  const driver = await QuickJsDriver.create({ memoryLimitMb: 8, contextBudgetMb: 8, adapterSource: adapterSource(), interrupt: () => false });
  const ctx = await driver.open('main.js', 'export function fn() { return { ok: true } }', () => '{"ok":true,"value":null}');
  const head = JSON.stringify({ stage: 'call', returnType: 'JSON', wantValue: false, async: false });
  const stage = (id) => {
    ctx.start(id, 'fn', head, '{}', '{}', '', '', '');
    return JSON.parse(ctx.drain()).outputs[0];
  };
  const before = { out: stage(1), poisoned: driver.poisoned };
  let refused = false;
  try {
    driver.memory.grow(1024); // 64 MiB: past the heap's room
  } catch {
    refused = true;
  }
  process.stdout.write(JSON.stringify({ before, refused, poisoned: driver.poisoned, after: stage(2) }));
}

void main();
