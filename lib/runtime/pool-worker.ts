/**
 * One worker of the pool as the pool sees it: the thread, its ports, the shared memory it writes
 * (lib/runtime/messages.ts, WorkerShared) and the jobs it holds.
 */
import { Worker, MessageChannel, receiveMessageOnPort, type MessagePort } from 'node:worker_threads';
import * as path from 'node:path';
import type { HostBridge, JobResult, ScriptJob } from './engine';
import { adapterSource } from './adapter-source';
import { quickjsWasmModule } from './quickjs-wasm';
import { AUTOMATION_HELD_MB } from '../automation/held';
import { Outbox, SHARED_FLAG, SHARED_SLICE_JOB, SHARED_STARTED, clock, crossing, decode, HeldSources, vm2ContextBudgetMb, type FromWorker, type ToWorker, type JobMessage, type ReplyMessage, type WorkerConfig } from './messages';

/** A call in the pool: in line, or sent to a worker. */
export interface Task {
  id: number;
  appId: string;
  job: ScriptJob;
  host: HostBridge;
  resolve(result: JobResult): void;
  /** Its QUEUE_TIMEOUT while in line, counted from `queuedAt` (clock() ms: when it first came). */
  queueTimer?: NodeJS.Timeout;
  queuedAt?: number;
  /** Set once sent: the worker and the task's place in the order of jobs sent to it. */
  worker?: PoolWorker;
  seq?: number;
  /** Its blocking host calls in flight. */
  blockedCalls: number;
  done: boolean;
}

/** What the pool chooses of a worker's config (the rest is made here). */
type WorkerSettings = Pick<WorkerConfig, 'engine' | 'memoryLimitMb' | 'contextBudgetMb' | 'slowMs'>;

export class PoolWorker {
  readonly worker: Worker;
  private readonly results: MessagePort;
  private readonly replies: MessagePort;
  private readonly clock: Float64Array;
  private readonly ints: Int32Array;
  ready = false;
  /** Takes no new jobs (poisoned, idle, or the pool is closing); ends once its jobs have. */
  retiring = false;
  /** Serves only the apps whose calls ended their worker lately (see WorkerPool, APART_MS). */
  apart = false;
  dead = false;
  /** Jobs sent and not finished, by id. */
  readonly tasks = new Map<number, Task>();
  /** Blocking host calls in flight: the thread waits for them. */
  blocked = 0;
  idleTimer?: NodeJS.Timeout;
  /** The last call of a heavy app sent to it (see WorkerPool.behindHeavy): its `seq` and app; and the `seq` of the last other call. */
  heavySeq = 0;
  heavyApp?: string;
  lightSeq = 0;
  private nextSeq = 1;
  /** The `seq` of the last job the worker sent back: the jobs sent up to it have all started or come back. */
  private sentBackSeq = 0;
  private referenced = false;
  private readonly outbox: Outbox<ToWorker>;
  /** The hashes of the sources the worker holds. */
  private readonly sources = new HeldSources<true>();

  constructor(settings: WorkerSettings, onMessage: (w: PoolWorker, msg: FromWorker) => void, onExit: (w: PoolWorker, err?: Error) => void) {
    const results = new MessageChannel();
    const replies = new MessageChannel();
    const shared = { clock: new SharedArrayBuffer(32), ints: new SharedArrayBuffer(12) };
    const config: WorkerConfig = {
      ...settings,
      adapterSource: adapterSource(),
      shared,
      results: results.port2,
      replies: replies.port2,
      // compiled once, on this thread (see quickjs-wasm.ts)
      wasmModule: settings.engine === 'quickjs' ? quickjsWasmModule() : undefined,
    };
    this.worker = new Worker(path.join(__dirname, 'worker', 'worker.js'), {
      workerData: config,
      transferList: [results.port2, replies.port2],
      resourceLimits: {
        // (a vm2 worker's heap also holds the contexts it keeps; a QuickJS worker's, the values of
        // the automations it runs: twice their budget, for two-byte strings and the objects around them)
        maxOldGenerationSizeMb:
          Math.max(64, settings.memoryLimitMb * 2) + (settings.engine === 'vm2' ? Math.ceil(vm2ContextBudgetMb(settings.contextBudgetMb)) : 2 * AUTOMATION_HELD_MB),
        maxYoungGenerationSizeMb: 16,
        // (QuickJS's C code runs on this thread's stack too, where its own 512 KiB limit does not
        // look: deep C recursion, JSON.stringify of 15,000 levels, overflowed 4 MiB before it)
        stackSizeMb: settings.engine === 'quickjs' ? 16 : 4,
      },
    });
    this.worker.unref();
    this.results = results.port1;
    this.replies = replies.port1;
    this.clock = new Float64Array(shared.clock);
    this.ints = new Int32Array(shared.ints);
    this.outbox = new Outbox<ToWorker>((data) => this.worker.postMessage(data));
    this.results.on('message', (data: unknown) => {
      for (const msg of decode<FromWorker>(data)) onMessage(this, msg);
    });
    this.results.unref();
    this.worker.on('error', (err) => onExit(this, err));
    this.worker.on('exit', () => onExit(this));
  }

  send(task: Task): void {
    task.worker = this;
    task.seq = this.nextSeq++;
    this.tasks.set(task.id, task);
    const scripts: JobMessage['job']['scripts'] = Object.create(null); // (any name is just a key)
    for (const [name, s] of Object.entries(task.job.scripts)) {
      if (this.sources.has(s.hash)) scripts[name] = { name: s.name, hash: s.hash };
      else {
        scripts[name] = s;
        this.sources.add(s.hash, s.source.length, true);
      }
    }
    const msg: JobMessage = { type: 'job', id: task.id, seq: task.seq, job: { ...task.job, scripts } };
    this.outbox.post(msg);
  }

  /** Sends what is held now (the pool hands out a turn's jobs together, then sends them at once). */
  flush(): void {
    if (!this.dead) this.outbox.flush();
  }

  reply(msg: ReplyMessage, blocking: boolean): void {
    if (this.dead) return;
    if (!blocking) {
      this.outbox.post(msg);
      return;
    }
    this.replies.postMessage(crossing(msg));
    Atomics.store(this.ints, SHARED_FLAG, 1);
    Atomics.notify(this.ints, SHARED_FLAG);
  }

  /**
   * How long since the worker's shared clock `i` was set (ms), 0 when it is not: also 0, not
   * negative, when the worker set it after `now` was read (the pool reads `now` once per pass).
   */
  private age(i: number, now: number): number {
    const since = this.clock[i];
    return since > 0 ? Math.max(0, now - since) : 0;
  }

  /** How long the current slice of one job's script work has run (ms); 0 between slices. */
  sliceMs(now = clock()): number {
    return this.age(0, now);
  }

  /** Whether a slice of script work runs now (sliceMs is 0 for one begun after `now`). */
  inSlice(): boolean {
    return this.clock[0] > 0;
  }

  /** How long the current slice has gone without an interrupt check (QuickJS: inside one built-in call), ms; 0 between slices. */
  uncheckedMs(now = clock()): number {
    const since = this.clock[0];
    return since > 0 ? Math.max(0, now - Math.max(since, this.clock[3])) : 0;
  }

  /** How long the thread has been busy since it last turned its event loop (ms); 0 when idle. */
  turnMs(now = clock()): number {
    return this.age(1, now);
  }

  /** Whether the thread is busy in a turn of its event loop (turnMs is 0 for one begun after `now`). */
  inTurn(): boolean {
    return this.clock[1] > 0;
  }

  /** How long promise jobs an entry left (vm2) may have run without the event loop turning (ms); 0 when it has turned. */
  laterJobsMs(now = clock()): number {
    return this.age(2, now);
  }

  /** The job of the current (or last) slice. */
  sliceJob(): number {
    return Math.abs(Atomics.load(this.ints, SHARED_SLICE_JOB));
  }

  /** Whether the current slice prepares a script version (parse, rewrite): not script time. */
  preparing(): boolean {
    return Atomics.load(this.ints, SHARED_SLICE_JOB) < 0;
  }

  /** The `seq` of the last job the worker started: jobs sent after it never started. */
  started(): number {
    return Atomics.load(this.ints, SHARED_STARTED);
  }

  /** The worker sent `task` back without starting it (call before the pool takes it back). */
  sentBack(task: Task): void {
    this.sentBackSeq = Math.max(this.sentBackSeq, task.seq ?? 0);
  }

  /** Whether the job sent as `seq` may still wait to start (sent after the last one the worker started or sent back). */
  waitsToStart(seq: number): boolean {
    return seq > Math.max(this.started(), this.sentBackSeq);
  }

  /** Jobs sent that the worker has neither started nor sent back yet. */
  unstarted(): boolean {
    return this.waitsToStart(this.nextSeq - 1);
  }

  /** How many of the jobs sent have been neither started nor sent back: the worker's backlog. */
  backlog(): number {
    return Math.max(0, this.nextSeq - 1 - Math.max(this.started(), this.sentBackSeq));
  }

  /** Holds the event loop while the pool has work in flight or in line (see WorkerPool.updateRefs). */
  hold(on: boolean): void {
    if (on === this.referenced || this.dead) return;
    this.referenced = on;
    if (on) this.worker.ref();
    else this.worker.unref();
  }

  /** Messages the worker posted before it ended. */
  leftovers(): FromWorker[] {
    const out: FromWorker[] = [];
    for (let m = receiveMessageOnPort(this.results); m; m = receiveMessageOnPort(this.results)) out.push(...decode<FromWorker>(m.message));
    return out;
  }

  close(): void {
    this.outbox.clear();
    this.results.close();
    this.replies.close();
  }
}
