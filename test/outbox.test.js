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

test('a message carrying a long text goes at once as itself (a structured clone, not JSON), after what was held before it', async () => {
  const { CLONE_TEXT_CHARS } = require('../dist/cjs/runtime/messages');
  const sent = [];
  const box = new Outbox((data) => sent.push(data));
  const body = 'x'.repeat(CLONE_TEXT_CHARS);
  const short = { type: 'reply', callId: 1, reply: { ok: true, value: 'short' } };
  const long = { type: 'reply', callId: 2, reply: { ok: true, value: { id: 'r1', status: 200, headers: {}, url: 'u', body } } };
  const result = { type: 'result', id: 3, result: { state: {}, outcome: { kind: 'output', output: { type: 'JSON', json: JSON.stringify(body) } } } };
  box.post(short);
  box.post(long);
  box.post(result);
  box.post({ type: 'reply', callId: 4, reply: { ok: true, value: body.slice(1) } }); // one character short of long
  // the held message first, as JSON text; each long one on its own, as the object itself
  expect(sent).toHaveLength(3);
  expect(typeof sent[0]).toBe('string');
  expect(sent[1]).toBe(long);
  expect(sent[2]).toBe(result);
  await turn();
  expect(sent).toHaveLength(4);
  // decode takes both forms, in the order sent
  expect(sent.flatMap((d) => decode(d)).map((m) => m.callId ?? m.id)).toEqual([1, 2, 3, 4]);
});
