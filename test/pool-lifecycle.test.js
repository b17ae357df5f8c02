'use strict';
// The worker pool driven directly (ScriptEngine.run): calls handed to a worker together, workers
// that can take no more work, closing twice, workers that cannot start.
const { WorkerPool } = require('scriptable-api');
const { newResponseState } = require('../dist/cjs/runtime/protocol.js');

/** A job of app `appId` calling `fn` of a script of its own. */
function job(appId, source, query = {}, timeoutMs = 10_000) {
  const hash = `${appId}-${source.length}-${Buffer.from(source).toString('base64').slice(0, 24)}`;
  return {
    requestId: `r-${appId}`,
    appId,
    apiPath: 'p',
    returnType: 'JSON',
    phase: 'all',
    call: { script: 'main.js', function: 'fn' },
    scripts: { 'main.js': { name: 'main.js', hash, source } },
    request: {
      requestId: `r-${appId}`, appId, path: 'p', method: 'GET', url: `/api/${appId}/p`, headers: {}, headerLists: {}, cookies: {}, query,
      queryString: null, body: '', form: {}, protocol: 'HTTP/1.1', scheme: 'http', serverName: 'localhost', serverPort: 80, remoteAddr: '127.0.0.1',
      remoteHost: '127.0.0.1', remotePort: 1, contentType: null, characterEncoding: null, authType: null, contextPath: '/api', servletPath: `/${appId}`,
      pathInfo: '/p', requestURI: `/api/${appId}/p`, parts: [],
    },
    state: { attributes: {}, response: newResponseState() },
    timeoutMs,
  };
}
const host = { call: async () => null };
const FAST = 'export function fn() { return { fast: true } }';
/** Computes for `ctx.query.ms` ms (none: returns at once). */
const SPIN = 'export function fn(ctx) { const t = Date.now(); while (Date.now() - t < Number(ctx.query.ms || 0)) {} return { spun: true } }';

test('calls handed to a worker together with one that computes long start on another worker', async () => {
  const pool = new WorkerPool({ engine: 'quickjs', size: 1, maxWorkers: 4 });
  try {
    await pool.ready();
    // (contexts loaded: the calls below start at once, none waits for a module to load)
    await pool.run(job('slow', SPIN), host);
    for (const app of ['a', 'b']) await pool.run(job(app, FAST), host);
    // one turn: the three go to the only worker in one message, the long one first
    const order = [];
    const calls = [pool.run(job('slow', SPIN, { ms: '5000' }), host), pool.run(job('a', FAST), host), pool.run(job('b', FAST), host)];
    calls.forEach((p, i) => p.then(() => order.push(i)));
    const results = await Promise.all(calls);
    expect(results.map((r) => r.outcome.kind)).toEqual(['output', 'output', 'output']);
    expect(order[order.length - 1]).toBe(0); // the two fast calls did not wait for it
  } finally {
    await pool.close();
  }
}, 30_000);

test('a call a worker sent back keeps its queueTimeoutMs across a wall-clock step ahead', async () => {
  const pool = new WorkerPool({ engine: 'quickjs', size: 1, maxWorkers: 1, queueTimeoutMs: 30_000 });
  const realNow = Date.now;
  try {
    await pool.ready();
    await pool.run(job('slow', SPIN), host);
    await pool.run(job('a', FAST), host);
    // the wall clock steps 1 h ahead just as the worker sends the fast call back (it arrived
    // behind the long one): the call waits for the worker, as it would have without the step
    const onMessage = pool.onMessage.bind(pool);
    pool.onMessage = (w, msg) => {
      if (msg.type === 'bounce') jest.spyOn(Date, 'now').mockImplementation(() => realNow() + 3600e3);
      return onMessage(w, msg);
    };
    const calls = [pool.run(job('slow', SPIN, { ms: '1500' }), host), pool.run(job('a', FAST), host)];
    const results = await Promise.all(calls);
    expect(Date.now() - realNow()).toBeGreaterThan(3000e3); // (the step did come)
    expect(results.map((r) => r.outcome.kind === 'output' || r.outcome.code)).toEqual([true, true]);
  } finally {
    jest.restoreAllMocks();
    await pool.close();
  }
}, 30_000);

test('a graceful close() waits for the calls in flight when the limits add up past what a timer holds (2^31 - 1 ms)', async () => {
  const pool = new WorkerPool({ engine: 'quickjs', size: 1, maxWorkers: 1, queueTimeoutMs: 2147483647 });
  const warnings = [];
  const onWarning = (w) => warnings.push(w.name);
  process.on('warning', onWarning);
  try {
    await pool.ready();
    await pool.run(job('slow', SPIN), host);
    const running = pool.run(job('slow', SPIN, { ms: '800' }), host);
    await new Promise((r) => setTimeout(r, 100));
    await pool.close();
    expect((await running).outcome).toMatchObject({ kind: 'output' });
    expect(warnings).not.toContain('TimeoutOverflowWarning');
  } finally {
    process.off('warning', onWarning);
    await pool.close({ force: true });
  }
}, 30_000);

test('a worker that can take no more work and sent its last call back ends', async () => {
  const pool = new WorkerPool({ engine: 'quickjs', size: 1, maxWorkers: 2 });
  try {
    await pool.ready();
    const w = pool.workers[0];
    // a call held on the worker (waiting on the host), then the worker reports a poisoned engine
    // and sends that call back (as a worker does with a job it cannot start)
    const slowHost = { call: () => new Promise((r) => setTimeout(() => r({ id: 't' }), 20_000).unref()) };
    void pool.run(job('a', 'export async function fn() { return await platform.system.getAccountByToken("t") }'), slowHost);
    await new Promise((r) => setTimeout(r, 200));
    const [id] = [...w.tasks.keys()];
    pool.onMessage(w, { type: 'poisoned' });
    pool.onMessage(w, { type: 'bounce', ids: [id] });
    // it ends now, not once the call it sent back has finished there (that call's deadline, 10 s on)
    await Promise.race([new Promise((r) => w.worker.once('exit', r)), new Promise((r) => setTimeout(r, 3000).unref())]);
    expect(w.dead).toBe(true);
  } finally {
    await pool.close({ force: true });
  }
}, 30_000);

test('close({ force: true }) during a graceful close ends both at once', async () => {
  const pool = new WorkerPool({ engine: 'quickjs', size: 1, maxWorkers: 1 });
  await pool.ready();
  const running = pool.run(job('slow', SPIN, { ms: '5000' }), host);
  await new Promise((r) => setTimeout(r, 200));
  const graceful = pool.close();
  const t0 = Date.now();
  await pool.close({ force: true });
  await graceful;
  expect(Date.now() - t0).toBeLessThan(4000); // not the spinning call's 5 s, nor the drain cap
  expect((await running).outcome.kind).toBe('error');
  expect(pool.workerCount).toBe(0);
}, 30_000);

test('workers that keep failing to start: ready() fails at once with the reason, calls without it (it may name host files), the log has it', async () => {
  const errors = [];
  const pool = new WorkerPool({ engine: 'quickjs', size: 1, maxWorkers: 2, logger: { error: (m) => errors.push(m), warn() {}, info() {} } });
  try {
    const reason = "Cannot find module '/srv/app/node_modules/scriptable-api/dist/cjs/runtime/worker/worker.js'";
    for (let i = 0; i < 3; i++) pool.onMessage(pool.workers[pool.workers.length - 1], { type: 'fatal', message: reason });
    await expect(pool.ready()).rejects.toThrow(`The script engine cannot start: ${reason}`);
    expect(errors).toContain(`scriptable-api: a script worker failed to start: ${reason}`);
    const t0 = Date.now();
    const res = await pool.run(job('a', FAST), host);
    expect(res.outcome).toEqual({ kind: 'error', code: 270205, status: 500, message: 'The script engine cannot start' });
    expect(Date.now() - t0).toBeLessThan(1000); // not QUEUE_TIMEOUT's 5 s
  } finally {
    await pool.close();
  }
});

test.each(['quickjs', 'vm2'])("%s: a job the worker cannot run fails 270205 with the table's message; the worker's own reason is in detail.cause (for the log), and the worker runs the next job", async (engine) => {
  const pool = new WorkerPool({ engine, size: 1 });
  try {
    // (a snapshot the router never makes: the worker's pipeline throws reading it)
    const res = await pool.run({ ...job('a', FAST), request: null }, host);
    expect(res.outcome).toEqual({ kind: 'error', code: 270205, status: 500, message: 'The script engine failed', detail: { cause: expect.stringMatching(/Cannot read properties of null/) } });
    expect((await pool.run(job('a', FAST), host)).outcome).toEqual({ kind: 'output', output: { type: 'JSON', json: '{"fast":true}' } });
  } finally {
    await pool.close();
  }
});

test('a worker whose blocking call outlived its job is free again when the job ends', async () => {
  const pool = new WorkerPool({ engine: 'quickjs', size: 1, maxWorkers: 4 });
  try {
    await pool.ready();
    // a host call inside a callback handed to a built-in: blocking mode (it holds the thread)
    const blocking = 'export function fn() { return ["t"].map((t) => platform.system.getAccountByToken(t))[0] }';
    const slowHost = { call: () => new Promise((r) => setTimeout(() => r({ id: 't' }), 5000).unref()) };
    const res = await pool.run(job('a', blocking, {}, 300), slowHost);
    expect(res.outcome).toMatchObject({ kind: 'error', code: 270200 });
    // the worker gave up waiting at the job's deadline: it takes work again (before, it counted
    // as blocked until the host answered, 5 s on, and calls went to stand-in workers)
    expect(pool.workers.map((w) => w.blocked)).toEqual(pool.workers.map(() => 0));
  } finally {
    await pool.close({ force: true });
  }
}, 30_000);

test('close({ force: true }) answers the calls it stops SHUTTING_DOWN (503), not an engine failure', async () => {
  const pool = new WorkerPool({ engine: 'quickjs', size: 1, maxWorkers: 1 });
  await pool.ready();
  let asked;
  const called = new Promise((r) => (asked = r));
  const waiting = { call: () => (asked(), new Promise(() => {})) }; // (an upstream that never answers)
  const WAIT = "export function fn() { return platform.system.getAccountByToken('t') }";
  const running = [pool.run(job('a', WAIT), waiting), pool.run(job('b', SPIN, { ms: '5000' }), host)];
  await called;
  await pool.close({ force: true });
  for (const r of await Promise.all(running)) expect(r.outcome).toMatchObject({ kind: 'error', code: 270208, status: 503 });
}, 30_000);

test('close({ force: true }) while a worker sends calls back answers them SHUTTING_DOWN at once', async () => {
  const pool = new WorkerPool({ engine: 'quickjs', size: 1, maxWorkers: 1, queueTimeoutMs: 20_000 });
  await pool.ready();
  await Promise.all([pool.run(job('s', SPIN), host), pool.run(job('f', FAST), host)]); // (their contexts are loaded)
  const t0 = Date.now();
  const runs = [pool.run(job('s', SPIN, { ms: '3000' }), host), ...Array.from({ length: 5 }, () => pool.run(job('f', FAST), host))];
  // hold this thread until the worker has computed long enough to send the fast calls back: their
  // message waits here, unread, when close() stops the workers
  const [w] = pool.workers;
  while (w.sliceMs() === 0 && Date.now() - t0 < 10_000) await new Promise(setImmediate);
  for (const until = Date.now() + 300; Date.now() < until; ); // (the worker sends them back 25 ms in)
  await pool.close({ force: true });
  const results = await Promise.all(runs);
  expect(Date.now() - t0).toBeLessThan(10_000); // (not the 20 s of queueTimeoutMs)
  for (const r of results) expect(r.outcome).toMatchObject({ kind: 'error', code: 270208, status: 503 });
}, 30_000);

test('vm2: calls a worker sent back while a blocking host call held it run there once it is free, and so do later ones', async () => {
  const pool = new WorkerPool({ engine: 'vm2', size: 1, maxWorkers: 1, queueTimeoutMs: 5000 });
  try {
    await pool.ready();
    const blocking = 'export function fn() { return ["t"].map((t) => platform.system.getAccountByToken(t))[0] }';
    const quick = { call: async () => ({ id: 't' }) };
    const slowHost = { call: () => new Promise((r) => setTimeout(() => r({ id: 't' }), 300)) };
    // (contexts loaded: the blocking call is made as soon as its job starts)
    await pool.run(job('a', blocking), quick);
    await pool.run(job('b', FAST), quick);
    // one turn: the four fast calls reach the worker with the blocking one and go back to the line
    const runs = [pool.run(job('a', blocking), slowHost), ...Array.from({ length: 4 }, () => pool.run(job('b', FAST), quick))];
    const results = await Promise.all(runs);
    expect(results.map((r) => r.outcome.kind)).toEqual(['output', 'output', 'output', 'output', 'output']);
    // (before, the worker counted them as sent and not started for good: no call ever reached it again)
    expect((await pool.run(job('b', FAST), quick)).outcome.kind).toBe('output');
  } finally {
    await pool.close({ force: true });
  }
}, 30_000);

test('a graceful close() replaces a worker that ends meanwhile: the calls in line run instead of waiting for QUEUE_TIMEOUT', async () => {
  const pool = new WorkerPool({ engine: 'quickjs', size: 1, maxWorkers: 1, memoryLimitMb: 16, queueTimeoutMs: 20_000 });
  let closing;
  try {
    await pool.ready();
    const BOMB = 'export function fn() { const a = []; for (;;) a.push(new Array(50000).fill(7)) }';
    await pool.run(job('f', FAST), host); // (its context is loaded)
    const t0 = Date.now();
    const bomb = pool.run(job('b', BOMB), host);
    // the fast calls come while the bomb computes: they wait in line, or reach the worker and come back
    const [w] = pool.workers;
    while (w.sliceMs() === 0 && Date.now() - t0 < 10_000) await new Promise(setImmediate);
    const fast = Array.from({ length: 3 }, () => pool.run(job('f', FAST), host));
    closing = pool.close();
    expect((await bomb).outcome).toMatchObject({ kind: 'error', code: 270201 });
    // the bomb's worker is replaced once it ends (before, not while closing: no worker took them)
    for (const r of await Promise.all(fast)) expect(r.outcome.kind).toBe('output');
    await closing;
    expect(Date.now() - t0).toBeLessThan(10_000); // (not the 20 s of queueTimeoutMs)
  } finally {
    await pool.close({ force: true });
  }
}, 40_000);

test('queueTimeoutMs counts while a worker is ready: calls that come while the workers start run once one is; a call behind a held worker still times out', async () => {
  // (a worker takes far longer than 1 ms to start: every call below waits for it)
  const pool = new WorkerPool({ engine: 'quickjs', size: 1, maxWorkers: 1, queueTimeoutMs: 1 });
  try {
    const results = await Promise.all(['a', 'b', 'c'].map((app) => pool.run(job(app, FAST), host)));
    expect(results.map((r) => r.outcome.kind)).toEqual(['output', 'output', 'output']);
  } finally {
    await pool.close({ force: true });
  }
  const busy = new WorkerPool({ engine: 'quickjs', size: 1, maxWorkers: 1, queueTimeoutMs: 300 });
  try {
    await busy.ready();
    await Promise.all([busy.run(job('s', SPIN), host), busy.run(job('f', FAST), host)]); // (contexts loaded)
    const spin = busy.run(job('s', SPIN, { ms: '2000' }), host);
    const [w] = busy.workers;
    while (w.sliceMs() === 0) await new Promise(setImmediate);
    const t0 = Date.now();
    const late = await busy.run(job('f', FAST), host);
    expect(late.outcome).toMatchObject({ kind: 'error', code: 270207, status: 503 });
    expect(Date.now() - t0).toBeLessThan(1900); // (while the worker was held, not after it)
    expect((await spin).outcome.kind).toBe('output');
  } finally {
    await busy.close({ force: true });
  }
}, 30_000);

/** Records the order in which the pool hands out app `appId`'s calls (their `n` query value). */
function handedOut(pool, appId) {
  const order = [];
  const take = pool.queue.take.bind(pool.queue);
  pool.queue.take = (allowed) => {
    const t = take(allowed);
    if (t && t.appId === appId) order.push(t.job.request.query.n);
    return t;
  };
  return order;
}

test('calls a worker sends back (it computes long) go back in line in the order they came, not reversed', async () => {
  // (one worker to begin with: a second would take some of a burst of one app's calls at once)
  const pool = new WorkerPool({ engine: 'quickjs', size: 1, maxWorkers: 2, maxWorkersPerApp: 2 });
  try {
    await pool.ready();
    await pool.run(job('a', SPIN), host);
    const order = handedOut(pool, 'a');
    // one turn: the six go to the worker of the first, which computes long and sends them back
    // to the worker the pool starts meanwhile
    const calls = [pool.run(job('a', SPIN, { ms: '1000', n: '0' }), host)];
    for (let n = 1; n <= 6; n++) calls.push(pool.run(job('a', SPIN, { n: String(n) }), host));
    for (const r of await Promise.all(calls)) expect(r.outcome.kind).toBe('output');
    expect(order.slice(0, 8)).toEqual(['0', '1', '2', '3', '4', '5', '6', '1']);
    // Then the rest in order. (On a loaded machine the worker taking them back may itself be held
    // past the slice limit by the scheduler, and send the ones behind back again: each batch
    // keeps the order, from where it stopped to the last.)
    const batches = [];
    for (const n of order.slice(7)) {
      const last = batches.at(-1);
      if (last !== undefined && Number(n) === Number(last.at(-1)) + 1) last.push(n);
      else batches.push([n]);
    }
    for (const b of batches) expect(b).toEqual(['1', '2', '3', '4', '5', '6'].slice(Number(b[0]) - 1));
  } finally {
    await pool.close();
  }
}, 30_000);

test('vm2: calls a terminated worker had not started go back in line in the order they came', async () => {
  const pool = new WorkerPool({ engine: 'vm2', size: 1, maxWorkers: 1, graceMs: 50 });
  try {
    await pool.ready();
    const LOOP = 'export function fn(ctx) { if (ctx.query.loop) while (true) {} return 1 }';
    await pool.run(job('a', LOOP), host);
    const order = handedOut(pool, 'a');
    const calls = [pool.run(job('a', LOOP, { loop: '1', n: '0' }, 300), host)];
    for (let n = 1; n <= 6; n++) calls.push(pool.run(job('a', LOOP, { n: String(n) }), host));
    const results = await Promise.all(calls);
    expect(results.map((r) => r.outcome.kind)).toEqual(['error', 'output', 'output', 'output', 'output', 'output', 'output']);
    expect(order).toEqual(['0', '1', '2', '3', '4', '5', '6', '1', '2', '3', '4', '5', '6']);
  } finally {
    await pool.close();
  }
}, 30_000);

test('a flood of one app computing long, all in one turn, holds at most maxWorkersPerApp workers', async () => {
  const { clock } = require('../dist/cjs/runtime/messages.js');
  const pool = new WorkerPool({ engine: 'quickjs', size: 3, maxWorkers: 3, maxWorkersPerApp: 1, queueTimeoutMs: 1500 });
  try {
    await pool.ready();
    await pool.run(job('hog', SPIN), host);
    await pool.run(job('b', FAST), host);
    let most = 0;
    const watch = setInterval(() => (most = Math.max(most, pool.slowApps(clock()).get('hog') ?? 0)), 5);
    // more calls than a worker takes before the pool looks at the next one (they all come in one turn)
    const flood = Array.from({ length: 140 }, () => pool.run(job('hog', SPIN, { ms: '60000' }, 1000), host));
    const other = await pool.run(job('b', FAST), host);
    const results = await Promise.all(flood);
    clearInterval(watch);
    expect(other.outcome.kind).toBe('output');
    expect(most).toBe(1);
    // (one worker at a time: a few calls time out, the others wait in line past their 1.5 s)
    expect(results.filter((r) => r.outcome.code === 270207).length).toBeGreaterThanOrEqual(130);
  } finally {
    await pool.close();
  }
}, 30_000);

/**
 * Starts 200 calls of app `burst` (`run` starts one), waits for `ready` and 50 ms, then times one
 * FAST call of app `b`: how long it took and how many of the burst's calls ended before it.
 */
async function otherDuringBurst(engine, pool, run, ready = async () => undefined) {
  let done = 0;
  const burst = Array.from({ length: 200 }, () => run().then((r) => (done++, r)));
  await ready();
  await new Promise((r) => setTimeout(r, 50));
  const t0 = Date.now();
  const other = await pool.run(job('b', FAST), host);
  const ms = Date.now() - t0;
  const before = done;
  const results = await Promise.all(burst);
  console.log(`[${engine}] app b answered in ${ms} ms, after ${before} of the burst's 200 calls`);
  expect(other.outcome.kind).toBe('output');
  expect(results.every((r) => r.outcome.kind === 'output')).toBe(true);
  return { ms, before };
}

test.each(['quickjs', 'vm2'])('%s: a burst of one app\'s short computing calls on one worker delays another app\'s call by a turn, not the burst', async (engine) => {
  const pool = new WorkerPool({ engine, size: 1, maxWorkers: 1 });
  try {
    await pool.ready();
    await pool.run(job('burst', SPIN), host);
    await pool.run(job('b', FAST), host);
    // each call computes 15 ms, under the 25 ms that makes a slice long: 200 of them are 3 s of work
    const { ms, before } = await otherDuringBurst(engine, pool, () => pool.run(job('burst', SPIN, { ms: '15' }), host));
    expect(before).toBeLessThan(60);
    expect(ms).toBeLessThan(1500);
  } finally {
    await pool.close();
  }
}, 60_000);

test.each(['quickjs', 'vm2'])('%s: a burst of one app\'s calls resuming at once after a host call, each computing briefly, delays another app\'s call by a turn, not the burst', async (engine) => {
  const pool = new WorkerPool({ engine, size: 1, maxWorkers: 1 });
  const WAIT_SPIN = 'export function fn(ctx) { const a = platform.system.getAccountByToken("t"); const t = Date.now(); while (Date.now() - t < Number(ctx.query.ms || 0)) {} return { a } }';
  let release;
  const gate = new Promise((r) => (release = r));
  const gatedHost = { call: async () => (await gate, { id: 't' }) };
  try {
    await pool.ready();
    await pool.run(job('burst', WAIT_SPIN), host);
    await pool.run(job('b', FAST), host);
    const { ms, before } = await otherDuringBurst(engine, pool, () => pool.run(job('burst', WAIT_SPIN, { ms: '15' }, 30_000), gatedHost), async () => {
      await new Promise((r) => setTimeout(r, 1000)); // all 200 wait on the host
      release(); // their answers go to the worker together: 3 s of work
    });
    // (before: about a second, after 50-100 of them)
    expect(before).toBeLessThan(40);
    expect(ms).toBeLessThan(800);
  } finally {
    await pool.close();
  }
}, 60_000);

test("vm2: a runaway resumed by a reply that reaches the worker with another app's first call (its module loading) ends as its own timeout", async () => {
  const pool = new WorkerPool({ engine: 'vm2', size: 1, maxWorkers: 1 });
  const SPIN_AFTER = 'export function fn() { platform.system.getAccountByToken("t"); for (;;); }';
  let release;
  let asked;
  const called = new Promise((r) => (asked = r));
  const gatedHost = { call: () => (asked(), new Promise((r) => (release = () => r({ id: 't' })))) };
  try {
    await pool.ready();
    const spin = pool.run(job('spin', SPIN_AFTER, {}, 1500), gatedHost);
    await called;
    // in one turn: the reply resumes the runaway, and a call of an app whose module is not loaded
    // yet goes to the same worker (they cross in one message)
    release();
    const fresh = pool.run(job('fresh', FAST), host);
    const [s, f] = await Promise.all([spin, fresh]);
    expect(s.outcome).toMatchObject({ kind: 'error', code: 270200 });
    // (ended with the worker, or run before it: never charged with the runaway's time)
    if (f.outcome.kind === 'error') expect(f.outcome.code).toBe(270205);
    else expect(f.outcome.kind).toBe('output');
  } finally {
    await pool.close();
  }
}, 60_000);
