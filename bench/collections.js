#!/usr/bin/env node
// What one app's cyclic garbage costs the other apps of a QuickJS worker. What reference counting
// cannot free (objects that refer to each other) waits for QuickJS's cycle collection, which
// walks every object of a runtime's contexts while the worker's thread waits. `--apps` small
// apps' contexts are opened on one driver and called a few times each (in service), then one
// more app is called `--calls` times, each call leaving 100 objects that refer to themselves
// (about 10 KB): printed are the calls that took over 5 ms (the collections' pauses, which every
// app on the worker waits out) and that app's time in all. One thread, no pool, no HTTP. Compare
// builds with SCRIPTABLE_API_PATH (a build's dist/cjs/index.js).
// Usage: npm run build && node bench/collections.js [--apps N] [--calls N]
'use strict';
const scripts = require('./scripts');
const { QuickJsDriver, adapterSource, ctxFields, ctxMaps, prepareScript, flag } = require('./engine-parts');

const APPS = flag('--apps', 1000);
const CALLS = flag('--calls', 30000);
const PAUSE_MS = 5;
const CYCLES = 'export function fn(ctx) { for (var i = 0; i < 100; i++) { var o = { n: i }; o.self = o } return { ok: true } }';

async function main() {
  // (the worker's own sizes: a budget that holds the apps)
  const driver = await QuickJsDriver.create({ memoryLimitMb: 64, contextBudgetMb: 384, adapterSource: adapterSource(), interrupt: () => false });
  const host = () => '{"ok":true,"value":null}';
  const snap = scripts.WRK_REQUEST;
  const texts = [JSON.stringify(ctxFields(snap)), JSON.stringify(ctxMaps(snap))];
  const head = JSON.stringify({ stage: 'call', returnType: 'JSON', wantValue: false, async: false });
  let id = 1;
  const call = (c) => {
    c.start(id++, 'fn', head, JSON.stringify(snap), '{}', '', '', ...texts, '', '');
    const out = JSON.parse(c.drain()).outputs[0];
    if (out.status !== 'value') throw new Error(JSON.stringify(out));
  };
  const open = (name, source) => driver.open(name, prepareScript(name, source, false).code, host);
  const t0 = Date.now();
  for (let i = 0; i < APPS; i++) {
    const c = await open(`app${i}.js`, scripts.tenant(i));
    for (let j = 0; j < 3; j++) call(c);
  }
  const opened = Date.now() - t0;
  const cyclic = await open('cycles.js', CYCLES);
  const pauses = [];
  const start = process.hrtime.bigint();
  for (let i = 0; i < CALLS; i++) {
    const t = process.hrtime.bigint();
    call(cyclic);
    const ms = Number(process.hrtime.bigint() - t) / 1e6;
    if (ms > PAUSE_MS) pauses.push(ms);
  }
  const total = Number(process.hrtime.bigint() - start) / 1e6;
  const worst = pauses.length > 0 ? Math.max(...pauses) : 0;
  console.log(`QuickJS, ${APPS} apps in service (opened and called in ${(opened / 1000).toFixed(1)} s), one app's ${CALLS} calls each leaving 100 cycles`);
  console.log(`  calls over ${PAUSE_MS} ms   ${pauses.length} (longest ${worst.toFixed(0)} ms, ${pauses.reduce((a, b) => a + b, 0).toFixed(0)} ms in all)`);
  console.log(`  the app's calls  ${(total / 1000).toFixed(2)} s (${((total * 1000) / CALLS).toFixed(0)} µs a call)`);
  console.log(`  heap             ${(driver.memory.buffer.byteLength / 1048576).toFixed(0)} MiB`);
}

main().catch((e) => {
  console.error(e);
  process.exit(1);
});
