'use strict';
// The pool and its workers send messages in batches: those of one turn together, at most
// OUTBOX_BATCH at a time, in the order posted (lib/runtime/messages.ts).
const { Outbox, OUTBOX_BATCH, decode } = require('../dist/cjs/runtime/messages');

const turn = () => new Promise((resolve) => setImmediate(resolve));

test('the messages of one turn go together at the end of the turn', async () => {
  const sent = [];
  const box = new Outbox((text) => sent.push(decode(text)));
  box.post({ type: 'ready' });
  box.post({ type: 'poisoned' });
  expect(sent).toEqual([]);
  await turn();
  expect(sent).toEqual([[{ type: 'ready' }, { type: 'poisoned' }]]);
});

test('a long turn sends full batches as it goes, in order, and the rest at its end', async () => {
  const sent = [];
  const box = new Outbox((text) => sent.push(decode(text)));
  const n = OUTBOX_BATCH * 2 + 3;
  for (let id = 1; id <= n; id++) box.post({ type: 'bounce', ids: [id] });
  // the first two batches left during the turn: the receiver can start on them
  expect(sent.map((b) => b.length)).toEqual([OUTBOX_BATCH, OUTBOX_BATCH]);
  await turn();
  expect(sent.map((b) => b.length)).toEqual([OUTBOX_BATCH, OUTBOX_BATCH, 3]);
  expect(sent.flat().map((m) => m.ids[0])).toEqual(Array.from({ length: n }, (_, i) => i + 1));
});

test('`now` sends at once, with what the turn held before it', async () => {
  const sent = [];
  const box = new Outbox((text) => sent.push(decode(text)));
  box.post({ type: 'ready' });
  box.post({ type: 'fatal', message: 'x' }, true);
  expect(sent).toEqual([[{ type: 'ready' }, { type: 'fatal', message: 'x' }]]);
  await turn();
  expect(sent).toHaveLength(1);
});
