/**
 * One worker of the pool (lib/runtime/pool.ts) as the pool sees it: the thread, its ports, the
 * shared memory it and the pool both touch (host-call flag, claim cells, the time it started its
 * current job), and the jobs it holds. startWorker() starts one and wires its messages.
 */
import { Worker, MessageChannel, receiveMessageOnPort, type MessagePort } from 'node:worker_threads';
import * as path from 'node:path';
import { performance } from 'node:perf_hooks';
import type { HostBridge, JobResult, ScriptJob } from './engine';
import { adapterSource } from './adapter-source';
import { quickjsWasmModule } from './quickjs-wasm';
import { TemplateTable } from './job-message';

/** A job in the pool: in line, lent to a worker, or running there. */
export interface Task {
  jobId: number;
  job: ScriptJob;
  host: HostBridge;
  resolve: (r: JobResult) => void;
  timer?: NodeJS.Timeout;
  resent: boolean;
  done: boolean;
}

/**
 * Claim cells per worker, indexed by jobId % CLAIM_CELLS. A cell holds the id of the job lent to
 * the worker (free to start), minus that id once the worker started it, or 0 once the pool took
 * it back. Holding the id (not just a state) means a stale message of a job taken back can never
 * claim the cell of a newer job that shares it.
 */
export const CLAIM_CELLS = 4096;
/** Job ids are int32 claim values: they wrap before 2^31. */
export const MAX_JOB_ID = 0x7fffffff;
/** Takes back job `jobId` lent to a worker, unless it started; true when taken back. */
export function takeBack(claims: Int32Array, jobId: number): boolean {
  return Atomics.compareExchange(claims, jobId % CLAIM_CELLS, jobId, 0) === jobId;
}

export interface PoolWorker {
  worker: Worker;
  flag: Int32Array;
  /** Claim cells of the jobs sent to this worker (see the file comment). */
  claims: Int32Array;
  replies: MessagePort;
  /** Results of this worker's jobs, and its host calls (in the order sent). */
  results: MessagePort;
  ready: boolean;
  /** The job this worker runs (or was sent first): null when idle. */
  task: Task | null;
  /** Jobs sent ahead, in order, to start when `task` ends, unless the pool takes them back first. */
  ahead: Task[];
  /** Written by the worker: when it started the job it runs now (epoch ms, fractional), 0 when idle. */
  running: Float64Array;
  /** The current job ran past SLOW_MS: nothing more is sent ahead until it ends. */
  slow: boolean;
  /** Host calls in flight: while > 0 the worker's thread is blocked, not computing. */
  blocked: number;
  known: Set<string>;
  /** The job templates this worker holds (see job-message.ts). */
  templates: TemplateTable;
  idleTimer?: NodeJS.Timeout;
  retired: boolean;
}

/** Epoch ms with sub-ms precision, comparable across threads. */
export function clock(): number {
  return performance.timeOrigin + performance.now();
}

/** How long (ms) the worker has been running its current job, by its own account; 0 when idle. */
export function runningFor(w: PoolWorker, now: number): number {
  const since = w.running[0];
  return since > 1e12 ? now - since : 0; // (0 when idle; anything else not a time is ignored)
}


export interface WorkerSettings {
  engine: 'quickjs' | 'vm2';
  memoryLimitMb: number;
}

/** What the pool does with a worker's messages and its end. */
export interface WorkerEvents {
  message(w: PoolWorker, msg: Record<string, unknown>): void;
  exit(w: PoolWorker, err?: Error): void;
}

/** Starts a worker thread; `ready` turns true on its 'ready' message (through events.message). */
export function startWorker(settings: WorkerSettings, events: WorkerEvents): PoolWorker {
  const { port1, port2 } = new MessageChannel();
  const results = new MessageChannel();
  const flagBuffer = new SharedArrayBuffer(4);
  const claimBuffer = new SharedArrayBuffer(4 * CLAIM_CELLS);
  const runningBuffer = new SharedArrayBuffer(8);
  const worker = new Worker(path.join(__dirname, 'worker', 'worker.js'), {
    workerData: {
      engine: settings.engine,
      memoryLimitMb: settings.memoryLimitMb,
      adapterSource: adapterSource(),
      flag: flagBuffer,
      claims: claimBuffer,
      running: runningBuffer,
      replies: port2,
      results: results.port2,
      // compiled once, on this thread (see quickjs-wasm.ts)
      wasmModule: settings.engine === 'quickjs' ? quickjsWasmModule() : undefined,
    },
    transferList: [port2, results.port2],
    resourceLimits: {
      maxOldGenerationSizeMb: Math.max(64, settings.memoryLimitMb * 2),
      maxYoungGenerationSizeMb: 16,
      stackSizeMb: 4,
    },
  });
  worker.unref();
  const w: PoolWorker = {
    worker,
    flag: new Int32Array(flagBuffer),
    claims: new Int32Array(claimBuffer),
    replies: port1,
    results: results.port1,
    ready: false,
    task: null,
    ahead: [],
    running: new Float64Array(runningBuffer),
    slow: false,
    blocked: 0,
    known: new Set(),
    templates: new TemplateTable(),
    retired: false,
  };
  worker.on('message', (msg) => events.message(w, typeof msg === 'string' ? JSON.parse(msg) : msg));
  // One event for every message waiting: the rest are taken synchronously (no event each).
  results.port1.on('message', (first) => {
    let msg: unknown = first;
    while (msg !== undefined) {
      events.message(w, typeof msg === 'string' ? JSON.parse(msg) : (msg as Record<string, unknown>));
      msg = receiveMessageOnPort(results.port1)?.message;
    }
  });
  results.port1.unref();
  worker.on('error', (err) => events.exit(w, err));
  worker.on('exit', () => events.exit(w));
  return w;
}

/** Messages the worker sent before it ended: results count, host calls it can no longer wait for do not. */
export function drainResults(w: PoolWorker, onMessage: (msg: Record<string, unknown>) => void): void {
  for (let m = receiveMessageOnPort(w.results); m !== undefined; m = receiveMessageOnPort(w.results)) {
    const msg = (typeof m.message === 'string' ? JSON.parse(m.message) : m.message) as Record<string, unknown>;
    if (msg.type === 'result' || msg.noReply) onMessage(msg);
  }
  w.results.close();
  w.replies.close();
}
