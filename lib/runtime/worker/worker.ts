/**
 * Worker-thread entry: loads one engine, then runs every job the pool sends, many at once. A job
 * starts as soon as it arrives (its deadline counts from then); while its scripts wait on the
 * host (async mode) the thread runs the others. Messages: lib/runtime/messages.ts.
 */
import { parentPort, receiveMessageOnPort, workerData } from 'node:worker_threads';
import { setHeldBudgetMb } from '../../automation/held';
import { ERRORS, ERROR_MESSAGE_MAX, clipText } from '../../errors';
import { MAX_TIMER_MS } from '../../timers';
import type { JobResult, ScriptJob } from '../engine';
import type { Stage, StageHead } from '../protocol';
import { CALL_OVER, Outbox, SHARED_FLAG, SHARED_SLICE_JOB, SHARED_STARTED, clock, decode, HeldSources, SOURCE_CHARS, SOURCE_SLOTS, vm2ContextBudgetMb, type FromWorker, type JobMessage, type HostReply, type ToWorker, type WorkerConfig } from '../messages';
import { EngineError, engineFailure, type SandboxDriver } from './driver';
import { FairQueue } from '../fair-queue';
import { runPipeline, type ChainLink } from './pipeline';
import { Stages, type StageChain, type StageJob } from './stages';
import { prepareScript, type PreparedScript } from './transpile';
import { sourceColumn } from '../rewrite';
import { ownGet } from '../../context/own-map';
import { compileLocation } from '../../error-location';

const config = workerData as WorkerConfig;
const port = parentPort!;
const outbox = new Outbox<FromWorker>((data) => config.results.postMessage(data));
/** Sends at the end of this turn, with the turn's other messages (`now`: at once, with them). */
const post = (m: FromWorker, now = false): void => outbox.post(m, now);
const shared = { clock: new Float64Array(config.shared.clock), ints: new Int32Array(config.shared.ints) };

interface RunningJob extends StageJob {
  job: ScriptJob;
  startedAt: number;
  timer?: NodeJS.Timeout;
  /** Its host calls made by the worker itself (ownCalls) not answered yet. */
  ownCalls: number;
  /** The stage it runs (PipelineEnv.entering): where its deadline finds it. */
  at?: { stage: Stage; script: string };
  /** Time another app's job held the thread while this one was in flight, added to its deadline (see heldFor). */
  stalledMs: number;
}

const jobs = new Map<number, RunningJob>();
/** Async host calls made by the worker itself (automations), by call id. */
const ownCalls = new Map<number, { job: RunningJob; settle: (reply: HostReply) => void }>();
let nextCall = 1;

// ---- slices: the pool reads how long this thread has been busy ------------------------------
let depth = 0;
/** The jobs that arrived during the current long slice went back to the pool. */
let bounced = false;
/** When the current slice began, and its job (blocking host calls it waits in count: they hold the thread too). */
let heldSince = 0;
let heldBy = 0;
/**
 * Replies of the pool not delivered yet, in the order they came (deliverReplies); those pulled off
 * the port while bouncing are delivered once the slice ends.
 */
const replies: ToWorker[] = [];
/** deliverReplies is running or waits for the event loop to turn. */
let repliesQueued = false;
const slices = {
  begin(jobId: number): void {
    if (depth++ === 0) {
      shared.clock[0] = heldSince = clock();
      heldBy = Math.abs(jobId); // (preparing a job's script marks its slice with -id)
      bounced = false;
    }
    Atomics.store(shared.ints, SHARED_SLICE_JOB, jobId);
  },
  end(): void {
    if (--depth > 0) return;
    shared.clock[0] = 0;
    const held = clock() - heldSince;
    if (held >= config.slowMs) heldFor(heldBy, held);
    // (the promise jobs still to run this turn are that job's: the pool's watchdog charges them to it)
    if (untilTurnOpen) Atomics.store(shared.ints, SHARED_SLICE_JOB, laterJob);
    if (replies.length > 0 && !repliesQueued) {
      repliesQueued = true;
      setImmediate(deliverInNewTurn);
    }
  },
  untilTurn(jobId: number): void {
    // (clock[2] from the latest such entry: one end waits for the loop to turn at a time)
    shared.clock[2] = clock();
    laterJob = jobId;
    if (untilTurnOpen) return;
    untilTurnOpen = true;
    setImmediate(endUntilTurn);
  },
};
/** clock[2] is set and its end waits for the event loop to turn. */
let untilTurnOpen = false;
/** The job whose promise jobs may run until the event loop turns (see untilTurn). */
let laterJob = 0;
const endUntilTurn = (): void => {
  untilTurnOpen = false;
  shared.clock[2] = 0;
};
/** The thread's turns (see WorkerShared): from a message to the next turn of the event loop. */
let turnDepth = 0;
const turns = {
  /** A turn begins (a message, or work after the event loop turned): it ends once the loop turns again. */
  begin(): void {
    // a vm2 slice cannot be interrupted to send what earlier jobs posted: send it before each
    if (config.engine === 'vm2') outbox.flush();
    if (turnDepth++ === 0) shared.clock[1] = clock();
    setImmediate(turns.end);
  },
  end(): void {
    if (--turnDepth > 0) return;
    // (an entry waits for a turn of its own, vm2: the thread stays busy, in a turn from now on)
    if (stages?.entriesWaiting()) turns.begin();
    else shared.clock[1] = 0;
  },
};

/**
 * Polled from inside running script code (QuickJS's interrupt handler): stops the entry when its
 * job is past its deadline; once the slice has run past `slowMs`, the jobs that arrived behind it
 * go back to the pool, to start on another worker instead of waiting for this one.
 */
function interrupt(): boolean {
  shared.clock[3] = clock();
  if (stages && clock() >= stages.entryDeadline) return true;
  bounceIfSlow();
  return false;
}

/**
 * Job `jobId` held the thread for `ms` in one slice (its script's work, preparing or loading its
 * scripts, its blocking host calls): the calls of other apps in flight here could not run
 * meanwhile, a reply they waited for included. That time is not theirs: each gets it added to its
 * deadline, up to its own time limit in all, so another app's runaway delays them but does not
 * end them. (Calls of the same app share its context, and count such time as their own.)
 */
function heldFor(jobId: number, ms: number): void {
  const app = jobs.get(jobId)?.job.appId;
  for (const other of jobs.values()) {
    if (other.id === jobId || other.job.appId === app) continue;
    const add = Math.min(ms, other.timeoutMs - other.stalledMs);
    if (add <= 0) continue;
    other.deadline += add;
    other.stalledMs += add;
  }
}

/** Once the current slice has run past `slowMs`, the jobs that arrived behind it go back to the pool. */
function bounceIfSlow(): void {
  if (bounced || depth <= 0 || clock() - shared.clock[0] <= config.slowMs) return;
  bounced = true;
  bounceJobs();
  outbox.flush(); // (results and host calls of the jobs that ran before this slice)
}

/** Sends the jobs not started (arrived, or waiting on the port) back to the pool (replies wait for the thread). */
function bounceJobs(): void {
  const ids: number[] = arrived.clear().map((a) => a.msg.id);
  for (let m = receiveMessageOnPort(port); m; m = receiveMessageOnPort(port)) {
    for (const msg of decode<ToWorker>(m.message)) {
      if (msg.type === 'job') {
        withSources(msg);
        ids.push(msg.id);
      } else replies.push(msg);
    }
  }
  if (ids.length > 0) post({ type: 'bounce', ids }, true);
}

// ---- host calls -----------------------------------------------------------------------------
class HostTimeout extends Error {}

/** How often a thread waiting on a blocking call sends back the jobs that arrived meanwhile. */
const BLOCKED_POLL_MS = 10;

/**
 * A call the thread waits for: the pool replies on the reply port and wakes the shared flag.
 * Jobs that arrive meanwhile go back to the pool, to start on another worker.
 */
function callBlocking(jobId: number, callId: number, op: string, args: Record<string, unknown>, deadline: number): HostReply {
  if (deadline <= clock()) throw new HostTimeout(); // (never asked: the call is over)
  Atomics.store(shared.ints, SHARED_FLAG, 0);
  post({ type: 'host', jobId, callId, op: op as never, args, blocking: true }, true);
  const since = shared.clock[0];
  const turnSince = shared.clock[1];
  shared.clock[0] = 0; // waiting is not computing
  shared.clock[1] = 0;
  try {
    for (;;) {
      const remaining = Math.min(deadline - clock(), MAX_TIMER_MS);
      if (remaining <= 0) throw new HostTimeout();
      bounceJobs();
      Atomics.wait(shared.ints, SHARED_FLAG, 0, Math.min(remaining, BLOCKED_POLL_MS));
      // every queued reply is read: stale ones (of a call that timed out earlier) are dropped
      for (let m = receiveMessageOnPort(config.replies); m; m = receiveMessageOnPort(config.replies)) {
        for (const msg of decode<ToWorker>(m.message)) if (msg.type === 'reply' && msg.callId === callId) return msg.reply;
      }
      Atomics.store(shared.ints, SHARED_FLAG, 0);
    }
  } finally {
    if (since !== 0) shared.clock[0] = clock();
    if (turnSince !== 0) shared.clock[1] = clock();
  }
}

const host = {
  callSync(job: StageJob, script: string, op: string, argsJson: string): string {
    const args = JSON.parse(argsJson) as Record<string, unknown>;
    if (op === 'console') {
      post({ type: 'host', jobId: job.id, callId: 0, op: 'console', args: { ...args, script }, blocking: false });
      return '{"ok":true,"value":null}';
    }
    try {
      return JSON.stringify(callBlocking(job.id, nextCall++, op, args, stages!.entryJob === job ? stages!.entryDeadline : job.deadline));
    } catch (e) {
      if (!(e instanceof HostTimeout)) throw e;
      job.hostTimedOut = true;
      return JSON.stringify({ ok: false, error: { name: 'TimeoutError', message: 'The script timed out while waiting for a host call', code: ERRORS.SCRIPT_TIMEOUT.code } });
    }
  },
  callAsync(job: StageJob, op: string, argsJson: string): number {
    const callId = nextCall++;
    post({ type: 'host', jobId: job.id, callId, op: op as never, args: JSON.parse(argsJson) as Record<string, unknown>, blocking: false });
    return callId;
  },
};

// ---- jobs -----------------------------------------------------------------------------------
/** Sources by hash, as the pool sent them (it leaves out those held here). */
const sources = new HeldSources<string>();

/** The job with every source, keeping the ones it brings. */
function withSources(msg: JobMessage): ScriptJob {
  const scripts: ScriptJob['scripts'] = Object.create(null); // (any name is just a key)
  for (const [name, s] of Object.entries(msg.job.scripts)) {
    if (s.source !== undefined) sources.add(s.hash, s.source.length, s.source);
    scripts[name] = { name: s.name, hash: s.hash, source: s.source ?? sources.get(s.hash) ?? '' };
  }
  return { ...msg.job, scripts };
}

let driver: SandboxDriver;
let stages: Stages | undefined;
let poisonReported = false;
/** Prepared sources by hash (the hash covers the name and the text); emptied past SOURCE_SLOTS of them or SOURCE_CHARS of code. */
const prepared = new Map<string, PreparedScript | EngineError>();
let preparedChars = 0;

/** The (app, script version) pairs whose blocking mode was reported (apps may run the same source). */
const blockingReported = new Set<string>();

function prepare(name: string, hash: string, source: string): PreparedScript {
  let p = prepared.get(hash);
  if (p === undefined) {
    try {
      p = prepareScript(name, source, config.engine === 'vm2');
    } catch (e) {
      const message = String((e as Error)?.message ?? e);
      p = new EngineError('SCRIPT_COMPILE_ERROR', `${name}: ${message}`, { name: 'SyntaxError', location: compileLocation(name, message, undefined) });
    }
    const chars = p instanceof EngineError ? 0 : p.code.length;
    if (prepared.size >= SOURCE_SLOTS || preparedChars + chars > SOURCE_CHARS) {
      prepared.clear();
      preparedChars = 0;
    }
    prepared.set(hash, p);
    preparedChars += chars;
  }
  if (p instanceof EngineError) throw p;
  return p;
}

/**
 * Names a script that runs in blocking mode, once per (app, version): when it runs, not when it is
 * prepared (a source the rewrite could not parse falls back to blocking mode, and most often the
 * engine cannot compile it either: it never runs, and its compile error says why).
 */
function reportBlocking(appId: string, name: string, hash: string, p: PreparedScript): void {
  if (!p.async && !blockingReported.has(`${appId}\u0000${hash}`)) {
    if (blockingReported.size >= SOURCE_SLOTS) blockingReported.clear();
    blockingReported.add(`${appId}\u0000${hash}`);
    post({ type: 'blockingMode', appId, script: name, reason: p.reason ?? `${name}: the rewrite left it unchanged` });
  }
}

/**
 * The stages a run of `script` may go on to (StageChain): those whose scripts prepare, up to the
 * first that does not (it then runs alone, and fails as such). Its context holds the scripts'
 * modules, each once; its key names them all.
 */
function chainOf(appId: string, script: string, hash: string, next: readonly ChainLink[], entering: (stage: Stage, script: string) => void): StageChain | undefined {
  const modules = [script];
  const chain: StageChain = { key: `${appId}\u0000${hash}`, more: [], next: [] };
  for (const link of next) {
    let p: PreparedScript;
    try {
      p = prepare(link.ref.script, link.hash, link.source);
    } catch {
      break;
    }
    let module = modules.indexOf(link.ref.script);
    if (module < 0) {
      module = modules.push(link.ref.script) - 1;
      chain.more.push({ name: link.ref.script, code: p.code });
      chain.key += `\u0000${link.hash}`;
    }
    const { stage, returnType, wantValue } = link.head;
    const runs = () => {
      entering(stage, link.ref.script);
      reportBlocking(appId, link.ref.script, link.hash, p);
    };
    chain.next.push({ script: link.ref.script, head: { stage, returnType, wantValue, async: p.async, module, fn: link.ref.function }, runs });
  }
  return chain.next.length > 0 ? chain : undefined;
}

const clipMessage = (text: string): string => clipText(text, ERROR_MESSAGE_MAX);

/**
 * The result as it crosses to the pool: a script's error texts (the failure's message and name,
 * sendError's message, the call failure onError handled) cut as the error body and the log cut
 * them (ERROR_MESSAGE_MAX), so a long one is neither copied nor parsed on the host's event loop.
 */
function clipped(result: JobResult): JobResult {
  let { outcome, state, handled } = result;
  if (outcome.kind !== 'error' && !state.response.error?.message && handled === undefined) return result; // (nothing to cut: the usual result)
  if (outcome.kind === 'error') {
    const d = outcome.detail;
    const detail = d && { ...d, ...(d.name !== undefined ? { name: clipMessage(d.name) } : {}), ...(d.callFailure ? { callFailure: { ...d.callFailure, message: clipMessage(d.callFailure.message) } } : {}) };
    outcome = { ...outcome, message: clipMessage(outcome.message), ...(detail ? { detail } : {}) };
  }
  const error = state.response.error;
  if (error?.message) state = { ...state, response: { ...state.response, error: { ...error, message: clipMessage(error.message) } } };
  if (handled) handled = { ...handled, message: clipMessage(handled.message) };
  return { ...result, outcome, state, ...(handled ? { handled } : {}) };
}

/**
 * The result without its attributes where the host never reads them: only a `before` phase's
 * (for a rate-limit identifier that names one) are, so a script's attributes, whatever their
 * size, are neither copied nor parsed on the host's event loop for the others.
 */
function sentState(job: ScriptJob, result: JobResult): JobResult {
  if (job.phase === 'before' || Object.keys(result.state.attributes).length === 0) return result;
  return { ...result, state: { attributes: {}, response: result.state.response } };
}

function finish(running: RunningJob, result: JobResult): void {
  if (running.done) return;
  running.done = true;
  clearTimeout(running.timer);
  jobs.delete(running.id);
  // (host calls still out, e.g. to an automations runner that never answers, would keep the job
  // and its request here for good: their late replies are ignored)
  if (running.ownCalls > 0) {
    for (const [callId, call] of ownCalls) {
      if (call.job !== running) continue;
      ownCalls.delete(callId);
      call.settle(CALL_OVER);
    }
  }
  stages!.forget(running);
  post({ type: 'result', id: running.id, result: { ...clipped(sentState(running.job, result)), runMs: clock() - running.startedAt } });
  if (driver.poisoned && !poisonReported) {
    poisonReported = true;
    // (the app whose call left it so runs apart for a while: see WorkerPool.setApart)
    const by = stages!.poisonedBy as RunningJob | null;
    post({ type: 'poisoned', appId: by?.job.appId });
  }
}

function start(id: number, seq: number, job: ScriptJob): void {
  Atomics.store(shared.ints, SHARED_STARTED, seq);
  const now = clock();
  const running: RunningJob = { id, job, timeoutMs: job.timeoutMs, deadline: now + job.timeoutMs, done: false, startedAt: now, ownCalls: 0, stalledMs: 0 };
  jobs.set(id, running);
  // the deadline moves while contexts load: the timer checks it again when it fires
  const check = (): void => {
    const left = running.deadline - clock();
    if (left > 0) {
      running.timer = setTimeout(check, Math.min(MAX_TIMER_MS, left));
      return;
    }
    stages!.cancel(running);
    const e = ERRORS.SCRIPT_TIMEOUT;
    // (the stage waits on the host: a service that never answers is logged at the stage that asked it)
    const detail = running.at === undefined ? undefined : { ...running.at };
    finish(running, { state: job.state, outcome: { kind: 'error', code: e.code, status: e.status, message: e.message, ...(detail ? { detail } : {}) } });
  };
  running.timer = setTimeout(check, Math.min(MAX_TIMER_MS, job.timeoutMs));
  runPipeline(job, {
    stage: (ref, source, hash, texts, next) => {
      const t0 = clock();
      // Preparing a source (parsing it and the rewrite's analysis, synchronous: seconds for a
      // script of a megabyte) is a slice of this job's work the pool sees: the worker is held
      // meanwhile (other calls go to another worker, those that came meanwhile go back). It is
      // not the script's time, and it ends (though not linearly in the source when one scope
      // declares very many names: see docs/script-engine.md, Backstop): the pool's deadline
      // backstop leaves it alone (a negative job id marks it).
      let p: PreparedScript;
      let chain: StageChain | undefined;
      slices.begin(-id);
      try {
        p = prepare(ref.script, hash, source);
        if (next !== undefined && next.length > 0) chain = chainOf(job.appId, ref.script, hash, next, (stage, script) => void (running.at = { stage, script }));
        bounceIfSlow();
      } finally {
        slices.end();
      }
      running.deadline += clock() - t0; // (preparing a source is not the script's time)
      // (nor the turn's, which the pool's backstop measures on vm2)
      if (shared.clock[1] > 0 && clock() - t0 > config.slowMs) shared.clock[1] = clock();
      // (its fields one by one: Node 20 copies a spread followed by fields a thousand times slower)
      const head: StageHead = { stage: texts.head.stage, returnType: texts.head.returnType, wantValue: texts.head.wantValue, async: p.async };
      return stages!.run(running, ref.script, `${job.appId}\u0000${hash}`, p.code, ref.function, head, texts, () => reportBlocking(job.appId, ref.script, hash, p), chain);
    },
    callHost: (op, args) =>
      new Promise((resolve, reject) => {
        const settle = (reply: HostReply) => {
          running.ownCalls--;
          if (reply.ok) resolve(reply.value);
          else reject(Object.assign(new Error(reply.error.message), reply.error));
        };
        running.ownCalls++;
        if (running.done) return settle(CALL_OVER);
        const callId = nextCall++;
        ownCalls.set(callId, { job: running, settle });
        post({ type: 'host', jobId: id, callId, op, args, blocking: false });
      }),
    deadline: () => running.deadline,
    sourceColumn: (script, line, column) => {
      const p = prepared.get(ownGet(job.scripts, script)?.hash ?? '');
      return p === undefined || p instanceof EngineError || p.insertions === undefined ? column : sourceColumn(p.insertions, line, column);
    },
    entering: (stage, script) => void (running.at = { stage, script }),
    notCounted: (ms) => void (running.deadline += ms),
    // (an automation's expressions run here, on the thread: the pool's watchdog must see them)
    compute: (work) => {
      slices.begin(id);
      try {
        return work();
      } finally {
        slices.end();
      }
    },
  }).then(
    (result) => finish(running, result),
    (e: unknown) => {
      const f = ERRORS.ENGINE_FAILURE;
      finish(running, { state: job.state, outcome: { kind: 'error', code: f.code, status: f.status, message: f.message, detail: engineFailure(e).detail } });
    },
  );
}

/**
 * Jobs that arrived and have not started, in one line per app served in turn. They start one
 * after another, each once the promise jobs queued before it have run (the next start is a
 * promise job itself): a job computing long holds up no other, since the ones still here go back
 * to the pool (bounceJobs). Once the thread's turn has run past `slowMs` (many short jobs handed
 * over together), the next start waits for the event loop to turn, so the jobs the pool sent
 * since (another app's) join the line and start in their turn, not behind the whole batch.
 */
const arrived = new FairQueue<{ appId: string; msg: JobMessage; job: ScriptJob }>();
let nextQueued = false;
const anyApp = (): boolean => true;

function startNext(): void {
  nextQueued = false;
  const next = arrived.take(anyApp);
  if (next === undefined) return;
  // a poisoned engine takes nothing more: the pool gives the job to another worker
  if (driver.poisoned) post({ type: 'bounce', ids: [next.msg.id] });
  else start(next.msg.id, next.msg.seq, next.job);
  // (after the promise jobs this start queued; none if it went long: the rest went back)
  if (arrived.size > 0) {
    nextQueued = true;
    if (turnIsLong()) setImmediate(startInNewTurn);
    else queueMicrotask(startNext);
  }
}

/** Whether the thread's turn has run past `slowMs` (or none is open): the next piece of work waits for the event loop to turn. */
const turnIsLong = (): boolean => shared.clock[1] === 0 || clock() - shared.clock[1] > config.slowMs;

/** Runs `work` after the event loop turned: a turn of its own, as a message's. */
function inNewTurn(work: () => void): () => void {
  return () => {
    turns.begin();
    work();
  };
}
const startInNewTurn = inNewTurn(() => startNext());
const deliverInNewTurn = inNewTurn(() => deliverReplies());

/**
 * Delivers the replies in line, each resuming its call's script. Once this delivery has run past
 * `slowMs` (many calls resuming at once), the rest wait for the event loop to turn, so jobs the
 * pool sent meanwhile (another app's) start in between instead of behind all of them. (Its own
 * time, not the turn's: after a long slice, the calls it held resume before another job starts.)
 */
function deliverReplies(): void {
  repliesQueued = true; // (replies a bounce pulls off the port meanwhile join this delivery)
  const from = clock();
  let i = 0;
  while (i < replies.length) {
    if (i > 0 && clock() - from > config.slowMs) break;
    onMessage(replies[i++]);
  }
  replies.splice(0, i);
  if (replies.length > 0) setImmediate(deliverInNewTurn);
  else repliesQueued = false;
}

/** A message of the pool: a job joins `arrived` (started by startNext), a reply goes to its call. */
function onMessage(msg: ToWorker): void {
  if (msg.type === 'job') {
    arrived.push({ appId: msg.job.appId, msg, job: withSources(msg) });
    return;
  }
  const own = ownCalls.get(msg.callId);
  if (own) {
    ownCalls.delete(msg.callId);
    own.settle(msg.reply);
  } else stages!.reply(msg.callId, JSON.stringify(msg.reply));
}

async function main(): Promise<void> {
  if (config.engine === 'vm2') {
    // A script's promise rejected with nothing to handle it (an async function called without
    // `await` that throws) would end this thread, and with it every call on it, whichever app's.
    // It is dropped, as QuickJS drops it; its reason is not read (reading it runs script code).
    process.on('unhandledRejection', () => undefined);
    // (the heap is the scripts' memory limit: automations' values get a share of it, see held.ts)
    setHeldBudgetMb(Math.max(8, config.memoryLimitMb / 2));
    const { Vm2Driver } = await import('./vm2-driver');
    driver = new Vm2Driver(config.adapterSource, () => (stages && Number.isFinite(stages.entryDeadline) ? Math.ceil(stages.entryDeadline - clock()) : 10_000));
  } else {
    const { QuickJsDriver } = await import('./quickjs-driver');
    driver = await QuickJsDriver.create({
      memoryLimitMb: config.memoryLimitMb,
      contextBudgetMb: config.contextBudgetMb,
      adapterSource: config.adapterSource,
      interrupt,
      heapGrowth: (bytes, pastBy) => (stages ? stages.heapGrowth(bytes, pastBy) : pastBy <= 0),
      wasmModule: config.wasmModule,
    });
  }
  const budgetMb = config.engine === 'vm2' ? vm2ContextBudgetMb(config.contextBudgetMb) : config.contextBudgetMb;
  // (a job that drove half of one call's limit of the heap's growth can be ended as its hog)
  stages = new Stages(driver, host, slices, budgetMb * 1024 * 1024, (config.memoryLimitMb * 1024 * 1024) / 2, config.memoryLimitMb * 1024 * 1024);
  await warmUp(driver);
  // the thread is busy from a message until its event loop turns again (the messages queued with
  // it, and the promise jobs they leave, run in between)
  port.on('message', (data: unknown) => {
    turns.begin();
    const msgs = decode<ToWorker>(data);
    // every job of the message joins `arrived` before any script code runs
    for (const msg of msgs) if (msg.type === 'job') onMessage(msg);
    for (const msg of msgs) if (msg.type !== 'job') replies.push(msg);
    if (!repliesQueued) deliverReplies();
    if (nextQueued) return;
    // (replies still in line, the calls a long slice held: the jobs that came after them start after them)
    if (repliesQueued) {
      nextQueued = true;
      setImmediate(startInNewTurn);
    } else startNext();
  });
  post({ type: 'ready' }, true);
}

/**
 * One throw-away script prepared and run before the worker says it is ready: loading the
 * transforms and the engine's first context is start-up work, not the first call's.
 */
async function warmUp(d: SandboxDriver): Promise<void> {
  const p = prepareScript('warm-up.js', 'export function f(ctx) { return platform.system.getAccountByToken(ctx.headers.t) }', config.engine === 'vm2');
  const ctx = await d.open('warm-up.js', p.code, () => '{"ok":true,"value":null}');
  ctx.start(1, 'f', JSON.stringify({ stage: 'call', returnType: 'JSON', wantValue: false, async: false }), '{"headers":{}}', '{}', '', '', '');
  await ctx.drain();
  ctx.dispose();
}

void main().catch((e) => post({ type: 'fatal', message: (e as Error)?.message ?? String(e) }, true));
