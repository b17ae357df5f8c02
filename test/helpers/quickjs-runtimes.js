'use strict';
// Run by test/stages.test.js in a child process (jest cannot load the QuickJS module, which needs
// a dynamic import): opens contexts on one QuickJS driver and prints, as JSON, how they are spread
// over its runtimes (each a cycle collection of its own), and what a call leaving cycles sets off.
const { QuickJsDriver, CONTEXTS_PER_RUNTIME } = require('../../dist/cjs/runtime/worker/quickjs-driver.js');
const { adapterSource } = require('../../dist/cjs/runtime/adapter-source.js');
const { inUse } = require('./quickjs-in-use');

const head = JSON.stringify({ stage: 'call', returnType: 'JSON', wantValue: false, async: false });
const request = JSON.stringify({ requestId: 'r1', method: 'GET', url: '/u', headers: { host: 'h' }, headerLists: {} });
/** Each call leaves 100 objects that refer to themselves: only a cycle collection frees them. */
const CYCLES = 'export function fn(ctx) { for (var i = 0; i < 100; i++) { var o = { n: i }; o.self = o } return { ok: true } }';

async function main() {
  const driver = await QuickJsDriver.create({ memoryLimitMb: 64, contextBudgetMb: 64, adapterSource: adapterSource(), interrupt: () => false });
  const host = () => '{"ok":true,"value":null}';
  let id = 1;
  const call = (c) => {
    c.start(id++, 'fn', head, request, '{}', '', '');
    return JSON.parse(c.drain()).outputs[0];
  };
  const open = (i, code = `export function fn(ctx) { return { app: ${i} } }`) => driver.open(`app${i}.js`, code, host);
  const contexts = [];
  for (let i = 0; i < 2 * CONTEXTS_PER_RUNTIME + 1; i++) contexts.push(await open(i, i === 0 ? CYCLES : undefined));
  const runtimes = [];
  const runtimeOf = (c) => {
    if (!runtimes.includes(c.ctx.runtime)) runtimes.push(c.ctx.runtime);
    return runtimes.indexOf(c.ctx.runtime);
  };
  const spread = contexts.map(runtimeOf);
  // a context closed leaves room in its runtime: the next one opened goes there
  contexts[3].dispose();
  const reopened = await open(1000);
  const reopenedIn = runtimeOf(reopened);
  // a few calls leave cycles in the first runtime; then calls leaving cycles in a context of the
  // last one: its collections run, and leave the first runtime's cycles where they are
  for (let i = 0; i < 5; i++) call(contexts[0]);
  const first0 = inUse(contexts[0]);
  const cyclic = await open(2000, CYCLES);
  const cyclicIn = runtimeOf(cyclic);
  let drops = 0;
  let prev = inUse(cyclic);
  for (let i = 0; i < 2000; i++) {
    if (call(cyclic).status !== 'value') throw new Error('the cyclic call failed');
    if (i % 10 === 9) {
      const now = inUse(cyclic);
      if (now < prev) drops++;
      prev = now;
    }
  }
  const first1 = inUse(contexts[0]);
  process.stdout.write(JSON.stringify({ perRuntime: CONTEXTS_PER_RUNTIME, spread, reopenedIn, cyclicIn, collections: drops, firstRuntimeHeld: [first0, first1], call: call(contexts[40]) }));
}

void main();
