/**
 * The built-in ScriptEngine: a pool of worker threads, each running one job at a time with the
 * QuickJS or vm2 driver. The pool
 * - keeps `size` workers and grows (up to `maxWorkers`) while workers are blocked in host calls,
 *   so scripts waiting on an upstream never stall the others;
 * - enforces each job's deadline by terminating its worker (the engine's own limits fire first);
 * - replaces dead or poisoned workers; only the offending job fails, queued jobs go elsewhere;
 * - keeps the workers' pipes full and wakes as few threads as it can: a worker computing a job
 *   may hold more, sent ahead so it starts them without a wake-up round trip, as long as the
 *   jobs ahead of it add up to about AHEAD_BUDGET_MS of work (from the recent average job
 *   time); a sleeping worker is woken only when the computing ones have no room. Waking a thread
 *   costs both threads CPU, which on a small machine is what the HTTP server is short of.
 *   A job sent ahead is only lent: each job has a claim cell in shared memory which the worker
 *   sets (id -> -id) when it starts the job and the pool sets (id -> 0) to take it back — when the
 *   worker blocks in a host call, dies, or its current job runs longer than SLOW_MS. Exactly
 *   one of them wins, so a job never runs twice and never waits long behind another.
 */
import { ERRORS, type ErrorName } from '../errors';
import type { EngineStats, HostBridge, JobResult, ScriptEngine, ScriptJob } from './engine';
import { AppLimiter } from './app-limiter';
import { MAX_TIMER_MS } from '../timers';
import { applyStateDelta, type StateDelta } from './protocol';
import { encodeJob } from './job-message';
import { resolvePoolOptions, type PoolOptions, type ResolvedPoolOptions } from './pool-options';
import { CLAIM_CELLS, MAX_JOB_ID, clock, drainResults, runningFor, startWorker, takeBack, type PoolWorker, type Task } from './pool-worker';

export type { PoolOptions } from './pool-options';


/**
 * Work (ms, at the recent average job time) a computing worker may hold ahead before another is
 * woken. The pool sees results, and hands out the calls that wait in line, once per turn of the
 * main thread's event loop (about 2 ms on a busy server, more at its slowest), so a call the
 * workers could not take waits a whole turn: the budget covers a turn with room to spare. (At
 * 1 ms and at most 8 jobs ahead, a turn under wrk left a third of its calls in line, and they
 * made the p99 latency; at 2 ms, hooked calls still spilled over to a second worker in about one
 * turn in ten, and waking it cost about 5% of req/s on 2 cores.)
 */
const AHEAD_BUDGET_MS = 4;
/** Most jobs sent ahead to one worker (about a turn of trivial calls). */
const MAX_AHEAD = 32;
/** One job's time counts at most this many times the recent average (see avgJobMs). */
const JOB_SAMPLE_CAP = 3;
/** A job running this long makes its worker slow: its jobs ahead go back in line for the others. */
const SLOW_MS = 10;

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
  /**
   * Recent average time (ms) a job runs on its worker, by the worker's own clock. (Not the time
   * the pool waited for the result: that includes the main thread's turn, and made the pool
   * spread each turn's calls over more workers than the work needed.) One job counts at most
   * JOB_SAMPLE_CAP times the average: a job whose thread lost its core for a while must not make
   * every job look slow, while a real change still shows within a few dozen jobs.
   */
  private avgJobMs = 0.5;
  /** Checks, while jobs are held ahead, for workers whose current job runs long. */
  private watch: NodeJS.Timeout | undefined;
  private dispatchScheduled = false;
  /** Job messages of the current dispatch pass, per worker. */
  private outbox: Map<PoolWorker, string[]> | undefined;

  private readonly options: ResolvedPoolOptions;

  constructor(options?: PoolOptions) {
    this.options = resolvePoolOptions(options);
    this.name = this.options.engine;
    this.apps = new AppLimiter(this.options.maxConcurrentPerApp);
  }

  /** Workers now running, for diagnostics and tests. */
  get workerCount(): number {
    return this.workers.length;
  }

  /** Workers running, those running a job, and jobs waiting in line (the router's metrics read it). */
  stats(): EngineStats {
    let workers = 0;
    let busy = 0;
    for (const w of this.workers) {
      if (w.retired) continue;
      workers++;
      if (w.task) busy++;
    }
    return { workers, busy, queued: this.queue.length };
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
        const jobId = this.nextJobId;
        this.nextJobId = jobId >= MAX_JOB_ID ? 1 : jobId + 1;
        const task: Task = { jobId, job, host, resolve, resent: false, done: false };
        task.timer = setTimeout(() => this.expire(task), Math.min(MAX_TIMER_MS, Math.max(0, job.deadline - Date.now()) + this.options.graceMs));
        this.queue.push(task);
        this.dispatchSoon();
      });
    } finally {
      this.apps.release(job.appId);
    }
  }

  async close(): Promise<void> {
    this.closed = true;
    clearInterval(this.watch);
    const retiring = this.workers.splice(0).map((w) => this.retire(w)); // (jobs sent ahead come back in line)
    for (const t of this.queue.splice(0)) this.finish(t, errorResult(t.job, 'ENGINE_FAILURE', 'The script engine is closed'));
    await Promise.all(retiring);
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
    const ahead = this.workers.find((x) => x.ahead.includes(task));
    if (ahead && this.revoke(ahead, task)) {
      this.finish(task, errorResult(task.job, 'SCRIPT_TIMEOUT'));
      return;
    }
    const w = this.workers.find((x) => x.task === task || x.ahead.includes(task));
    this.finish(task, errorResult(task.job, 'SCRIPT_TIMEOUT'));
    if (w) {
      this.options.logger?.warn(`scriptable-api: terminating a worker: app '${task.job.appId}' ran past its deadline`);
      void this.retire(w);
      this.dispatch();
    }
  }

  /**
   * New calls are handed out once per event-loop turn, after the I/O callbacks of the turn: the
   * calls that arrived together go in one burst, so a sleeping worker is woken (and the main
   * thread loses its core to it) once per turn instead of in the middle of the turn's requests.
   */
  private dispatchSoon(): void {
    if (this.dispatchScheduled) return;
    this.dispatchScheduled = true;
    setImmediate(() => {
      this.dispatchScheduled = false;
      this.dispatch();
    });
  }

  private dispatch(): void {
    if (this.closed) return;
    // the jobs handed out in this pass go to each worker in one message (NUL-separated)
    const outer = this.outbox === undefined;
    if (outer) this.outbox = new Map();
    try {
      this.handOut();
    } finally {
      if (outer) {
        const outbox = this.outbox!;
        this.outbox = undefined;
        for (const [w, texts] of outbox) if (!w.retired) w.worker.postMessage(texts.length === 1 ? texts[0] : texts.join('\u0000'));
      }
    }
    this.grow();
    if (this.queue.length > 0) this.watchSlow();
  }

  private handOut(): void {
    while (this.queue.length > 0) {
      const task = this.queue[0];
      // a call whose deadline passed while it waited in line never starts
      if (task.job.deadline <= Date.now()) {
        this.queue.shift();
        this.finish(task, errorResult(task.job, 'SCRIPT_TIMEOUT'));
        continue;
      }
      const idle = this.workers.find((x) => x.ready && !x.task && !x.retired);
      // Room ahead of a computing worker (no thread to wake): up to AHEAD_BUDGET_MS of work, and
      // one job in any case when no worker is idle, so a worker never waits for the main thread.
      let room = Math.min(MAX_AHEAD, Math.floor(AHEAD_BUDGET_MS / this.avgJobMs));
      if (!idle) room = Math.max(1, room);
      // first fit: the workers first in the list take the work while they keep up, so the others
      // sleep (and the ones grown for a burst go idle and stop)
      const target = this.workers.find((x) => x.ready && x.task && !x.retired && x.blocked === 0 && !x.slow && x.ahead.length < room);
      if (target) this.assign(target, task, false, true);
      else if (idle) this.assign(idle, task);
      else break;
      this.queue.shift();
    }
  }

  /** Takes back `task` (default: every job) sent ahead to `w`, if not started; true when all were taken back. */
  private revoke(w: PoolWorker, task?: Task): boolean {
    let all = true;
    for (const t of task ? [task] : [...w.ahead]) {
      if (!takeBack(w.claims, t.jobId)) {
        all = false;
        continue;
      }
      w.ahead.splice(w.ahead.indexOf(t), 1);
    }
    return all;
  }

  /** Takes back the jobs sent ahead to `w` and puts them first in line, in order, for workers that can start them now. */
  private reclaim(w: PoolWorker): void {
    const held = [...w.ahead];
    this.revoke(w);
    const back = held.filter((t) => !w.ahead.includes(t));
    if (back.length > 0) this.queue.unshift(...back);
  }

  /**
   * While jobs are held ahead or wait in line: a worker whose current job runs past SLOW_MS is
   * slow — it gives back the jobs held ahead of it and, while jobs wait, another worker may be
   * started to stand in for it (see grow).
   */
  private watchSlow(): void {
    if (this.watch || this.closed) return;
    this.watch = setInterval(() => {
      const now = clock();
      let moved = false;
      for (const w of this.workers) {
        if (w.retired || !w.task || w.slow || runningFor(w, now) < SLOW_MS) continue;
        w.slow = true;
        this.reclaim(w);
        moved = true;
      }
      if (moved) this.dispatch();
      if (this.queue.length === 0 && !this.workers.some((w) => w.ahead.length > 0)) {
        clearInterval(this.watch);
        this.watch = undefined;
      }
    }, SLOW_MS / 2);
    this.watch.unref();
  }


  /** Start workers while fewer than `size` are able to compute (idle, starting or not blocked). */
  private grow(): void {
    const live = this.workers.filter((w) => !w.retired);
    let starting = 0;
    let computing = 0;
    let blocked = 0;
    for (const w of live) {
      if (!w.ready) starting++;
      else if (!w.task || (w.blocked === 0 && !w.slow)) computing++;
      else if (w.blocked > 0) blocked++;
    }
    if (live.length < this.options.size && (this.queue.length > 0 || live.length === 0)) {
      for (let i = live.length; i < this.options.size; i++) this.spawn();
      return;
    }
    if (this.queue.length === 0 || computing + starting >= this.options.size) return;
    // A worker blocked in a host call is not computing: each one may be stood in for (up to
    // maxWorkers). A worker running a long job is: stand in for it only up to computeWorkers.
    const cpus = this.options.computeWorkers;
    const cap = Math.min(this.options.maxWorkers, Math.max(this.options.size, cpus) + blocked);
    const want = Math.min(this.queue.length - starting, cap - live.length);
    for (let i = 0; i < want; i++) this.spawn();
  }


  private assign(w: PoolWorker, task: Task, withAllSources = false, ahead = false): void {
    clearTimeout(w.idleTimer);
    if (ahead) {
      w.ahead.push(task);
      this.watchSlow();
    } else {
      w.task = task;
      w.slow = false;
    }
    Atomics.store(w.claims, task.jobId % CLAIM_CELLS, task.jobId);
    // (a job resent for its sources carries them all, wherever it goes next)
    const all = withAllSources || task.resent;
    const text = encodeJob(task.jobId, task.jobId % CLAIM_CELLS, task.job, w.templates, (hash) => {
      const send = all || !w.known.has(hash);
      if (w.known.size > 4000) w.known.clear();
      w.known.add(hash);
      return send;
    });
    if (this.outbox) {
      const list = this.outbox.get(w);
      if (list) list.push(text);
      else this.outbox.set(w, [text]);
    } else w.worker.postMessage(text);
  }

  private spawn(): void {
    const w = startWorker(
      { engine: this.options.engine, memoryLimitMb: this.options.memoryLimitMb },
      { message: (x, msg) => this.onMessage(x, msg), exit: (x, err) => this.onExit(x, err) },
    );
    this.workers.push(w);
  }

  private onMessage(w: PoolWorker, msg: Record<string, unknown>): void {
    switch (msg.type) {
      case 'ready':
        w.ready = true;
        this.startFailures = 0;
        this.dispatch();
        this.stealFor(w);
        this.idle(w);
        return;
      case 'host':
        this.onHostCall(w, msg);
        return;
      case 'result': {
        let task: Task | null;
        if (w.task && w.task.jobId === msg.jobId) {
          task = w.task;
          // (a job sent back for its sources did not run: it has no time)
          if (typeof msg.ms === 'number') this.avgJobMs += (Math.min(Math.max(0.005, msg.ms), this.avgJobMs * JOB_SAMPLE_CAP) - this.avgJobMs) * 0.1;
          w.task = w.ahead.shift() ?? null; // the first job sent ahead, if any, runs now
          w.slow = false;
        } else {
          const i = w.ahead.findIndex((t) => t.jobId === msg.jobId);
          if (i < 0) return;
          task = w.ahead[i]; // (not expected: jobs end in the order they were sent)
          w.ahead.splice(i, 1);
        }
        if (msg.needSources && !task.resent) {
          task.resent = true;
          if (w.task) this.assign(w, task, true, true);
          else this.assign(w, task, true);
          return;
        }
        if (msg.result) {
          const r = msg.result as StateDelta & Pick<JobResult, 'outcome'>;
          this.finish(task, { outcome: r.outcome, state: applyStateDelta(task.job.state, r), ...(typeof msg.ms === 'number' ? { runMs: msg.ms } : {}) });
        }
        else this.finish(task, errorResult(task.job, 'ENGINE_FAILURE', String(msg.failure ?? 'The script engine failed')));
        if (msg.poisoned) {
          // the worker starts nothing more (it does not claim jobs once poisoned): what it holds goes back in line
          this.reclaim(w);
          if (w.task && takeBack(w.claims, w.task.jobId)) {
            this.queue.unshift(w.task);
            w.task = null;
          }
          void this.retire(w);
        }
        this.dispatch();
        if (!w.task) this.stealFor(w);
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
    const task = w.task && w.task.jobId === msg.jobId ? w.task : (w.ahead.find((t) => t.jobId === msg.jobId) ?? w.task);
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
    this.reclaim(w); // the jobs sent ahead must not wait for this call
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
    }, this.options.idleTimeoutMs);
    w.idleTimer.unref();
  }

  private onExit(w: PoolWorker, err?: Error): void {
    if (!w.retired) {
      w.retired = true;
      const i = this.workers.indexOf(w);
      if (i >= 0) this.workers.splice(i, 1);
    }
    // results the worker sent before it ended still count (they travel on their own port)
    drainResults(w, (msg) => this.onMessage(w, msg));
    if (w.ahead.length > 0) {
      const held = [...w.ahead];
      this.reclaim(w); // never started: back in line, first
      const started = held.filter((t) => w.ahead.includes(t));
      if (started.length > 0) {
        // it had started one, so the jobs before it had ended (their results lost with the worker)
        if (w.task && !w.task.done) this.finish(w.task, errorResult(w.task.job, 'ENGINE_FAILURE', 'The script engine failed'));
        for (const t of started.slice(0, -1)) if (!t.done) this.finish(t, errorResult(t.job, 'ENGINE_FAILURE', 'The script engine failed'));
        w.task = started[started.length - 1];
        w.ahead = [];
      }
    }
    const task = w.task;
    w.task = null;
    if (task && !task.done) {
      const oom = (err as { code?: string } | undefined)?.code === 'ERR_WORKER_OUT_OF_MEMORY';
      this.finish(task, errorResult(task.job, oom ? 'SCRIPT_OUT_OF_MEMORY' : 'ENGINE_FAILURE', oom ? undefined : `The script engine failed${err ? `: ${err.message}` : ''}`));
    }
    this.replenish();
    this.dispatch();
  }

  /** Keeps `size` workers warm after one died or was replaced, so the next burst pays no start-up. */
  private replenish(): void {
    if (this.closed || this.startFailures > 0) return;
    const live = this.workers.filter((x) => !x.retired).length;
    for (let i = live; i < this.options.size; i++) this.spawn();
  }

  /**
   * `w` has nothing to run and nothing is in line: take over the last job sent ahead to a worker
   * whose current job has been running a while (a worker keeping up with short jobs keeps them).
   */
  private stealFor(w: PoolWorker): void {
    if (w.task || w.retired || !w.ready || this.queue.length > 0) return;
    const now = clock();
    const from = this.workers.find((x) => x !== w && x.ahead.length > 0 && !x.retired && runningFor(x, now) >= Math.min(SLOW_MS, Math.max(0.5, this.avgJobMs * 2)));
    if (!from) return;
    const task = from.ahead[from.ahead.length - 1];
    if (this.revoke(from, task)) this.assign(w, task);
  }

  private async retire(w: PoolWorker): Promise<void> {
    if (w.retired) return;
    this.reclaim(w);
    w.retired = true;
    clearTimeout(w.idleTimer);
    const i = this.workers.indexOf(w);
    if (i >= 0) this.workers.splice(i, 1);
    w.replies.close();
    this.replenish();
    await w.worker.terminate().catch(() => undefined);
  }
}
