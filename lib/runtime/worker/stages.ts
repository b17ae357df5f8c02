/**
 * The stages in flight in one worker, over the engine's contexts. Many stages (of many jobs and
 * apps) wait here at once; each time one is entered (started, or resumed by a host reply) the
 * worker runs it, and the promise jobs it queued, then reads which stages settled.
 *
 * - Contexts are cached per (app, script version), or per set of them for a run that goes on from
 *   stage to stage (StageChain), within a byte budget, the less recently used out first; a context
 *   with stages in flight is never dropped. A context whose script did not load is not loaded
 *   again for a while (LOAD_RETRY): its calls meanwhile get the same error.
 * - Each entry runs for one job: its deadline is what the QuickJS interrupt handler enforces, and
 *   the shared slice clock tells the pool how long the worker has been busy.
 * - A stage still pending when its context waits for no host call can never settle: it is
 *   reported as pending (SCRIPT_STALLED) at once.
 * - An entry that fails (timeout, out of memory) drops its context: the failing call gets the
 *   error, the other calls in flight in that context (the same script of the same app) fail with
 *   ENGINE_FAILURE.
 * - Heap growth (QuickJS) is charged to the job whose entry asked for it. When the heap would
 *   grow past one call's room for a job while another job in flight drove more of its growth (a
 *   memory bomb waiting on the host between allocations), the entry goes on and the other job is
 *   ended as out of memory right after it, its context dropped: the bomb, not the call that
 *   happened to allocate next, fails.
 */
import type { ChainedHead, StageHead, StageOutput } from '../protocol';
import type { StageTexts } from './pipeline';
import { EngineError, engineFailure, type EngineContext, type HostFn, type ModuleCode, type SandboxDriver } from './driver';
import { CALL_OVER, clock } from '../messages';

/**
 * How long a context that failed to load answers with its error before it is loaded again: ten
 * times what the failed load took, at least a second; remembered for this many contexts at most.
 */
const LOAD_RETRY = { minMs: 1000, factor: 10, slots: 1024 };

/** A job as the stages see it. */
export interface StageJob {
  id: number;
  /** The job's time limit (ms): also the bound of one context's loading. */
  timeoutMs: number;
  /** On the monotonic clock (lib/timers.ts). Time spent loading contexts is added to it: the limit measures the script's own work. */
  deadline: number;
  done: boolean;
  /** Heap growth charged to the job's entries, bytes (QuickJS; see heapGrowth). */
  grown?: number;
  /** Its async host calls not answered yet (see forget). */
  calls?: number;
  /** A blocking host call of it ran into its deadline: its entry ends as a timeout, whatever the script did with that error. */
  hostTimedOut?: boolean;
}

export interface StageHost {
  /** A host call the thread waits for: the reply JSON. */
  callSync(job: StageJob, script: string, op: string, argsJson: string): string;
  /** Starts a host call; its reply comes back through Stages.reply(callId, json). */
  callAsync(job: StageJob, op: string, argsJson: string): number;
}

/** Marks slices of script work for the pool (see WorkerShared in lib/runtime/messages.ts). */
export interface SliceClock {
  begin(jobId: number): void;
  end(): void;
  /**
   * Script code may run from now until the thread's event loop turns again: the promise jobs of
   * an entry into an engine that runs them later (vm2), outside the entry's slice. The pool's
   * watchdog must see them, whatever started the entry (a message, or the stage before settling),
   * as `jobId`'s, also once a slice of other work in the same turn (preparing a script) ends.
   */
  untilTurn?(jobId: number): void;
}

/**
 * The stages a run may go on to in the same entry (StageHead.next): the adapter runs each while
 * the one before ended as the pipeline would go on from it. The k-th calls the host as the run's
 * id + k (the ids are reserved), which tells which stage and script act.
 */
export interface StageChain {
  /** The key of the chain's context (the run's own key is that of the first stage's script alone: used when the chain's does not load). */
  key: string;
  /** The context's modules after the first stage's own (modules 1, 2...). */
  more: ModuleCode[];
  /** Each stage it may go on to, its script, its head (module: its script's in the context), and what to do once the run went on to it. */
  next: Array<{ script: string; head: ChainedHead; runs(): void }>;
}

/** An EngineError that ended a chained run (StageChain), and at which of its stages (0: the first). */
export interface ChainedFailure extends EngineError {
  chainAt?: number;
}

interface Pending {
  job: StageJob;
  /** The script of the stage running now (a chained run moves on: see StageChain). */
  script: string;
  /** A chained run: the stages it may go on to, and how many it went on to so far. */
  chain?: StageChain;
  at: number;
  /** The RequestSnapshot JSON, sent to the adapter when it asks ('stage.request'): most stages never do. */
  request: () => string;
  /** The request body, sent when the script first reads ctx.body ('stage.body'). */
  body: string;
  resolve(out: StageOutput): void;
  reject(e: unknown): void;
  /** False while its start waits for the context's entries before it (see step). */
  started: boolean;
}

interface Cached {
  key: string;
  ctx: EngineContext;
  stages: Map<number, Pending>;
  used: number;
  dead: boolean;
  /** The entries in line (jobsRunLater engines): the last one's end, null when none is in flight. */
  entering: Promise<void> | null;
}

export class Stages {
  private readonly cache = new Map<string, Cached>();
  private readonly loading = new Map<string, Promise<Cached>>();
  /** Contexts that failed to load lately, by key: the error, and until when it stands (see loadFailed). */
  private readonly failed = new Map<string, { error: EngineError; until: number }>();
  /** Per context key: calls waiting for its context to load, before their stage is in it (see evict). */
  private readonly awaited = new Map<string, number>();
  private readonly calls = new Map<number, { c: Cached; job: StageJob }>();
  private cachedBytes = 0;
  private nextStage = 1;
  private tick = 0;
  /** The job of the entry running now (host calls made while a module loads act for it). */
  entryJob: StageJob | null = null;
  /** The job whose entry or load left the engine unusable (see SandboxDriver.poisoned): its app is set apart. */
  poisonedBy: StageJob | null = null;
  /** The deadline of the entry running now: the job's, or the load's own. */
  entryDeadline = Infinity;
  /** An entry into a jobsRunLater context was made in this turn of the event loop (see step). */
  private turnTaken = false;
  /** Entries waiting for a turn of their own, in the order they asked. */
  private readonly turnWaiters: (() => void)[] = [];
  /** A job in flight to end as out of memory once the entry running now is over (see heapGrowth). */
  private hog: StageJob | null = null;
  /** The context loading, its job and script: that module's top-level code makes host calls (console...) as stage 0. */
  private loadingFor: { c: Cached; job: StageJob; script: string } | null = null;

  constructor(
    private readonly driver: SandboxDriver & { takeHeapFull?(): boolean; takeInterrupted?(): boolean },
    private readonly host: StageHost,
    private readonly slices: SliceClock,
    private readonly budgetBytes: number,
    /** The least heap growth that marks a job in flight as a memory hog (see heapGrowth). */
    private readonly hogMinBytes = 0,
    /** The most of the heap's growth a job in flight holds room for, beside the one growing it (one call's limit; see heapGrowth). */
    private readonly callLimitBytes = 0,
  ) {}

  /**
   * Runs one stage: `fn` of the script (`code`, ready for the engine) in its context. `runs` is
   * called once the script is known to run (its context loaded, `fn` found), before `fn` starts.
   */
  async run(job: StageJob, script: string, key: string, code: string, fn: string, head: string | StageHead, texts: Omit<StageTexts, 'head'>, runs?: () => void, chain?: StageChain): Promise<StageOutput> {
    // (a job that ended, at its deadline, while it waited on the host between two stages runs no more
    // script code: started past its deadline, it would be interrupted and take its context with it)
    if (job.done) throw new EngineError('SCRIPT_TIMEOUT', 'The call is over');
    const waitFrom = clock();
    let c: Cached | null | undefined = this.cache.get(chain?.key ?? key);
    if (c !== undefined) c.used = ++this.tick;
    else {
      // (until its stage is in the context, the context is not idle: the loads of other calls
      // finishing meanwhile must not drop it to make room)
      const keys = chain === undefined ? [key] : [chain.key, key];
      for (const k of keys) this.awaited.set(k, (this.awaited.get(k) ?? 0) + 1);
      try {
        // (failed by another call of it before this one could start in it: load it anew)
        do {
          c = await this.loadFor(job, script, key, code, chain);
          // (the chain's context failed to load: the first stage runs alone, and a script that
          // does not load fails in its own stage, after the stages before it ran)
          if (c === null) chain = undefined;
        } while (c === null || (c.dead && !job.done));
      } finally {
        for (const k of keys) {
          const n = this.awaited.get(k)! - 1;
          if (n > 0) this.awaited.set(k, n);
          else this.awaited.delete(k);
        }
      }
    }
    job.deadline += clock() - waitFrom; // (loading a context is not the script's time)
    if (job.done) throw new EngineError('SCRIPT_TIMEOUT', 'The call is over');
    if (!c.ctx.hasFunction(fn)) throw new EngineError('FUNCTION_NOT_FOUND', `Script '${script}' does not export a function named '${fn}'`);
    if (typeof head === 'string') chain = undefined;
    else {
      // (it goes on up to a stage whose function is missing: that stage then runs alone, and fails as such)
      const n = chain === undefined ? 0 : chain.next.findIndex((s) => !c.ctx.hasFunction(s.head.fn, s.head.module));
      if (n === 0) chain = undefined;
      else if (n > 0) chain!.next = chain!.next.slice(0, n); // (the run's own, made for it: see worker.ts chainOf)
      if (chain !== undefined) head.next = chain.next.map((s) => s.head);
      head = JSON.stringify(head);
    }
    runs?.();
    const id = this.nextStage;
    this.nextStage += 1 + (chain?.next.length ?? 0); // (the ids its chained stages call as)
    const headJson = head;
    return new Promise<StageOutput>((resolve, reject) => {
      const text = typeof texts.body === 'string' ? texts.body : ''; // (none given: none)
      const p: Pending = { job, script, chain, at: 0, request: texts.request, body: text, resolve, reject, started: false };
      c.stages.set(id, p);
      void this.step(c, job, () => {
        p.started = true;
        // (a body is asked for when read, 'stage.body': a stage that never reads it is not handed
        // it; one holding a NUL comes with the stage, which an engine can pass on escaped)
        const body = text === '' || text.includes('\0') ? text : null;
        c.ctx.start(id, fn, headJson, '', texts.attributes, texts.response, texts.value, texts.ctx, texts.maps, body, texts.chunks);
      });
    });
  }

  /** The reply to an async host call. */
  reply(callId: number, json: string): void {
    const call = this.calls.get(callId);
    if (!call) return;
    this.calls.delete(callId);
    call.job.calls!--;
    if (call.c.dead || call.job.done) return;
    void this.step(call.c, call.job, () => call.c.ctx.reply(callId, json));
  }

  /**
   * The heap grows by `bytes` for the entry running now (the driver's `heapGrowth`), `pastBy`
   * bytes past one call's room: charged to its job. Each other job in flight has room for what it
   * grew, up to `callLimitBytes` (calls waiting on the host by the hundred each hold their own
   * data). Past that it may grow only when another job in flight drove more of the heap's growth,
   * and at least `hogMinBytes` of it (the heap grows in steps of up to a fifth of its size,
   * charged to whichever call asks: one step is no proof of a bomb): that one is ended after this
   * entry (killHog) and this job goes on.
   */
  heapGrowth(bytes: number, pastBy: number): boolean {
    const job = this.entryJob;
    if (job === null || job.done) return pastBy <= 0;
    if (pastBy > 0) {
      let top: StageJob | null = null;
      let held = 0;
      const seen = new Set<StageJob>([job]);
      for (const c of this.cache.values()) {
        for (const p of c.stages.values()) {
          if (seen.has(p.job) || p.job.done) continue;
          seen.add(p.job);
          held += Math.min(p.job.grown ?? 0, this.callLimitBytes);
          if ((p.job.grown ?? 0) > (top?.grown ?? 0)) top = p.job;
        }
      }
      if (pastBy > held) {
        if (top === null || (top.grown ?? 0) <= (job.grown ?? 0) || (top.grown ?? 0) < this.hogMinBytes) return false;
        this.hog = top;
      }
    }
    job.grown = (job.grown ?? 0) + bytes;
    return true;
  }

  /** Ends the job heapGrowth marked (callers check there is one) as out of memory: its contexts go, freeing what it holds. */
  private killHog(): void {
    const hog = this.hog!;
    this.hog = null;
    if (hog.done) return;
    const err = new EngineError('SCRIPT_OUT_OF_MEMORY', "The script ran out of memory (it grew its worker's shared heap the most, and another call needed room)");
    for (const c of [...this.cache.values()]) if ([...c.stages.values()].some((p) => p.job === hog)) this.fail(c, hog, err);
  }

  /**
   * The job ended: the replies to its async host calls still out will be ignored. Their entries go
   * now, not when the reply comes: a service that never answers (an accounts lookup that hangs)
   * would keep the job, and its request, here for good.
   */
  forget(job: StageJob): void {
    if (!job.calls) return;
    for (const [id, call] of this.calls) if (call.job === job) this.calls.delete(id);
    job.calls = 0;
  }

  /**
   * The job ended (its deadline passed): its stages are forgotten, their host replies ignored, and
   * their promises rejected (SCRIPT_TIMEOUT): what awaits one (an automation's script step) ends
   * and gives back what it holds (lib/automation/held.ts).
   */
  cancel(job: StageJob): void {
    for (const c of this.cache.values()) {
      for (const [id, p] of c.stages) {
        if (p.job !== job) continue;
        c.stages.delete(id);
        try {
          c.ctx.cancel(id);
        } catch {
          // nothing runs there: a failure leaves the stage unreachable all the same
        }
        p.reject(chainedAt(p, new EngineError('SCRIPT_TIMEOUT', 'The call is over')));
      }
    }
  }

  /** The context of the run (its chain's, or null when that one fails to load). */
  private async loadFor(job: StageJob, script: string, key: string, code: string, chain: StageChain | undefined): Promise<Cached | null> {
    if (chain === undefined) return this.context(job, script, key, code);
    try {
      return await this.context(job, script, chain.key, code, chain.more);
    } catch (e) {
      if (e instanceof EngineError && !job.done) return null;
      throw e;
    }
  }

  private async context(job: StageJob, script: string, key: string, code: string, more?: ModuleCode[]): Promise<Cached> {
    const cached = this.cache.get(key);
    if (cached) {
      cached.used = ++this.tick;
      return cached;
    }
    let loading = this.loading.get(key);
    if (!loading) {
      const failed = this.failedLoad(key);
      if (failed) throw failed;
      const from = clock();
      loading = this.load(job, script, key, code, more);
      this.loading.set(key, loading);
      const loaded = () => this.loading.delete(key);
      loading.then(loaded, (e: unknown) => {
        loaded();
        this.loadFailed(key, e, clock() - from);
      });
    }
    return loading;
  }

  /**
   * Remembers a context whose script did not load (a compile error, a top-level throw, top-level
   * code past its deadline): the same error answers its calls for a while, without loading it
   * again, so that a broken script's traffic takes at most about a tenth of the worker's time
   * (LOAD_RETRY). Out of memory is not remembered: a load may be refused room that another call holds.
   */
  private loadFailed(key: string, e: unknown, ms: number): void {
    if (!(e instanceof EngineError) || (e.errorName !== 'SCRIPT_COMPILE_ERROR' && e.errorName !== 'SCRIPT_TIMEOUT')) return;
    if (this.failed.size >= LOAD_RETRY.slots) this.failed.delete(this.failed.keys().next().value!);
    this.failed.set(key, { error: e, until: clock() + Math.max(LOAD_RETRY.minMs, LOAD_RETRY.factor * ms) });
  }

  /** The error of a context that failed to load lately (a copy: each call gets its own), else undefined. */
  private failedLoad(key: string): EngineError | undefined {
    const f = this.failed.get(key);
    if (f === undefined) return undefined;
    if (clock() < f.until) return new EngineError(f.error.errorName, f.error.message, f.error.detail);
    this.failed.delete(key);
    return undefined;
  }

  private async load(job: StageJob, script: string, key: string, code: string, more?: ModuleCode[]): Promise<Cached> {
    // (its top-level code may queue promise jobs that run once open returns: a turn of its own, see step)
    const turn = this.driver.jobsRunLater ? this.ownTurn() : null;
    if (turn !== null) await turn;
    const c: Cached = { key, ctx: undefined as unknown as EngineContext, stages: new Map(), used: ++this.tick, dead: false, entering: null };
    const host = this.hostFor(c);
    this.entryJob = job;
    this.entryDeadline = Infinity;
    let began = false;
    // the script's own module code runs under a deadline of its own, in a slice the pool sees
    const moduleStarts = () => {
      began = true;
      this.slices.begin(job.id);
      this.entryDeadline = clock() + job.timeoutMs;
    };
    this.loadingFor = { c, job, script };
    if (this.driver.jobsRunLater) this.slices.untilTurn?.(job.id);
    try {
      c.ctx = await this.driver.open(script, code, host, moduleStarts, more);
    } finally {
      this.loadingFor = null;
      this.entryDeadline = Infinity;
      if (began) this.slices.end();
      this.notePoison(this.hog ?? job);
      if (this.hog !== null) this.killHog();
    }
    this.cache.set(key, c);
    this.cachedBytes += c.ctx.bytes;
    this.evict(c); // (not the new one: its first call has yet to start in it)
    return c;
  }

  /**
   * The host function of context `c`: it lives as long as the context, so it is made here, where
   * it can hold nothing else (made inside load, it would keep load's first job alive with it: its
   * request and its scripts' sources, once per cached context).
   */
  private hostFor(c: Cached): HostFn {
    return (stageId, op, argsJson, async) => this.hostCall(c, stageId, op, argsJson, async);
  }

  /**
   * Drops idle contexts (but `keep`) while the cache holds more than its budget, each one picked
   * at random among the less recently used half of them. Plain LRU would drop the context called
   * next when apps are called in rotation over a few more than fit (every call would open one);
   * picking among the older half keeps most of them, and what was called lately stays.
   */
  private evict(keep?: Cached): void {
    if (this.cachedBytes <= this.budgetBytes) return;
    const idle = [...this.cache.values()].filter((c) => c.stages.size === 0 && c !== keep && !this.awaited.has(c.key)).sort((a, b) => a.used - b.used);
    // idle[0, older): the older half not dropped yet; past it, the newer half, dropped oldest
    // first only when the older half was not enough (a context larger than the rest)
    let older = Math.ceil(idle.length / 2);
    let newer = older;
    while (this.cachedBytes > this.budgetBytes) {
      if (older > 0) {
        const i = Math.floor(Math.random() * older);
        this.drop(idle[i]);
        idle[i] = idle[--older];
      } else if (newer < idle.length) {
        this.drop(idle[newer++]);
      } else {
        break;
      }
    }
  }

  /**
   * Where the chained runs in `c` are (an interrupted entry: the stage running when the deadline
   * passed may have made no host call). The adapter answers from its records: no script code runs.
   */
  private locate(c: Cached): void {
    for (const [id, p] of c.stages) {
      if (p.chain === undefined) continue;
      this.entryDeadline = Infinity;
      try {
        moveTo(p, chainPlace(c.ctx.at(id)).at);
      } catch {
        // (a context that cannot answer: the stage its last host call was made from)
      }
    }
  }

  private drop(c: Cached): void {
    if (c.dead) return;
    c.dead = true;
    if (this.cache.get(c.key) === c) this.cache.delete(c.key);
    this.cachedBytes -= c.ctx.bytes;
    c.ctx.dispose();
  }

  private hostCall(c: Cached, stageId: number, op: string, argsJson: string, async: boolean): string | number {
    const p = stageId === 0 ? undefined : (c.stages.get(stageId) ?? this.chained(c, stageId));
    // (stage 0: the module's own code while it loads; at any other time, or from another context,
    // no stage is acting, e.g. a callback of another context's code that the runtime ran then)
    const loading = stageId === 0 && this.loadingFor?.c === c ? this.loadingFor : null;
    const job = p ? p.job : (loading?.job ?? null);
    if (!job || job.done) {
      if (async) return '';
      return JSON.stringify(CALL_OVER);
    }
    if (op === 'stage.request') return p ? p.request() : 'null';
    if (op === 'stage.body') return p ? p.body : '';
    if (!async) return this.host.callSync(job, p ? p.script : loading!.script, op, argsJson);
    const callId = this.host.callAsync(job, op, argsJson);
    this.calls.set(callId, { c, job });
    job.calls = (job.calls ?? 0) + 1;
    return callId;
  }

  /**
   * The chained run calling as `stageId`: a run that went on to its k-th next stage calls as its
   * id + k (see StageChain), which moves it there.
   */
  private chained(c: Cached, stageId: number): Pending | undefined {
    for (let k = 1; k <= MAX_CHAIN; k++) {
      const p = c.stages.get(stageId - k);
      if (p?.chain === undefined || k > p.chain.next.length) continue;
      moveTo(p, k);
      return p;
    }
    return undefined;
  }

  /**
   * One entry into a context for `job`, then the stages it settled. When the engine runs an
   * entry's promise jobs only once the event loop turns (vm2), the context is entered again only
   * after they ran: the adapter's platform helpers act for the stage entered last, so the
   * continuations of two stages resumed in one turn would act for the second one's request. And
   * each such entry has a turn of its own: its promise jobs run before any other entry begins, so
   * the slice the pool sees names the job whose code runs (a runaway or a memory bomb resumed in
   * one turn with another app's call would be charged to the call entered after it).
   */
  private step(c: Cached, job: StageJob, enter: () => void): Promise<void> {
    if (!this.driver.jobsRunLater) return this.entry(c, job, enter);
    // (a job that ended while its entry waited, at its deadline, runs no more script code)
    const over = () => c.dead || job.done;
    const inTurn = (): Promise<void> => {
      const wait = this.ownTurn();
      return wait === null ? this.entry(c, job, enter) : wait.then(() => (over() ? undefined : this.entry(c, job, enter)));
    };
    const before = c.entering;
    const run = before === null ? inTurn() : before.then(() => (over() ? undefined : inTurn()));
    const done = () => {
      if (c.entering === end) c.entering = null;
    };
    const end: Promise<void> = run.then(done, done);
    c.entering = end;
    return run;
  }

  /** Whether entries (jobsRunLater engines) wait for a turn of their own: the thread has script work for its next turns. */
  entriesWaiting(): boolean {
    return this.turnWaiters.length > 0;
  }

  /** Takes this turn for an entry (null), or a promise of a later turn: one per turn, in the order asked. */
  private ownTurn(): Promise<void> | null {
    if (!this.turnTaken) {
      this.turnTaken = true;
      setImmediate(this.nextTurn);
      return null;
    }
    return new Promise((resolve) => this.turnWaiters.push(resolve));
  }

  private readonly nextTurn = (): void => {
    const next = this.turnWaiters.shift();
    if (next === undefined) this.turnTaken = false;
    else {
      setImmediate(this.nextTurn);
      next();
    }
  };

  private async entry(c: Cached, job: StageJob, enter: () => void): Promise<void> {
    let inSlice = false;
    const begin = () => {
      this.slices.begin(job.id);
      inSlice = true;
      this.entryJob = job;
      this.entryDeadline = job.deadline;
    };
    const end = () => {
      if (inSlice) this.slices.end();
      inSlice = false;
    };
    try {
      begin();
      this.driver.takeHeapFull?.();
      this.driver.takeInterrupted?.();
      // stages started after this entry may still be pending when its drain is read: only the ones
      // started up to now can be judged stalled by it
      let upTo = this.nextStage - 1;
      const drained: Drained = { waiting: 0, outputs: [], more: true };
      try {
        enter();
        // (again while stages went on to the next of their chain: once the jobs they queued ran)
        while (drained.more === true) {
          if (this.driver.jobsRunLater) {
            // (the promise jobs it queued run after this slice: `await null; while (true) {}`)
            this.slices.untilTurn?.(job.id);
            end();
            await new Promise((resolve) => setImmediate(resolve)); // (the event loop turned: they have run)
            if (c.dead) return;
            begin(); // (reading the results runs script code too: getters, toJSON)
            upTo = this.nextStage - 1;
          }
          const d = JSON.parse(c.ctx.drain()) as Drained;
          drained.waiting = d.waiting;
          drained.more = d.more;
          for (const o of d.outputs) drained.outputs.push(o);
          if (this.driver.jobsRunLater) this.slices.untilTurn?.(job.id); // (and those the getters queued)
        }
      } catch (e) {
        return this.fail(c, job, e instanceof EngineError ? e : engineFailure(e));
      } finally {
        end();
      }
      try {
        // the engine stopped script code past the job's deadline (the script may have seen it as a
        // rejected promise, or a promise chain that stopped), or a blocking host call ran into it
        // (the script may have caught that error and gone on)
        if (this.driver.takeInterrupted?.() || job.hostTimedOut === true) {
          // (a chained run of it that settled all the same, its error the interrupt: where it was)
          for (const o of drained.outputs) {
            const p = c.stages.get(o.id!);
            if (p?.job === job && o.chain !== undefined) moveTo(p, o.chain.length);
          }
          this.settle(c, job, { waiting: 1, outputs: drained.outputs.filter((o) => c.stages.get(o.id!)?.job !== job) }, upTo);
          return this.fail(c, job, new EngineError('SCRIPT_TIMEOUT', 'The script timed out'));
        }
        this.settle(c, job, drained, upTo);
      } catch (e) {
        this.fail(c, job, e instanceof EngineError ? e : engineFailure(e));
      }
    } finally {
      // (a heap left without room by growth charged to a hog is the hog's doing)
      this.notePoison(this.hog ?? job);
      if (this.hog !== null) this.killHog(); // (a job whose memory this entry needed)
    }
  }

  private notePoison(job: StageJob): void {
    if (this.poisonedBy === null && this.driver.poisoned) this.poisonedBy = job;
  }

  private settle(c: Cached, job: StageJob, drained: Drained, upTo: number): void {
    const heapFull = this.driver.takeHeapFull?.() ?? false;
    for (const out of drained.outputs) {
      const p = c.stages.get(out.id!);
      if (!p) continue;
      // a refused heap growth ends a call that did not return normally as out-of-memory: the
      // script may see it as a thrown null or an InternalError it caught
      const oom = (heapFull && out.status !== 'value') || (out.status === 'error' && out.error?.name === 'InternalError' && /out of memory/i.test(out.error.message));
      if (oom) return this.fail(c, p.job, new EngineError('SCRIPT_OUT_OF_MEMORY', 'The script ran out of memory'));
      c.stages.delete(out.id!);
      if (p.chain !== undefined && out.chain !== undefined) moveTo(p, out.chain.length);
      p.resolve(out);
    }
    if (heapFull && c.stages.size > 0 && [...c.stages.values()].some((p) => p.job === job)) {
      return this.fail(c, job, new EngineError('SCRIPT_OUT_OF_MEMORY', 'The script ran out of memory'));
    }
    if (drained.waiting === 0) {
      // nothing in this context waits for the host: its pending stages can never settle
      for (const [id, p] of [...c.stages]) {
        if (id > upTo || !p.started) continue;
        c.stages.delete(id);
        let out: StageOutput = { id, status: 'pending', hasValue: false };
        try {
          if (p.chain !== undefined) {
            // (a stage it went on to stalled: the stages before it went on, leaving the state it had then)
            const place = chainPlace(c.ctx.at(id));
            moveTo(p, place.at);
            if (p.at > 0) out = { ...out, attributes: place.attributes, response: place.response, chain: stagesBefore(p) };
          }
          c.ctx.cancel(id);
        } catch {
          // (see cancel)
        }
        p.resolve(out);
      }
    }
    if (c.stages.size === 0) this.evict();
  }

  /** An entry failed: the context goes; `job` gets the error, the others in flight there a reset. */
  private fail(c: Cached, job: StageJob, err: EngineError): void {
    if (err.errorName === 'SCRIPT_TIMEOUT') this.locate(c);
    this.drop(c);
    for (const [id, p] of [...c.stages]) {
      c.stages.delete(id);
      p.reject(chainedAt(p, p.job === job ? err : new EngineError('ENGINE_FAILURE', `The script's context was reset: another call of it failed (${err.message})`)));
    }
  }
}

/** What the adapter's drain answers: `more`, stages went on to the next of their chain (drain again once their promise jobs ran). */
interface Drained {
  waiting: number;
  outputs: StageOutput[];
  more?: boolean;
}

/** The largest StageChain: a before hook on to the call and the after hook. */
const MAX_CHAIN = 2;

/** The adapter's `at` answer: where a chained run is, and the state its stages before left ('' : nowhere). */
function chainPlace(text: string): { at: number; attributes?: Record<string, unknown>; response?: StageOutput['response'] } {
  return text === '' ? { at: -1 } : (JSON.parse(text) as { at: number });
}

/** Chained run `p` went on to its `k`-th next stage (from a host call of it, or its output). */
function moveTo(p: Pending, k: number): void {
  for (; p.at < k; p.at++) {
    const link = p.chain!.next[p.at];
    p.script = link.script;
    link.runs();
  }
}

/** `err`, for a chained run that had gone on to a later stage: marked with it (a copy: `err` may be shared). */
function chainedAt(p: Pending, err: EngineError): EngineError {
  if (p.at === 0) return err;
  const e: ChainedFailure = new EngineError(err.errorName, err.message, err.detail);
  e.chainAt = p.at;
  return e;
}

/** The outputs of the stages a chained run went on from, as the pipeline reads them when it stalled later (what they returned is then of no use). */
function stagesBefore(p: Pending): StageOutput[] {
  return Array.from({ length: p.at }, (): StageOutput => ({ status: 'value', hasValue: false }));
}
