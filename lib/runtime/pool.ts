/**
 * The built-in ScriptEngine: a pool of worker threads, each running many jobs at once with the
 * QuickJS or vm2 driver (a job waiting on the host holds no thread).
 *
 * - Calls wait in a line that is fair across apps (round-robin, lib/runtime/fair-queue.ts), for
 *   at most `queueTimeoutMs` (then QUEUE_TIMEOUT), counted while a worker is ready: time spent
 *   waiting for the first worker to start (or for every worker to be replaced) does not count.
 *   A job's `timeoutMs` starts when a worker starts it.
 * - A job goes to the least loaded worker that can start it now: not in a long slice of script
 *   work (past SLOW_MS) and not blocked in a blocking host call. An app's jobs keep going to the
 *   worker of its last job (which holds its contexts) while that one is not much busier, and,
 *   for an app with HOT_APP calls in flight, while it has no jobs waiting to start where another
 *   worker has none: a hot app spreads over the workers, an app called now and then stays.
 * - One app may hold at most `maxWorkersPerApp` workers with long slices (and half of
 *   `maxWorkers` with blocking calls); its other calls wait in line while other apps' calls go ahead.
 * - The pool starts `size` workers at once, replaces a worker as soon as it ends, and grows (up to
 *   `maxWorkers`) while every worker is held, so other apps keep being served; workers beyond
 *   `size` stop after `idleTimeoutMs` idle.
 * - A worker whose slice runs past its job's deadline plus `graceMs` (a script the engine could
 *   not stop) is terminated; the jobs it had not started go back in line, the others fail.
 * - An app whose call ran out of memory or had its worker terminated (either ends the worker, and
 *   the contexts of every app on it) has its calls served by a worker set apart for such apps for
 *   APART_MS, while the pool may start one: its next such calls end that worker, not the others'
 *   contexts.
 * - Workers hold the event loop only while jobs are in flight or in line.
 */
import { ERRORS, type ErrorName } from '../errors';
import type { EngineStats, HostBridge, JobResult, ScriptEngine, ScriptJob } from './engine';
import { FairQueue } from './fair-queue';
import { CALL_OVER, clock, hostErrorInfo, type FromWorker, type HostReply } from './messages';
import { resolvePoolOptions, type PoolOptions, type ResolvedPoolOptions } from './pool-options';
import { PoolWorker, type Task } from './pool-worker';
import { MAX_TIMER_MS } from '../timers';

export type { PoolOptions } from './pool-options';

/** A slice of script work running this long holds its worker (see the file comment). */
const SLOW_MS = 25;
/** How often the pool looks at its workers' slices while work is in flight. */
const WATCH_MS = 10;
/** Most jobs handed at once to a vm2 worker between two of its slices. */
const VM2_BATCH = 16;
/** Calls in flight a worker may have beyond the least loaded one and still get its apps' calls. */
const HOME_SLACK = 64;
/**
 * Calls in flight from which an app counts as hot: its calls may then go to a worker with nothing
 * waiting to start while its home worker has calls waiting (a hot app can keep more than one
 * worker busy; an app called now and then would only be compiled again elsewhere).
 */
const HOT_APP = 4;
/**
 * A QuickJS slice this long past its last interrupt check is in one long built-in call (a
 * `JSON.parse` of megabytes): its worker can neither send back the calls behind it nor send the
 * results of those it ran before, until the call returns. Its app then counts as heavy for
 * HEAVY_MS (see WorkerPool.behindHeavy).
 */
const UNCHECKED_MS = 500;
const HEAVY_MS = 10_000;
/**
 * Most apps whose home worker the pool remembers (more than a worker keeps sources of): the one
 * whose call went out longest ago is forgotten first (its next call goes to the least loaded worker).
 */
const MAX_HOMES = 4096;
/** How long an app whose call ended its worker has its calls served apart (see the file comment). */
const APART_MS = 60_000;
/** Start failures in a row after which calls in line fail instead of waiting. */
const MAX_START_FAILURES = 3;
/** What the calls get then (the reason is logged, and given to ready()). */
const START_FAILED = 'The script engine cannot start';

function errorResult(job: ScriptJob, name: ErrorName, message?: string): JobResult {
  const e = ERRORS[name];
  return { state: job.state, outcome: { kind: 'error', code: e.code, status: e.status, message: message ?? e.message } };
}

/** The end of a call that never left the line: it ran 0 ms, so its whole wait counts as queue wait. */
function lineResult(job: ScriptJob, name: ErrorName, message?: string): JobResult {
  return { ...errorResult(job, name, message), runMs: 0 };
}

/** Sets `app`'s entry of a map of at most MAX_HOMES apps, as its most recent: the oldest goes first. */
function setRecent<V>(map: Map<string, V>, app: string, value: V): void {
  map.delete(app);
  if (map.size >= MAX_HOMES) map.delete(map.keys().next().value!);
  map.set(app, value);
}

/**
 * The memory a call's script may use in `engine`, MiB: a WorkerPool's `memoryLimitMb`; undefined for
 * an engine of one's own, whose limits are its own.
 */
export function scriptMemoryOf(engine: ScriptEngine): number | undefined {
  return engine instanceof WorkerPool ? engine.memoryLimitMb : undefined;
}

export class WorkerPool implements ScriptEngine {
  readonly name: string;
  private readonly options: ResolvedPoolOptions;
  private readonly workers: PoolWorker[] = [];
  private readonly queue = new FairQueue<Task>();
  /** Jobs sent to workers and not finished, by id. */
  private readonly sent = new Map<number, Task>();
  /** Per app: jobs sent to workers, and blocking host calls in flight. */
  private readonly inFlight = new Map<string, number>();
  private readonly blockedApps = new Map<string, number>();
  /** Per app: the worker its last call went to (it holds the app's contexts). */
  private readonly homes = new Map<string, PoolWorker>();
  /** Per app: when one of its calls last held a worker in one long built-in call (clock ms; see UNCHECKED_MS). */
  private readonly heavyAt = new Map<string, number>();
  /** Per app: when one of its calls last ran out of memory or had its worker terminated (clock ms; see APART_MS), at most MAX_HOMES apps. */
  private readonly apartAt = new Map<string, number>();
  /** The scripts logged as running in blocking mode (see blockingMode). */
  private readonly blockingLogged = new Set<string>();
  private nextId = 1;
  private closing = false;
  private closed = false;
  private startFailures = 0;
  /** Why the workers cannot start (set after MAX_START_FAILURES failures in a row). */
  private startError?: string;
  private watch?: NodeJS.Timeout;
  private readyWaiters: Array<{ resolve(): void; reject(e: Error): void }> = [];
  /** While close() waits for the calls accepted: ends that wait (they finished, or a forced close came). */
  private drained?: () => void;
  private draining?: Promise<void>;
  private shutdown?: Promise<void>;
  private longestTimeoutMs = 0;

  constructor(options?: PoolOptions) {
    this.options = resolvePoolOptions(options);
    this.name = this.options.engine;
    this.replenish();
  }

  /** Workers now running, for diagnostics and tests. */
  get workerCount(): number {
    return this.live().length;
  }

  stats(): EngineStats {
    const live = this.live();
    return { workers: live.length, busy: live.filter((w) => w.tasks.size > 0).length, queued: this.queue.size };
  }

  /** Resolves when the pool's `size` workers can take work (rejects when they cannot start). */
  ready(): Promise<void> {
    if (this.closed) return Promise.reject(new Error('The script engine is closed'));
    if (this.startError !== undefined) return Promise.reject(new Error(this.startError));
    if (this.live().filter((w) => w.ready).length >= this.options.size) return Promise.resolve();
    return new Promise((resolve, reject) => {
      this.readyWaiters.push({ resolve, reject });
      this.updateRefs();
    });
  }

  /** The memory one call's script may use, MiB (`memoryLimitMb`). */
  get memoryLimitMb(): number {
    return this.options.memoryLimitMb;
  }

  run(job: ScriptJob, host: HostBridge): Promise<JobResult> {
    // (neither call ever runs: 0 ms of script time)
    if (this.closing) return Promise.resolve(lineResult(job, 'SHUTTING_DOWN'));
    if (this.startError !== undefined) return Promise.resolve(lineResult(job, 'ENGINE_FAILURE', START_FAILED));
    this.longestTimeoutMs = Math.max(this.longestTimeoutMs, job.timeoutMs);
    return new Promise<JobResult>((resolve) => {
      const task: Task = { id: this.nextId, appId: job.appId, job, host, resolve, blockedCalls: 0, done: false };
      this.nextId = this.nextId >= 0x7fffffff ? 1 : this.nextId + 1;
      this.enqueue(task);
      this.dispatchSoon();
    });
  }

  async close(options?: { force?: boolean }): Promise<void> {
    if (this.shutdown) return this.shutdown;
    this.closing = true;
    if (options?.force) this.drained?.(); // (a graceful close waiting goes on to stop the workers too)
    else if (this.queue.size > 0 || this.sent.size > 0) await this.drain();
    this.shutdown ??= this.stop();
    return this.shutdown;
  }

  /** Resolves when the calls already accepted have finished (each within its own limits; the cap is a backstop). */
  private drain(): Promise<void> {
    this.draining ??= new Promise<void>((resolve) => {
      // (a call may run twice its limit when other apps' scripts held its worker: see heldFor in
      // worker/worker.ts; past MAX_TIMER_MS a timer fires after 1 ms: the close would not wait at all)
      const cap = Math.min(MAX_TIMER_MS, this.options.queueTimeoutMs + 2 * this.longestTimeoutMs + 2 * this.options.graceMs + 1000);
      const timer = setTimeout(() => this.drained?.(), cap);
      this.drained = () => {
        this.drained = undefined;
        clearTimeout(timer);
        resolve();
      };
    });
    return this.draining;
  }

  private async stop(): Promise<void> {
    this.closed = true;
    clearInterval(this.watch);
    for (const t of this.queue.clear()) this.finish(t, lineResult(t.job, 'SHUTTING_DOWN'));
    for (const r of this.readyWaiters.splice(0)) r.reject(new Error('The script engine is closed'));
    await Promise.all(this.workers.slice().map((w) => this.terminate(w)));
  }

  private dispatchScheduled = false;

  /** The calls that arrive in one turn of the event loop are handed out together. */
  private dispatchSoon(): void {
    if (this.dispatchScheduled) return;
    this.dispatchScheduled = true;
    setImmediate(() => {
      this.dispatchScheduled = false;
      this.dispatch();
    });
  }

  private live(): PoolWorker[] {
    return this.workers.filter((w) => !w.dead && !w.retiring);
  }

  /** The workers `size` counts: those not set apart. */
  private kept(): PoolWorker[] {
    return this.live().filter((w) => !w.apart);
  }

  private enqueue(task: Task, front = false): void {
    // (a call a worker sent back after close() stopped the pool: no worker will take it)
    if (this.closed) return this.finish(task, lineResult(task.job, 'SHUTTING_DOWN'));
    this.queue.push(task, front);
    // (counted from when the call first came: a call sent back by a worker keeps its time in line)
    task.queuedAt ??= clock();
    this.armQueueTimer(task);
  }

  /**
   * QUEUE_TIMEOUT once the call has waited `queueTimeoutMs`. While no worker is ready (the pool is
   * starting, or replacing every worker) the line is not a sign of load: the timer is dropped and
   * armed again, from that moment, when a worker is ready (see onMessage 'ready').
   */
  private armQueueTimer(task: Task): void {
    clearTimeout(task.queueTimer);
    task.queueTimer = setTimeout(() => {
      task.queueTimer = undefined;
      if (!this.live().some((w) => w.ready)) return;
      if (!this.queue.remove(task)) return;
      const message = `The call waited ${this.options.queueTimeoutMs} ms for a worker; try again later`;
      this.finish(task, lineResult(task.job, 'QUEUE_TIMEOUT', message));
      this.dispatch();
    }, Math.max(0, task.queuedAt! + this.options.queueTimeoutMs - clock()));
  }

  private finish(task: Task, result: JobResult): void {
    if (task.done) return;
    task.done = true;
    if (result.outcome.kind === 'error' && result.outcome.code === ERRORS.SCRIPT_OUT_OF_MEMORY.code) this.setApart(task.appId);
    clearTimeout(task.queueTimer);
    if (task.worker) this.unsend(task);
    task.resolve(result);
  }

  /** `app`'s call ended its worker (out of memory, a trap or a heap left without room, or terminated): its calls go apart for APART_MS. */
  private setApart(app: string): void {
    setRecent(this.apartAt, app, clock());
  }

  private count(map: Map<string, number>, app: string, delta: number): void {
    const n = (map.get(app) ?? 0) + delta;
    if (n > 0) map.set(app, n);
    else map.delete(app);
  }

  private blockedCall(task: Task, delta: number): void {
    task.blockedCalls += delta;
    this.count(this.blockedApps, task.appId, delta);
  }

  /**
   * How long the worker has been held by one job's synchronous work (ms). A vm2 worker cannot
   * tell a job's promise jobs from the rest of its turn: its whole turn counts.
   */
  private busyMs(w: PoolWorker, now: number): number {
    return this.options.engine === 'vm2' ? Math.max(w.turnMs(now), w.sliceMs(now), w.laterJobsMs(now)) : w.sliceMs(now);
  }

  /** Per app: the workers its long slices hold now. */
  private slowApps(now: number): Map<string, number> {
    const slow = new Map<string, number>();
    for (const w of this.workers) {
      if (w.dead || this.busyMs(w, now) < SLOW_MS) continue;
      const app = this.sent.get(w.sliceJob())?.appId;
      if (app !== undefined) this.count(slow, app, 1);
    }
    return slow;
  }

  /** Whether `app` was seen in one long built-in call within HEAVY_MS (dispatch forgets older marks). */
  private heavy(app: string | undefined, now: number): boolean {
    const at = app === undefined ? undefined : this.heavyAt.get(app);
    return at !== undefined && now - at < HEAVY_MS;
  }

  /**
   * Whether a call sent to `w` now could wait behind a heavy app's slice, which may be one long
   * built-in call: one running there now, or one sent there that has not started.
   */
  private behindHeavy(w: PoolWorker, now: number): boolean {
    return (w.waitsToStart(w.heavySeq) && this.heavy(w.heavyApp, now)) || (w.inSlice() && this.heavy(this.sent.get(w.sliceJob())?.appId, now));
  }

  /** Whether hot `app`'s next call leaves its `home` worker, where calls wait to start, for `w`, where none does (see HOT_APP). */
  private spills(app: string, home: PoolWorker, w: PoolWorker): boolean {
    return (this.inFlight.get(app) ?? 0) >= HOT_APP && home.backlog() > 0 && w.backlog() === 0;
  }

  /**
   * A worker that can start a job now. QuickJS workers send back the jobs waiting behind a slice
   * that runs long, so they may be given jobs while computing; a vm2 worker cannot stop a slice
   * to do so, so it gets jobs only between slices and turns (its turn stays open while jobs it
   * started wait to enter: see WorkerShared), a batch at a time (trusted code: a script that
   * never yields holds the rest of its batch until its worker is terminated; they then start
   * elsewhere).
   */
  private available(w: PoolWorker, now: number): boolean {
    if (!w.ready || w.dead || w.retiring || w.blocked > 0) return false;
    // (a vm2 worker whose last entry's promise jobs have not let its loop turn for SLOW_MS is held by them)
    return this.options.engine === 'vm2' ? !w.inTurn() && !w.inSlice() && w.laterJobsMs(now) < SLOW_MS && !w.unstarted() : w.sliceMs(now) < SLOW_MS;
  }

  private dispatch(): void {
    if (this.closed) return;
    const now = clock();
    if (this.heavyAt.size > 0) for (const [app, at] of this.heavyAt) if (now - at >= HEAVY_MS) this.heavyAt.delete(app); // (an app that sends no more calls, deleted say, is forgotten too)
    if (this.apartAt.size > 0) for (const [app, at] of this.apartAt) if (now - at >= APART_MS) this.apartAt.delete(app);
    if (this.queue.size === 0) {
      this.grow(now, false);
      this.updateRefs();
      if (this.closing && this.sent.size === 0) this.drained?.();
      return;
    }
    const slow = this.slowApps(now);
    const blockedCap = Math.max(this.options.maxWorkersPerApp, Math.floor(this.options.maxWorkers / 2));
    const ready = this.workers.filter((w) => this.available(w, now));
    // Per app: the workers its calls went to in this turn. Each of them may start a long slice, so
    // an app whose calls went to as many workers as it may still hold that way keeps to those.
    const spread = new Map<string, PoolWorker[]>();
    const full = (app: string) => (slow.get(app) ?? 0) + (spread.get(app)?.length ?? 0) >= this.options.maxWorkersPerApp;
    // The workers a call of `app` may go to now. A heavy app's call goes to none where another
    // app's call waits to start (it could start first and hold that call, or its result, until its
    // slice ends); another app's call to none where a heavy app's slice runs or waits to start.
    // (an app set apart goes to workers set apart, while one runs or may start; the others to the rest)
    let apartRoom = false;
    if (this.apartAt.size > 0) {
      const live = this.live();
      apartRoom = live.length < this.options.maxWorkers || live.some((w) => w.apart);
    }
    const sorted = apartRoom || ready.some((x) => x.apart);
    const choices = (app: string): PoolWorker[] => {
      const apart = apartRoom && this.apartAt.has(app);
      const own = sorted ? ready.filter((x) => x.apart === apart) : ready;
      const c = full(app) ? own.filter((x) => spread.get(app)!.includes(x)) : own;
      if (this.heavyAt.size === 0) return c;
      return this.heavy(app, now) ? c.filter((x) => !x.waitsToStart(x.lightSeq)) : c.filter((x) => !this.behindHeavy(x, now));
    };
    const allowed = (app: string) =>
      (this.inFlight.get(app) ?? 0) < this.options.maxConcurrentPerApp &&
      (slow.get(app) ?? 0) < this.options.maxWorkersPerApp &&
      (this.blockedApps.get(app) ?? 0) < blockedCap &&
      choices(app).length > 0;
    // (other apps' calls are handed out first: a heavy app's call then goes to a worker they left free)
    const light = (app: string) => !this.heavy(app, now) && allowed(app);
    const batch = new Map<PoolWorker, number>();
    const sentTo = new Set<PoolWorker>();
    while (ready.length > 0 && this.queue.size > 0) {
      const task = (this.heavyAt.size > 0 ? this.queue.take(light) : undefined) ?? this.queue.take(allowed);
      if (!task) break;
      if (task.host.gone?.() === true) {
        // (its client went away while it waited: it never starts)
        this.finish(task, lineResult(task.job, 'CLIENT_GONE'));
        continue;
      }
      const mine = spread.get(task.appId);
      const candidates = choices(task.appId);
      let w = candidates[0];
      for (const x of candidates) if (x.tasks.size < w.tasks.size) w = x;
      // an app's calls stay on the worker that holds its contexts while it is not much busier, and
      // (a hot app) while it has no calls waiting to start where another worker has none
      const home = this.homes.get(task.appId);
      if (home && home !== w && candidates.includes(home) && home.tasks.size <= w.tasks.size + HOME_SLACK && !this.spills(task.appId, home, w)) w = home;
      this.setHome(task.appId, w);
      if (!mine) spread.set(task.appId, [w]);
      else if (!mine.includes(w)) mine.push(w);
      if (this.options.engine === 'vm2') {
        const n = (batch.get(w) ?? 0) + 1;
        batch.set(w, n);
        if (n >= VM2_BATCH) ready.splice(ready.indexOf(w), 1);
      }
      clearTimeout(task.queueTimer);
      task.queueTimer = undefined;
      this.sent.set(task.id, task);
      this.count(this.inFlight, task.appId, 1);
      clearTimeout(w.idleTimer);
      w.send(task);
      if (this.heavy(task.appId, now)) (w.heavySeq = task.seq!), (w.heavyApp = task.appId);
      else w.lightSeq = task.seq!;
      sentTo.add(w);
    }
    for (const w of sentTo) w.flush();
    this.grow(now, this.queue.any(allowed));
    this.updateRefs();
    this.watchSlices();
    if (this.closing && this.queue.size === 0 && this.sent.size === 0) this.drained?.();
  }

  /**
   * Starts workers: up to `size`; and one more (up to maxWorkers) while no worker can start a job
   * and a job could run (or a worker is held by a long slice: a stand-in is ready before it is needed).
   */
  private grow(now: number, runnable: boolean): void {
    if (this.closed || this.startFailures >= MAX_START_FAILURES) return;
    this.replenish();
    const all = this.live();
    if (all.length >= this.options.maxWorkers || all.some((w) => !w.ready)) return;
    const live = all.filter((w) => !w.apart);
    const held = (w: PoolWorker) => w.blocked > 0 || this.busyMs(w, now) >= SLOW_MS;
    // (a vm2 worker between a job's sending and its start is not held: it is about to take it)
    if (live.every(held)) this.spawn();
    else if (runnable && !live.some((w) => this.available(w, now) || (!held(w) && w.unstarted()))) this.spawn();
    // (calls of an app set apart, and no worker set apart: one starts)
    else if (this.apartAt.size > 0 && !all.some((w) => w.apart) && this.queue.any((app) => this.apartAt.has(app))) this.spawn(true);
  }

  /** Keeps `size` workers (at creation, and as soon as one ends, also while close() waits for the calls accepted). */
  private replenish(): void {
    if (this.closed || this.startFailures >= MAX_START_FAILURES) return;
    for (let n = this.kept().length; n < this.options.size; n++) this.spawn();
  }

  private spawn(apart = false): void {
    const w = new PoolWorker(
      { engine: this.options.engine, memoryLimitMb: this.options.memoryLimitMb, contextBudgetMb: this.options.contextBudgetMb, slowMs: SLOW_MS },
      (x, msg) => this.onMessage(x, msg),
      (x, err) => this.onExit(x, err),
    );
    w.apart = apart;
    this.workers.push(w);
    this.updateRefs();
  }

  /** Workers hold the event loop only while jobs are in flight or in line, or someone awaits ready(). */
  private updateRefs(): void {
    const busy = this.sent.size > 0 || this.queue.size > 0 || this.readyWaiters.length > 0;
    for (const w of this.workers) w.hold(busy);
  }

  /** While work is in flight: notice long slices (to grow) and scripts past their deadline (to terminate). */
  private watchSlices(): void {
    if (this.watch || this.sent.size === 0) return;
    this.watch = setInterval(() => {
      if (this.sent.size === 0 && this.queue.size === 0) {
        clearInterval(this.watch);
        this.watch = undefined;
        return;
      }
      const now = clock();
      for (const w of this.workers) {
        const ms = this.busyMs(w, now);
        if (w.dead || ms === 0) continue;
        const task = this.sent.get(w.sliceJob());
        if (task && this.options.engine === 'quickjs' && w.uncheckedMs(now) >= UNCHECKED_MS) this.heavyAt.set(task.appId, now);
        const limit = (task ? task.job.timeoutMs : this.longestTimeoutMs) + this.options.graceMs;
        if (ms > limit && !w.retiring && !w.preparing()) {
          const meta = task ? { appId: task.appId, requestId: task.job.requestId } : undefined;
          this.options.logger?.warn(`scriptable-api: terminating a worker: ${task ? `app '${task.appId}'` : 'a script'} ran past its deadline`, meta);
          void this.terminate(w);
          if (task) {
            // (answered now: ending a thread that allocates without end can take V8 seconds)
            this.setApart(task.appId);
            this.finish(task, errorResult(task.job, 'SCRIPT_TIMEOUT'));
          }
        }
      }
      this.dispatch();
    }, WATCH_MS);
    this.watch.unref();
  }

  private onMessage(w: PoolWorker, msg: FromWorker): void {
    switch (msg.type) {
      case 'ready': {
        // (the first worker ready after none was: calls in line count their time from now)
        const first = !this.live().some((x) => x.ready);
        w.ready = true;
        if (first) {
          const now = clock();
          for (const task of this.queue) {
            task.queuedAt = now;
            this.armQueueTimer(task);
          }
        }
        this.startFailures = 0;
        if (this.live().filter((x) => x.ready).length >= this.options.size) for (const r of this.readyWaiters.splice(0)) r.resolve();
        this.idle(w);
        this.dispatch();
        return;
      }
      case 'fatal':
        this.startFailed(w, msg.message);
        return;
      case 'host':
        this.onHostCall(w, msg);
        return;
      case 'result': {
        const task = w.tasks.get(msg.id);
        if (task) this.finish(task, msg.result);
        if (w.retiring && w.tasks.size === 0) void this.terminate(w);
        else this.idle(w);
        this.dispatch();
        return;
      }
      case 'blockingMode':
        this.blockingMode(msg);
        return;
      case 'bounce':
        // (back to the front of their lines in the order they came: the last one first)
        for (const id of [...msg.ids].reverse()) {
          const task = w.tasks.get(id);
          if (!task) continue;
          w.sentBack(task);
          this.unsend(task);
          this.enqueue(task, true);
        }
        if (w.retiring && w.tasks.size === 0) void this.terminate(w); // (a poisoned worker sends back what it cannot take)
        this.dispatch();
        return;
      case 'poisoned':
        if (msg.appId !== undefined) this.setApart(msg.appId);
        w.retiring = true;
        if (w.tasks.size === 0) void this.terminate(w);
        this.dispatch();
        return;
    }
  }

  /** Logs once (per app, script and reason, in this pool) that a script runs in blocking mode, and why. */
  private blockingMode(msg: Extract<FromWorker, { type: 'blockingMode' }>): void {
    const key = `${msg.appId}\u0000${msg.script}\u0000${msg.reason}`;
    if (this.blockingLogged.has(key)) return;
    if (this.blockingLogged.size >= 4096) this.blockingLogged.clear();
    this.blockingLogged.add(key);
    const { appId, script, reason } = msg;
    this.options.logger?.warn(
      `scriptable-api: app '${appId}', ${reason}: the script runs in blocking mode (each of its host calls holds a worker thread while it waits; see "What falls back to blocking mode" in docs/script-engine.md)`,
      { appId, script, reason },
    );
  }

  /** A job the worker never started goes back to being a job in line. */
  private unsend(task: Task): void {
    if (task.blockedCalls > 0) {
      // (its worker gave up waiting: the job ended at its deadline, or the worker did)
      if (task.worker) task.worker.blocked -= task.blockedCalls;
      this.blockedCall(task, -task.blockedCalls);
    }
    task.worker?.tasks.delete(task.id);
    task.worker = undefined;
    task.seq = undefined;
    this.sent.delete(task.id);
    this.count(this.inFlight, task.appId, -1);
  }

  private onHostCall(w: PoolWorker, msg: Extract<FromWorker, { type: 'host' }>): void {
    const task = this.sent.get(msg.jobId);
    if (msg.op === 'console') {
      task?.host.call('console', msg.args).catch(() => undefined);
      return;
    }
    if (this.queue.size > 0) this.dispatch(); // (a worker whose slice ended may take more)
    // a blocking call holds its worker until the reply, or until its job ends (unsend)
    const holds = msg.blocking && task !== undefined;
    const send = (reply: HostReply) => {
      if (holds && task.blockedCalls > 0) {
        w.blocked--;
        this.blockedCall(task, -1);
      }
      w.reply({ type: 'reply', callId: msg.callId, reply }, msg.blocking);
      if (msg.blocking) this.dispatch();
    };
    if (holds) {
      w.blocked++;
      this.blockedCall(task, 1);
      this.dispatch(); // this worker waits now: another may have to take its share
    }
    if (!task) {
      send(CALL_OVER);
      return;
    }
    task.host.call(msg.op, msg.args).then(
      (value) => send({ ok: true, value: value === undefined ? null : value }),
      (e: unknown) => send({ ok: false, error: hostErrorInfo(e) }),
    );
  }

  /** Remembers the worker an app's call went to (see MAX_HOMES): apps come and go, the map stays bounded. */
  private setHome(app: string, w: PoolWorker): void {
    setRecent(this.homes, app, w);
  }

  /** A worker beyond `size` (or set apart) that stays idle past idleTimeoutMs stops. */
  private idle(w: PoolWorker): void {
    if (w.tasks.size > 0 || w.dead || w.retiring) return;
    clearTimeout(w.idleTimer);
    const beyond = () => w.apart || this.kept().length > this.options.size;
    if (!beyond()) return;
    w.idleTimer = setTimeout(() => {
      if (w.tasks.size === 0 && beyond()) void this.terminate(w);
    }, this.options.idleTimeoutMs);
    w.idleTimer.unref();
  }

  /**
   * A worker could not start (it said why, or ended first): after MAX_START_FAILURES in a row,
   * calls and ready() fail at once with the reason instead of waiting for workers that never come.
   */
  private startFailed(w: PoolWorker, reason: string): void {
    this.options.logger?.error(`scriptable-api: a script worker failed to start: ${reason}`);
    this.startFailures++;
    void this.terminate(w);
    if (this.startFailures < MAX_START_FAILURES) return;
    this.startError = `The script engine cannot start: ${reason}`;
    // (the reason, logged above and given to ready(), may name host files: callers get none of it)
    for (const t of this.queue.clear()) this.finish(t, lineResult(t.job, 'ENGINE_FAILURE', START_FAILED));
    for (const r of this.readyWaiters.splice(0)) r.reject(new Error(this.startError));
  }

  private onExit(w: PoolWorker, err?: Error): void {
    if (w.dead) return;
    // a worker that ends before it is ready (and before we end it) failed to start
    if (!w.ready && !w.retiring) this.startFailed(w, err ? err.message : 'the worker exited');
    w.dead = true;
    clearTimeout(w.idleTimer);
    // results the worker posted before it ended still count
    for (const msg of w.leftovers()) if (msg.type === 'result' || msg.type === 'bounce') this.onMessage(w, msg);
    w.close();
    const i = this.workers.indexOf(w);
    if (i >= 0) this.workers.splice(i, 1);
    for (const [app, home] of this.homes) if (home === w) this.homes.delete(app);
    const started = w.started();
    // (why it ended is the host's to know, not the callers': another app's error text that ended
    // the thread, Node.js's heap message. Said here once; each call gets the table's message)
    if (err && w.ready && !this.closed) this.options.logger?.error(`scriptable-api: a script worker ended: ${err.message}`);
    // (the worker's heap filled up: the call whose slice was running asked for the memory; the
    // others it was running end with it, as an engine failure)
    const oom = (err as { code?: string } | undefined)?.code === 'ERR_WORKER_OUT_OF_MEMORY';
    const hog = oom ? w.sliceJob() : undefined;
    // (last sent first: those that go back to the front of their lines keep the order they came in)
    for (const task of [...w.tasks.values()].reverse()) {
      if (task.seq! > started && !this.closed) {
        this.unsend(task); // it never started: another worker takes it
        this.enqueue(task, true);
      } else if (this.closed) {
        this.finish(task, errorResult(task.job, 'SHUTTING_DOWN')); // (stopped by close(), not failed)
      } else if (oom && task.id === hog) {
        this.finish(task, errorResult(task.job, 'SCRIPT_OUT_OF_MEMORY'));
      } else {
        this.finish(task, errorResult(task.job, 'ENGINE_FAILURE'));
      }
    }
    if (!this.closed) this.dispatch();
  }

  private async terminate(w: PoolWorker): Promise<void> {
    if (w.dead) return;
    w.retiring = true;
    this.replenish();
    await w.worker.terminate().catch(() => undefined);
    this.onExit(w);
  }
}
