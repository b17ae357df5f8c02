'use strict';
// Run by test/memory-isolation.test.js in a child process (jest cannot load the QuickJS module,
// which needs a dynamic import): the worker's Stages over a QuickJS driver, two apps. A memory
// bomb keeps 1 MiB more after each host call it waits on, until the heap's next growth would
// pass one call's room; then another app's call allocates 12 MiB, which needs that growth.
// Prints JSON: the other call's output (or error) and how the bomb ended. argv[2]: the least heap
// growth (MiB) that marks a job as the heap's hog.
const { QuickJsDriver } = require('../../dist/cjs/runtime/worker/quickjs-driver.js');
const { Stages } = require('../../dist/cjs/runtime/worker/stages.js');
const { adapterSource } = require('../../dist/cjs/runtime/adapter-source.js');
const { prepareScript } = require('../../dist/cjs/runtime/worker/transpile.js');

const MiB = 1024 * 1024;
const BOMB = `export function fn() {
  const keep = [];
  for (;;) {
    keep.push(new Uint8Array(${MiB}).fill(1));
    platform.system.getAccountByToken('x');
  }
}`;
const WORK = `export function fn() { const a = new Uint8Array(${12 * MiB}).fill(2); return { n: a.length, first: a[0] } }`;

async function main() {
  let stages;
  const driver = await QuickJsDriver.create({
    memoryLimitMb: 16,
    contextBudgetMb: 16,
    adapterSource: adapterSource(),
    interrupt: () => false,
    heapGrowth: (bytes, pastRoom) => stages.heapGrowth(bytes, pastRoom),
  });
  const waiting = [];
  let nextCall = 1;
  const host = {
    callSync: () => '{"ok":true,"value":null}',
    callAsync: () => {
      waiting.push(nextCall);
      return nextCall++;
    },
  };
  // the least growth that marks a hog: argv[2] MiB, else half the limit (as a worker has it); no
  // room for what the other calls in flight grew (a worker's callLimitBytes): the other call's
  // growth takes the hog's way (the router test in memory-isolation.test.js runs it as a worker has it)
  stages = new Stages(driver, host, { begin() {}, end() {} }, 16 * MiB, Number(process.argv[2] ?? 8) * MiB);
  const job = (id) => ({ id, appId: `app${id}`, timeoutMs: 60_000, deadline: Date.now() + 60_000, done: false });
  const run = (j, name, source) => {
    const p = prepareScript(name, source, false);
    const head = JSON.stringify({ stage: 'call', returnType: 'JSON', wantValue: false, async: p.async });
    return stages.run(j, name, `${j.appId}\u0000${name}`, p.code, 'fn', head, { request: () => '{}', attributes: '{}', response: '', value: '', ctx: '{}', maps: '{"headers":{}}' });
  };

  // (the other app's context is loaded first, as a warm worker has it)
  const first = await run(job(2), 'work.js', WORK);
  const bombJob = job(1);
  let bombEnd = 'still waiting';
  run(bombJob, 'bomb.js', BOMB).then(
    (out) => (bombEnd = `settled: ${JSON.stringify(out)}`),
    (e) => (bombEnd = `${e.errorName}: ${e.message}`),
  );
  for (let i = 0; i < 100 && waiting.length === 0; i++) await new Promise((resolve) => setImmediate(resolve));
  const full = () => driver.heapRoom() - driver.memory.buffer.byteLength < 0.2 * driver.memory.buffer.byteLength;
  let steps = 0;
  while (!full() && waiting.length > 0 && steps < 1000) {
    stages.reply(waiting.shift(), '{"ok":true,"value":{"id":"x"}}');
    steps++;
  }
  const heapBefore = driver.memory.buffer.byteLength;
  let other;
  try {
    other = await run(job(3), 'work.js', WORK);
  } catch (e) {
    other = { error: `${e.errorName}: ${e.message}` };
  }
  await new Promise((resolve) => setImmediate(resolve));
  process.stdout.write(JSON.stringify({ first, steps, heapBeforeMb: heapBefore / MiB, roomMb: driver.heapRoom() / MiB, other, bombEnd }));
}

void main();
