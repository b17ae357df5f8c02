/**
 * The built-in ScriptEngine: a pool of worker threads, each running one job at a time with the
 * QuickJS or vm2 driver. The pool
 * - keeps `size` workers and grows (up to `maxWorkers`) while workers are blocked in host calls,
 *   so scripts waiting on an upstream never stall the others;
 * - enforces each job's deadline by terminating its worker (the engine's own limits fire first);
 * - replaces dead or poisoned workers; only the offending job fails, queued jobs go elsewhere.
 */
import { Worker, MessageChannel, type MessagePort } from 'node:worker_threads';
import * as path from 'node:path';
import { ERRORS, type ErrorName } from '../errors';
import type { Logger } from '../types';
import type { HostBridge, JobResult, ScriptEngine, ScriptJob } from './engine';
import { AppLimiter } from './app-limiter';
import { adapterSource } from './adapter-source';

export interface PoolOptions {
  engine: 'quickjs' | 'vm2';
  /** Workers kept running. */
  size: number;
  /** Most workers, counting those grown for blocked host calls. */
  maxWorkers: number;
  memoryLimitMb: number;
  maxConcurrentPerApp: number;
  /** How long a grown worker may stay idle before it stops. Default 30000. */
  idleTimeoutMs?: number;
  /** Time the engine gets past a deadline to stop a script itself before its worker is terminated. */
  graceMs?: number;
  logger?: Logger;
}

interface Task {
  jobId: number;
  job: ScriptJob;
  host: HostBridge;
  resolve: (r: JobResult) => void;
  timer?: NodeJS.Timeout;
  resent: boolean;
  done: boolean;
}

interface PoolWorker {
  worker: Worker;
  flag: Int32Array;
  replies: MessagePort;
  ready: boolean;
  task: Task | null;
  /** Host calls in flight: while > 0 the worker's thread is blocked, not computing. */
  blocked: number;
  known: Set<string>;
  idleTimer?: NodeJS.Timeout;
  retired: boolean;
}

function errorResult(job: ScriptJob, name: ErrorName, message?: string): JobResult {
  const e = ERRORS[name];
  return { state: job.state, outcome: { kind: 'error', code: e.code, status: e.status, message: message ?? e.message } };
}

export class WorkerPool implements ScriptEngine {
  readonly name: string;
  private readonly workers: PoolWorker[] = [];
  private readonly queue: Task[] = [];
  private readonly apps: AppLimiter;
  private nextJobId = 1;
  private closed = false;
  private startFailures = 0;

  constructor(private readonly options: PoolOptions) {
    this.name = options.engine;
    this.apps = new AppLimiter(options.maxConcurrentPerApp);
  }

  /** Workers now running, for diagnostics and tests. */
  get workerCount(): number {
    return this.workers.length;
  }

  async run(job: ScriptJob, host: HostBridge): Promise<JobResult> {
    if (this.closed) return errorResult(job, 'ENGINE_FAILURE', 'The script engine is closed');
    const wait = this.apps.acquire(job.appId, job.deadline);
    if (wait) {
      try {
        await wait;
      } catch (e) {
        return errorResult(job, 'SCRIPT_TIMEOUT', (e as Error).message);
      }
    }
    try {
      return await new Promise<JobResult>((resolve) => {
        const task: Task = { jobId: this.nextJobId++, job, host, resolve, resent: false, done: false };
        task.timer = setTimeout(() => this.expire(task), Math.max(0, job.deadline - Date.now()) + (this.options.graceMs ?? 250));
        this.queue.push(task);
        this.dispatch();
      });
    } finally {
      this.apps.release(job.appId);
    }
  }

  async close(): Promise<void> {
    this.closed = true;
    for (const t of this.queue.splice(0)) this.finish(t, errorResult(t.job, 'ENGINE_FAILURE', 'The script engine is closed'));
    await Promise.all(this.workers.splice(0).map((w) => this.retire(w)));
  }

  private finish(task: Task, result: JobResult): void {
    if (task.done) return;
    task.done = true;
    clearTimeout(task.timer);
    task.resolve(result);
  }

  /** The deadline passed (plus grace): fail the job; a worker still running it is terminated. */
  private expire(task: Task): void {
    if (task.done) return;
    const qi = this.queue.indexOf(task);
    if (qi >= 0) this.queue.splice(qi, 1);
    const w = this.workers.find((x) => x.task === task);
    this.finish(task, errorResult(task.job, 'SCRIPT_TIMEOUT'));
    if (w) {
      this.options.logger?.warn(`scriptable-api: terminating a worker: app '${task.job.appId}' ran past its deadline`);
      void this.retire(w);
      this.dispatch();
    }
  }

  private dispatch(): void {
    if (this.closed) return;
    while (this.queue.length > 0) {
      const w = this.workers.find((x) => x.ready && !x.task && !x.retired);
      if (!w) break;
      const task = this.queue.shift()!;
      // a call whose deadline passed while it waited in line never starts
      if (task.job.deadline <= Date.now()) this.finish(task, errorResult(task.job, 'SCRIPT_TIMEOUT'));
      else this.assign(w, task);
    }
    this.grow();
  }

  /** Start workers while fewer than `size` are able to compute (idle, starting or not blocked). */
  private grow(): void {
    const live = this.workers.filter((w) => !w.retired);
    let starting = 0;
    let computing = 0;
    for (const w of live) {
      if (!w.ready) starting++;
      else if (!w.task || w.blocked === 0) computing++;
    }
    if (live.length < this.options.size && (this.queue.length > 0 || live.length === 0)) {
      for (let i = live.length; i < this.options.size; i++) this.spawn();
      return;
    }
    if (this.queue.length === 0 || computing + starting >= this.options.size) return;
    const want = Math.min(this.queue.length - starting, this.options.maxWorkers - live.length);
    for (let i = 0; i < want; i++) this.spawn();
  }

  private assign(w: PoolWorker, task: Task, withAllSources = false): void {
    clearTimeout(w.idleTimer);
    w.task = task;
    const scripts: ScriptJob['scripts'] = {};
    for (const [name, s] of Object.entries(task.job.scripts)) {
      scripts[name] = !withAllSources && w.known.has(s.hash) ? { name: s.name, hash: s.hash } : s;
      if (w.known.size > 4000) w.known.clear();
      w.known.add(s.hash);
    }
    // Jobs and results cross as JSON text: one string copy is much cheaper than a structured clone.
    w.worker.postMessage(JSON.stringify({ type: 'job', jobId: task.jobId, job: { ...task.job, scripts } }));
  }

  private spawn(): void {
    const { port1, port2 } = new MessageChannel();
    const flagBuffer = new SharedArrayBuffer(4);
    const worker = new Worker(path.join(__dirname, 'worker', 'worker.js'), {
      workerData: {
        engine: this.options.engine,
        memoryLimitMb: this.options.memoryLimitMb,
        adapterSource: adapterSource(),
        flag: flagBuffer,
        replies: port2,
      },
      transferList: [port2],
      resourceLimits: {
        maxOldGenerationSizeMb: Math.max(64, this.options.memoryLimitMb * 2),
        maxYoungGenerationSizeMb: 16,
        stackSizeMb: 4,
      },
    });
    worker.unref();
    const w: PoolWorker = { worker, flag: new Int32Array(flagBuffer), replies: port1, ready: false, task: null, blocked: 0, known: new Set(), retired: false };
    this.workers.push(w);
    worker.on('message', (msg) => this.onMessage(w, typeof msg === 'string' ? JSON.parse(msg) : msg));
    worker.on('error', (err) => this.onExit(w, err));
    worker.on('exit', () => this.onExit(w));
  }

  private onMessage(w: PoolWorker, msg: Record<string, unknown>): void {
    switch (msg.type) {
      case 'ready':
        w.ready = true;
        this.startFailures = 0;
        this.dispatch();
        this.idle(w);
        return;
      case 'host':
        this.onHostCall(w, msg);
        return;
      case 'result': {
        const task = w.task;
        if (!task || task.jobId !== msg.jobId) return;
        w.task = null;
        if (msg.needSources && !task.resent) {
          task.resent = true;
          this.assign(w, task, true);
          return;
        }
        if (msg.result) this.finish(task, msg.result as JobResult);
        else this.finish(task, errorResult(task.job, 'ENGINE_FAILURE', String(msg.failure ?? 'The script engine failed')));
        if (msg.poisoned) void this.retire(w);
        this.dispatch();
        this.idle(w);
        return;
      }
      case 'fatal':
        this.options.logger?.error(`scriptable-api: a script worker failed to start: ${String(msg.message)}`);
        this.startFailures++;
        void this.retire(w);
        if (this.startFailures >= 3) {
          for (const t of this.queue.splice(0)) this.finish(t, errorResult(t.job, 'ENGINE_FAILURE', `The script engine cannot start: ${String(msg.message)}`));
        } else this.dispatch();
        return;
    }
  }

  private onHostCall(w: PoolWorker, msg: Record<string, unknown>): void {
    const task = w.task;
    const op = String(msg.op);
    const args = (msg.args ?? {}) as Record<string, unknown>;
    if (msg.noReply) {
      if (task) task.host.call(op, args).catch(() => undefined);
      return;
    }
    const reply = (payload: Record<string, unknown>) => {
      w.blocked--;
      if (w.retired) return;
      w.replies.postMessage({ seq: msg.seq, ...payload });
      Atomics.store(w.flag, 0, 1);
      Atomics.notify(w.flag, 0);
    };
    w.blocked++;
    this.dispatch(); // this worker is now waiting: let another one compute
    if (!task || task.jobId !== msg.jobId) {
      reply({ ok: false, error: { name: 'Error', message: 'The call is over' } });
      return;
    }
    task.host.call(op, args).then(
      (value) => reply({ ok: true, value: value === undefined ? null : value }),
      (e: unknown) => {
        const err = e as { name?: string; message?: string; code?: unknown; status?: unknown };
        const num = (v: unknown) => (typeof v === 'number' ? v : undefined);
        reply({ ok: false, error: { name: err?.name ?? 'Error', message: err?.message ?? String(e), code: num(err?.code), status: num(err?.status) } });
      },
    );
  }

  /** A grown worker that stays idle past idleTimeoutMs stops. */
  private idle(w: PoolWorker): void {
    if (w.task || w.retired) return;
    const live = this.workers.filter((x) => !x.retired).length;
    if (live <= this.options.size) return;
    clearTimeout(w.idleTimer);
    w.idleTimer = setTimeout(() => {
      if (!w.task && this.workers.filter((x) => !x.retired).length > this.options.size) void this.retire(w);
    }, this.options.idleTimeoutMs ?? 30_000);
    w.idleTimer.unref();
  }

  private onExit(w: PoolWorker, err?: Error): void {
    const task = w.task;
    w.task = null;
    if (task && !task.done) {
      const oom = (err as { code?: string } | undefined)?.code === 'ERR_WORKER_OUT_OF_MEMORY';
      this.finish(task, errorResult(task.job, oom ? 'SCRIPT_OUT_OF_MEMORY' : 'ENGINE_FAILURE', oom ? undefined : `The script engine failed${err ? `: ${err.message}` : ''}`));
    }
    if (!w.retired) {
      w.retired = true;
      const i = this.workers.indexOf(w);
      if (i >= 0) this.workers.splice(i, 1);
      this.dispatch();
    }
    this.replenish();
  }

  /** Keeps `size` workers warm after one died or was replaced, so the next burst pays no start-up. */
  private replenish(): void {
    if (this.closed || this.startFailures > 0) return;
    const live = this.workers.filter((x) => !x.retired).length;
    for (let i = live; i < this.options.size; i++) this.spawn();
  }

  private async retire(w: PoolWorker): Promise<void> {
    if (w.retired) return;
    w.retired = true;
    clearTimeout(w.idleTimer);
    const i = this.workers.indexOf(w);
    if (i >= 0) this.workers.splice(i, 1);
    w.replies.close();
    this.replenish();
    await w.worker.terminate().catch(() => undefined);
  }
}
