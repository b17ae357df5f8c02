'use strict';
// The job message between the pool and a worker (lib/runtime/job-message.ts): a job's repeating
// part crosses once per worker into a template slot; these check that every job still reads
// exactly its own fields, through the codec and through a real pool.
const { WorkerPool } = require('scriptable-api');
const { TemplateTable, TEMPLATE_SLOTS, encodeJob, decodeJob } = require('../dist/cjs/runtime/job-message.js');
const { newResponseState } = require('../dist/cjs/runtime/protocol.js');

const REQUEST = { headers: { host: 'h' }, headerLists: {}, cookies: {}, query: {}, form: {}, requestId: 'r1', appId: 'app1', path: 'p', method: 'GET' };

function job(over = {}) {
  return {
    requestId: 'r1',
    appId: 'app1',
    apiPath: 'p',
    returnType: 'JSON',
    phase: 'all',
    call: { script: 'main.js', function: 'fn' },
    scripts: { 'main.js': { name: 'main.js', hash: 'h-main', source: 'export function fn() { return 1 }' } },
    request: REQUEST,
    state: { attributes: {}, response: newResponseState() },
    deadline: 1_800_000_000_000,
    ...over,
  };
}

/** A pool-side table and a worker-side one, wired by the codec; `send` says which sources go. */
function channel() {
  const table = new TemplateTable();
  const slots = new Array(TEMPLATE_SLOTS);
  const kept = new Map();
  return {
    kept,
    slots,
    pass(j, send = () => true) {
      const text = encodeJob(7, 7, j, table, send);
      return { text, decoded: decodeJob(text, slots, (h, s) => kept.set(h, s)) };
    },
  };
}

/** The job the worker reads, without the transport's own fields, for comparing with what was sent. */
function asSent(d) {
  const { requestJson, ...rest } = d.job;
  return { ...rest, request: JSON.parse(requestJson) };
}

test('a job reads back with every field it was sent with; the repeating part crosses once', () => {
  const ch = channel();
  const first = ch.pass(job({ before: { script: 'hooks.js', function: 'before' }, scripts: { ...job().scripts, 'hooks.js': { name: 'hooks.js', hash: 'h-hooks', source: 'export function before() {}' } } }));
  expect(first.text).toContain('"def":');
  expect(first.text).toContain('"src":');
  const second = ch.pass(job({ requestId: 'r2', deadline: 1_800_000_000_123, before: { script: 'hooks.js', function: 'before' }, scripts: { ...job().scripts, 'hooks.js': { name: 'hooks.js', hash: 'h-hooks', source: 'x' } } }), () => false);
  expect(second.text).not.toContain('"def":');
  expect(second.text).not.toContain('"src":');
  expect(second.text).not.toContain('"state":'); // the state every job starts with is left out
  const d = second.decoded;
  expect(d.jobId).toBe(7);
  expect(d.job.requestId).toBe('r2');
  expect(d.job.deadline).toBe(1_800_000_000_123);
  expect(d.job.before).toEqual({ script: 'hooks.js', function: 'before' });
  expect(d.job.scripts).toEqual({ 'main.js': { name: 'main.js', hash: 'h-main' }, 'hooks.js': { name: 'hooks.js', hash: 'h-hooks' } });
  expect(d.job.state).toEqual({ attributes: {}, response: newResponseState() });
  expect(Object.isFrozen(d.job.state.response.headers)).toBe(true); // shared, so nothing may change it
  expect(ch.kept.get('h-hooks')).toBe('export function before() {}');
});

test('sources sent along stay with their job, and a carried state travels whole', () => {
  const ch = channel();
  const state = { attributes: { a: 1 }, response: { ...newResponseState(), status: 201, headers: [['X-A', '1']] } };
  const { decoded } = ch.pass(job({ state, phase: 'rest' }));
  expect(decoded.job.scripts['main.js'].source).toBe('export function fn() { return 1 }');
  expect(asSent(decoded)).toEqual({ ...job({ state, phase: 'rest' }), scripts: { 'main.js': { name: 'main.js', hash: 'h-main', source: 'export function fn() { return 1 }' } } });
});

test.each([
  ['another app', { appId: 'app2' }],
  ['another path', { apiPath: 'q' }],
  ['another return type', { returnType: 'Text' }],
  ['another function', { call: { script: 'main.js', function: 'other' } }],
  ['an automation', { call: { automation: 'main.js' } }],
  ['an after hook', { after: { script: 'main.js', function: 'fn' } }],
  ['an onError hook', { onError: { script: 'main.js', function: 'fn' } }],
  ['another hash', { scripts: { 'main.js': { name: 'main.js', hash: 'h-2', source: 'y' } } }],
  ['names that run together the same way', { appId: 'app1p', apiPath: '' }],
])('a job differing only by %s gets a template of its own', (_, over) => {
  const ch = channel();
  ch.pass(job());
  const { text, decoded } = ch.pass(job(over), () => false);
  expect(text).toContain('"def":');
  const want = job(over);
  for (const k of ['appId', 'apiPath', 'returnType', 'call', 'after', 'onError']) expect(decoded.job[k]).toEqual(want[k]);
  expect(decoded.job.scripts['main.js'].hash).toBe(want.scripts['main.js'].hash);
});

test('past the slot count the oldest templates are replaced, and each job still reads its own', () => {
  const ch = channel();
  const n = TEMPLATE_SLOTS + 40;
  for (let i = 0; i < n; i++) ch.pass(job({ apiPath: `p${i}` }));
  // the first ones were pushed out: they are defined again; the recent ones are not
  const again = ch.pass(job({ apiPath: 'p0' }));
  expect(again.text).toContain('"def":');
  expect(again.decoded.job.apiPath).toBe('p0');
  const recent = ch.pass(job({ apiPath: `p${n - 1}` }));
  expect(recent.text).not.toContain('"def":');
  expect(recent.decoded.job.apiPath).toBe(`p${n - 1}`);
});

test('a job naming a slot the worker never got is refused, not run with another template', () => {
  const text = encodeJob(3, 3, job(), new TemplateTable(), () => true).replace(/,"def":\{.*?\}\}\}/, '');
  expect(text).not.toContain('"def"');
  expect(decodeJob(text, new Array(TEMPLATE_SLOTS), () => undefined)).toEqual({ jobId: 3, cell: 3, job: null });
});

test('a script named like an Object.prototype member is just a name', () => {
  const ch = channel();
  const scripts = JSON.parse('{"__proto__":{"name":"__proto__","hash":"h-p","source":"s"}}');
  const { decoded } = ch.pass(job({ call: { script: '__proto__', function: 'fn' }, scripts }));
  expect(Object.keys(decoded.job.scripts)).toEqual(['__proto__']);
  expect(Object.getPrototypeOf(decoded.job.scripts)).toBe(Object.prototype);
  expect(decoded.job.scripts.__proto__).toEqual({ name: '__proto__', hash: 'h-p', source: 's' });
});

test('one worker serves more APIs than it has template slots, each with its own script', async () => {
  const pool = new WorkerPool({ engine: 'quickjs', size: 1, maxWorkers: 1 });
  const host = { call: async () => null };
  try {
    const run = (i) =>
      pool.run(
        job({
          requestId: `r${i}`,
          apiPath: `p${i}`,
          call: { script: `s${i % 3}.js`, function: i % 2 ? 'odd' : 'even' },
          scripts: { [`s${i % 3}.js`]: { name: `s${i % 3}.js`, hash: `h${i % 3}`, source: `export const odd = (ctx) => ({ s: ${i % 3}, odd: true, path: ctx.path }); export const even = (ctx) => ({ s: ${i % 3}, odd: false, path: ctx.path })` } },
          request: { ...REQUEST, path: `p${i}` },
          deadline: Date.now() + 10_000,
        }),
        host,
      );
    const n = TEMPLATE_SLOTS + 60;
    const results = [];
    for (let i = 0; i < n; i += 20) results.push(...(await Promise.all(Array.from({ length: Math.min(20, n - i) }, (_, k) => run(i + k)))));
    results.push(await run(0)); // its template was replaced since: defined again
    expect(pool.workerCount).toBe(1);
    results.forEach((r, idx) => {
      const i = idx === n ? 0 : idx;
      expect(r.outcome).toEqual({ kind: 'output', output: { type: 'JSON', json: JSON.stringify({ s: i % 3, odd: i % 2 === 1, path: `p${i}` }) } });
    });
  } finally {
    await pool.close();
  }
});
