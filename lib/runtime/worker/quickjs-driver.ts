/**
 * The default engine: QuickJS compiled to WebAssembly (quickjs-emscripten, sync build). A worker
 * has one context per (app, script version) (or per set of an API's scripts run in one entry,
 * each a module of the context: see driver.ts), in QuickJS runtimes of up to CONTEXTS_PER_RUNTIME
 * contexts each, all in the worker's one WebAssembly module: contexts are separate realms (no
 * object of one is reachable from another), and sharing a runtime (its atoms and job queue) makes
 * a context about a third of the size of one with a runtime of its own. What bounds a runtime's
 * size is its cycle collection, which walks every object of the runtime's contexts in one pause:
 * 0.6 s with 1,000 apps' contexts in service in one runtime, whichever app's garbage set it off.
 * Each runtime's interrupt handler asks the worker whether the job being run has passed its
 * deadline, so a runaway loop ends its own call, in synchronous code and in promise jobs alike.
 * Every entry runs the promise jobs it queued before it returns, so a runtime's job queue is
 * empty between entries (a failed entry's leftovers are flushed with script code stopped). ES
 * modules load natively (top-level await included).
 *
 * Memory: QuickJS's own limit (`setMemoryLimit`) counts allocations, not bytes, in this
 * WebAssembly build (emscripten has no malloc_usable_size: justjake/quickjs-emscripten#255,
 * #271), so it is off. The bound is the WebAssembly heap itself: the driver hands the module a
 * `WebAssembly.Memory` and lets it grow only up to what the open contexts hold plus one call's
 * limit (and room for the allocator), never past that limit plus the contexts' budget; past one
 * call's room it grows as far as `options.heapGrowth` allows: by what the other calls in flight
 * grew it, each up to its own limit, and beyond that only by ending the call that grew it the
 * most (see Stages.heapGrowth). A bomb makes malloc fail inside
 * QuickJS ("out of memory"): that call fails with SCRIPT_OUT_OF_MEMORY, its context is dropped
 * (freeing its memory for the others) and the worker is replaced once its other calls end. A
 * worker whose heap (which never shrinks) leaves less than one limit of room is replaced the same
 * way.
 */
import {
  newQuickJSWASMModuleFromVariant,
  newVariant,
  type QuickJSContext,
  type QuickJSHandle,
  type QuickJSRuntime,
  type QuickJSWASMModule,
} from 'quickjs-emscripten-core';
import releaseSync from '@jitl/quickjs-wasmfile-release-sync';
import { randomBytes } from 'node:crypto';
import { compileLocation } from '../../error-location';
import { ERRORS } from '../../errors';
import { EngineError, engineFailure, type DriverOptions, type EngineContext, type HostFn, type ModuleCode, type SandboxDriver } from './driver';
import { QUICKJS_HEAP_MB, QUICKJS_HEAP_SLACK_MB } from '../messages';
import { CONTINUATION_SCRIPT } from '../protocol';

const MiB = 1024 * 1024;
const PAGE = 64 * 1024;
/**
 * Most contexts a QuickJS runtime holds: its cycle collection, which the garbage of any of them
 * sets off, walks them all (about 0.6 ms per small app's context in service: a pause of about
 * 20 ms at 32), while each runtime costs about 0.3 MiB of its own (its atoms), 3% of 32 contexts.
 */
export const CONTEXTS_PER_RUNTIME = 32;
/**
 * The WebAssembly heap a runtime takes beyond its contexts (its atoms, the adapter's names
 * included): 183 KiB of QuickJS's count for a runtime with one context against one in a shared
 * runtime, times ALLOCATOR_FACTOR. Each context counts its share.
 */
const RUNTIME_BYTES = 300 * 1024;
/** A QuickJS runtime of the worker and the number of contexts open in it. */
interface Runtime {
  rt: QuickJSRuntime;
  contexts: number;
}
/** Bytes a loaded module holds per character of its source (bytecode, atoms, functions): an estimate. */
const CODE_BYTES_PER_CHAR = 4;
/**
 * QuickJS counts what its objects hold, not what the allocator spends on them (headers, free
 * space between blocks): a context takes about 1.6 times its count of the WebAssembly heap.
 */
const ALLOCATOR_FACTOR = 1.6;

/** The part of WebAssembly.Memory the driver uses (this package's TypeScript lib has no WebAssembly types). */
interface WasmMemory {
  readonly buffer: ArrayBuffer;
  grow(delta: number): number;
}
const WasmMemoryCtor = (globalThis as unknown as { WebAssembly: { Memory: new (d: { initial: number; maximum: number }) => WasmMemory } }).WebAssembly.Memory;

/**
 * QuickJS seeds each context's Math.random with the wall clock when the context is made (in
 * milliseconds in this build): contexts made in the same millisecond share one sequence, and
 * anyone who knows about when a context was made (a client whose call loaded it) can compute its
 * numbers. Each context gets a Math.random of its own instead, shaped like the built-in:
 * xoshiro128** seeded with 128 bits from the host's CSPRNG, 53 bits a number. Called with the
 * four seed words; the built-ins it uses are captured first.
 */
const SEEDED_RANDOM = `(function (a, b, c, d) {
  var imul = Math.imul, s0 = a | 0, s1 = b | 0, s2 = c | 0, s3 = d | 0;
  if ((s0 | s1 | s2 | s3) === 0) s0 = 1;
  function next() {
    var x = imul(s1, 5), r = imul((x << 7) | (x >>> 25), 9), t = s1 << 9;
    s2 ^= s0; s3 ^= s1; s1 ^= s2; s0 ^= s3; s2 ^= t; s3 = (s3 << 11) | (s3 >>> 21);
    return r >>> 0;
  }
  Object.defineProperty(Math, 'random', { value: { random() { return ((next() >>> 5) * 67108864 + (next() >>> 6)) / 9007199254740992; } }.random, writable: true, enumerable: false, configurable: true });
})`;

function errorOf(ctx: QuickJSContext, handle: QuickJSHandle): { name: string; message: string; stack?: string } {
  let e: unknown;
  try {
    e = ctx.dump(handle);
  } catch {
    e = 'unreadable error';
  }
  handle.dispose();
  if (e && typeof e === 'object') {
    const o = e as { name?: unknown; message?: unknown; stack?: unknown };
    return { name: String(o.name ?? 'Error'), message: String(o.message ?? ''), ...(typeof o.stack === 'string' ? { stack: o.stack } : {}) };
  }
  return { name: 'Error', message: String(e) };
}

/** The part of the emscripten module that copies a host string into the WebAssembly heap. */
interface TextCopies {
  HEAPU8: Uint8Array;
  lengthBytesUTF8(text: string): number;
  stringToUTF8(text: string, ptr: number, maxBytes: number): number;
}
const utf8 = new TextEncoder();

/**
 * Every text that enters QuickJS (a stage's request, a host call's reply with an upstream's body,
 * a script's source) is first written into the WebAssembly heap as UTF-8 by the emscripten
 * module's `lengthBytesUTF8` and `stringToUTF8`, JavaScript loops over the text's code points
 * (about 9 ns a character: 9 ms for a 1 MB body). Called by emscripten as a method of the module
 * once it is ready, this puts Node.js's native encoder in their place. (A lone surrogate becomes
 * one U+FFFD, as TextEncoder writes it; QuickJS read emscripten's three bytes for it as three.)
 */
function nativeTextCopies(this: TextCopies): void {
  this.lengthBytesUTF8 = (text) => Buffer.byteLength(text, 'utf8');
  this.stringToUTF8 = (text, ptr, maxBytes) => {
    if (maxBytes <= 0) return 0;
    const written = utf8.encodeInto(text, this.HEAPU8.subarray(ptr, ptr + maxBytes - 1)).written;
    this.HEAPU8[ptr + written] = 0;
    return written;
  };
}

export class QuickJsDriver implements SandboxDriver {
  poisoned = false;
  readonly jobsRunLater = false;
  /** A heap growth was refused since takeHeapFull() was last called. */
  private heapFull = false;
  /** The WebAssembly heap's size in bytes (it only grows). */
  private heapBytes: number;
  /** Set when the interrupt handler stopped script code (the entry then failed as a timeout). */
  interrupted = false;

  /** What a context with the adapter and an empty module holds (measured on the second one opened). */
  private baseBytes = 0;
  /** The estimated size of the contexts open now (see QuickJsContext.bytes). */
  contextBytes = 0;
  private measured = 0;
  /** Set while leftover promise jobs of a failed entry are flushed: script code stops at once. */
  private flushing = false;

  /** The worker's QuickJS runtimes (kept once made, empty or not). */
  private readonly runtimes: Runtime[] = [];

  private constructor(
    private readonly wasm: QuickJSWASMModule,
    readonly options: DriverOptions,
    /** Readable for tests (test/helpers/quickjs-heap.js). */
    readonly memory: WasmMemory,
    readonly heapCapBytes: number,
  ) {
    this.heapBytes = memory.buffer.byteLength;
  }

  /** A runtime with room for a context: the first that has some, else a new one. */
  private runtimeWithRoom(): Runtime {
    const room = this.runtimes.find((r) => r.contexts < CONTEXTS_PER_RUNTIME);
    if (room) return room;
    const rt = this.wasm.newRuntime();
    rt.setMemoryLimit(-1); // (off: see Memory above)
    rt.setMaxStackSize(512 * 1024);
    rt.setInterruptHandler(() => {
      if (!this.flushing && !this.options.interrupt()) return false;
      this.interrupted = true;
      return true;
    });
    const made: Runtime = { rt, contexts: 0 };
    this.runtimes.push(made);
    return made;
  }

  static async create(options: DriverOptions): Promise<QuickJsDriver> {
    const capMb = Math.min(QUICKJS_HEAP_MB, Math.max(1, options.memoryLimitMb) + options.contextBudgetMb + QUICKJS_HEAP_SLACK_MB);
    const memory = new WasmMemoryCtor({ initial: 256, maximum: Math.ceil((capMb * MiB) / PAGE) });
    const wasm = await newQuickJSWASMModuleFromVariant(
      newVariant(releaseSync, {
        wasmMemory: memory,
        ...(options.wasmModule ? { wasmModule: options.wasmModule as never } : {}),
        // A QuickJS assertion (e.g. freeing a runtime an interrupt left inconsistent) poisons the
        // worker; emscripten's own report of it must not reach the host's stderr.
        emscriptenModule: { printErr: () => undefined, print: () => undefined, onRuntimeInitialized: nativeTextCopies } as object,
      }),
    );
    const driver = new QuickJsDriver(wasm, options, memory, capMb * MiB);
    // emscripten grows the heap with memory.grow() and turns a refusal into a failed malloc
    const grow = memory.grow.bind(memory);
    memory.grow = (delta: number) => {
      try {
        // the heap grows for one call by at most its limit beyond what the cached contexts hold,
        // and beyond that by what the other calls in flight grew it, each up to its own limit
        // (Stages.heapGrowth; past that, the call that grew it the most is ended)
        const next = memory.buffer.byteLength + delta * PAGE;
        const pastBy = next - driver.heapRoom();
        if (next > driver.heapCapBytes || !(options.heapGrowth ? options.heapGrowth(delta * PAGE, pastBy) : pastBy <= 0)) {
          throw new RangeError('The script ran out of memory');
        }
        const pages = grow(delta);
        driver.heapBytes = memory.buffer.byteLength;
        return pages;
      } catch (e) {
        // a refused growth retires the worker whatever was running (a call, or the flush of a
        // failed call's leftover jobs): the heap may hold what QuickJS could not free
        driver.heapFull = true;
        driver.poisoned = true;
        throw e;
      }
    };
    return driver;
  }

  /** Whether the interrupt handler stopped script code since the last call (clears the flag). */
  takeInterrupted(): boolean {
    const was = this.interrupted;
    this.interrupted = false;
    return was;
  }

  /** Whether a heap growth was refused since the last call (clears the flag). */
  takeHeapFull(): boolean {
    const full = this.heapFull;
    this.heapFull = false;
    return full;
  }

  /** After an entry: a heap leaving less than one limit of room poisons the worker (a refused growth already has). */
  checkHeap(): void {
    if (this.heapBytes > this.heapCapBytes - this.options.memoryLimitMb * MiB) this.poisoned = true;
  }

  /** The heap size allowed now: the contexts kept, one call's limit and the allocator's room. */
  heapRoom(): number {
    return this.contextBytes + (this.options.memoryLimitMb + QUICKJS_HEAP_SLACK_MB) * MiB;
  }

  /** What the objects of `ctx`'s runtime hold, in bytes (QuickJS's own count). */
  private usedBytes(ctx: QuickJSContext): number {
    const usage = ctx.runtime.computeMemoryUsage();
    const used = (ctx.dump(usage) as { memory_used_size?: number }).memory_used_size;
    usage.dispose();
    return typeof used === 'number' ? used : 0;
  }

  /**
   * Runs the promise jobs a failed entry left in its runtime's queue with script code stopped at
   * once (the queue is the runtime's, shared by its contexts: the next entry must find it empty).
   * Every runtime's queue is looked at; between entries only the failed one's holds any.
   */
  flushJobs(): void {
    this.flushing = true;
    try {
      for (const { rt } of this.runtimes) {
        while (rt.hasPendingJob()) {
          const r = rt.executePendingJobs(-1);
          if (r.error) r.error.dispose();
        }
      }
    } catch {
      this.poisoned = true;
    } finally {
      this.flushing = false;
      this.interrupted = false;
    }
  }

  /**
   * Whether a text from the host can enter a context: its UTF-8 copy (up to 3 bytes a character)
   * within one call's memory. A larger one could not be held by the call anyway, and WebAssembly
   * memory allocated past the module's cap ends in a trap, not in QuickJS's out-of-memory error.
   */
  fits(text: string): boolean {
    const limit = this.options.memoryLimitMb * MiB;
    return text.length * 3 <= limit || Buffer.byteLength(text) <= limit;
  }

  /**
   * An exception that escaped the adapter, as an EngineError: interrupt, out of memory, or a
   * failure of the engine. The promise jobs the failed entry left are flushed.
   */
  failure(err: { name: string; message: string }): EngineError {
    let e: EngineError;
    if (this.interrupted || err.message === 'interrupted') e = new EngineError('SCRIPT_TIMEOUT', 'The script timed out');
    else if (this.heapFull || /out of memory/i.test(err.message)) {
      this.poisoned = true;
      e = new EngineError('SCRIPT_OUT_OF_MEMORY', `The script ran out of memory (limit ${this.options.memoryLimitMb} MiB)`);
    } else e = engineFailure(`${err.name}: ${err.message}`);
    this.flushJobs(); // (which also clears `interrupted`)
    this.checkHeap();
    return e;
  }

  /**
   * An exception of the host's own that escaped the WebAssembly module (V8's stack overflow on the
   * worker thread's stack, a WebAssembly trap): it unwound the module's C code half-way, leaving
   * its stack pointer and the runtime's frames where they were, so the module is retired (the
   * next calls of every app on it failed with 'memory access out of bounds').
   */
  trapped(err: unknown): EngineError {
    if (err instanceof EngineError) return err;
    this.poisoned = true;
    return engineFailure(err);
  }

  async open(name: string, code: string, host: HostFn, moduleStarts?: () => void, more: readonly ModuleCode[] = []): Promise<EngineContext> {
    const chars = more.reduce((n, m) => n + m.code.length, code.length);
    const measure = this.measured < 2;
    const runtime = this.runtimeWithRoom();
    // (counted through a context of its own, from before the new one: its intrinsics count too)
    const probe = measure ? runtime.rt.newContext() : undefined;
    const before = probe ? this.usedBytes(probe) : 0;
    const ctx = runtime.rt.newContext();
    runtime.contexts++;
    const context = new QuickJsContext(this, ctx, () => runtime.contexts--);
    try {
      context.init([{ name, code }, ...more], host, moduleStarts);
      // Counting a runtime's memory walks every object of every context: the second context is
      // measured (the first also allocates what the runtime shares), the others estimated from
      // it and the size of their code.
      if (probe) {
        this.measured++;
        this.baseBytes = Math.max(16 * 1024, ALLOCATOR_FACTOR * (this.usedBytes(probe) - before) - CODE_BYTES_PER_CHAR * chars);
      }
      context.bytes = this.baseBytes + CODE_BYTES_PER_CHAR * chars + RUNTIME_BYTES / CONTEXTS_PER_RUNTIME;
      this.contextBytes += context.bytes;
    } catch (e) {
      const failure = this.trapped(e);
      context.dispose();
      this.checkHeap();
      throw failure;
    } finally {
      probe?.dispose();
    }
    return context;
  }
}

/** The message of a text from the host too large for a call's memory. */
function tooLarge(what: string, text: string, limitMb: number): string {
  return `The script ran out of memory (limit ${limitMb} MiB): ${what === 'stage.body' ? 'the request body' : what === 'stage.request' ? 'the request' : what} of ${text.length} characters does not fit`;
}

class QuickJsContext implements EngineContext {
  bytes = 0;
  /** The module's namespace, or (a context of several modules) an array of their namespaces. */
  private ns: QuickJSHandle | undefined;
  private readonly namespaces: QuickJSHandle[] = [];
  private entry: { start: QuickJSHandle; reply: QuickJSHandle; drain: QuickJSHandle; cancel: QuickJSHandle; at: QuickJSHandle } | undefined;
  private readonly functions = new Map<string, boolean>();

  constructor(
    private readonly driver: QuickJsDriver,
    /** Readable for tests (test/helpers/quickjs-garbage.js). */
    readonly ctx: QuickJSContext,
    /** Called once, when the context is disposed. */
    private readonly closed: () => void,
  ) {}

  init(modules: readonly ModuleCode[], host: HostFn, moduleStarts?: () => void): void {
    const { ctx } = this;
    const seed = randomBytes(16);
    const seeded = ctx.evalCode(`${SEEDED_RANDOM}(${[0, 4, 8, 12].map((i) => seed.readInt32LE(i)).join(',')})`, 'scriptable-api:random.js');
    if (seeded.error) throw this.setupError('random', errorOf(ctx, seeded.error));
    seeded.value.dispose();
    const adapter = ctx.evalCode(this.driver.options.adapterSource, 'scriptable-api:adapter.js');
    if (adapter.error) throw this.setupError('adapter', errorOf(ctx, adapter.error));
    const hostH = ctx.newFunction('host', (idH, opH, argsH, asyncH) => {
      const op = ctx.getString(opH);
      const r = host(ctx.getNumber(idH), op, ctx.getString(argsH), ctx.getNumber(asyncH) === 1); // (the adapter passes a boolean: 1 as a number)
      if (typeof r === 'number') return ctx.newNumber(r);
      // (a text the call's memory cannot hold is an error of the call, thrown where it asked: ctx.body of a huge request)
      if (!this.driver.fits(r)) throw new Error(tooLarge(op, r, this.driver.options.memoryLimitMb));
      return ctx.newString(r);
    });
    const made = ctx.callFunction(adapter.value, ctx.undefined, hostH);
    adapter.value.dispose();
    hostH.dispose();
    if (made.error) throw this.setupError('adapter', errorOf(ctx, made.error));
    const bound = ctx.evalCode(CONTINUATION_SCRIPT, 'scriptable-api:continuations.js');
    if (bound.error) throw this.setupError('adapter', errorOf(ctx, bound.error));
    bound.value.dispose();
    const get = (k: string) => ctx.getProp(made.value, k);
    this.entry = { start: get('start'), reply: get('reply'), drain: get('drain'), cancel: get('cancel'), at: get('at') };
    made.value.dispose();
    moduleStarts?.();
    for (const { name, code } of modules) {
      const mod = ctx.evalCode(code, name, { type: 'module' });
      if (mod.error) throw this.loadError(name, errorOf(ctx, mod.error));
      this.namespaces.push(this.settleModule(mod.value, name));
    }
    if (this.namespaces.length === 1) this.ns = this.namespaces[0];
    else {
      this.ns = ctx.newArray();
      this.namespaces.forEach((h, i) => ctx.setProp(this.ns!, i, h));
    }
    this.driver.checkHeap();
  }

  /** Our own set-up code failed: a timeout or out-of-memory (interrupted while loading), else an engine failure. */
  private setupError(what: string, err: { name: string; message: string }): EngineError {
    const e = this.driver.failure(err);
    return e.errorName === 'ENGINE_FAILURE' ? engineFailure(`${what}: ${e.detail?.cause ?? e.message}`) : e;
  }

  /** The module failed while loading: a timeout or out-of-memory, else a compile error. */
  private loadError(name: string, err: { name: string; message: string; stack?: string }): EngineError {
    const e = this.driver.failure(err);
    if (e.errorName !== 'ENGINE_FAILURE') return e;
    // (QuickJS gives the place as an `at name:line:column` frame)
    return new EngineError('SCRIPT_COMPILE_ERROR', `${name}: ${err.name}: ${err.message}`, { name: err.name, location: compileLocation(name, err.message, err.stack) });
  }

  /**
   * A module with top-level await evaluates to a promise of its namespace. The promise jobs its
   * top-level code queued run now, under the load's deadline: left in the runtime's shared queue,
   * they would run in whichever entry came next, another app's call when the loading call never
   * enters the context (a function it does not export).
   */
  private settleModule(value: QuickJSHandle, name: string): QuickJSHandle {
    const { ctx } = this;
    const state = ctx.getPromiseState(value);
    this.runJobs(() => value.dispose());
    if (state.type === 'fulfilled' && state.notAPromise) return value;
    const settled = ctx.getPromiseState(value);
    value.dispose();
    if (settled.type === 'fulfilled') return settled.value;
    if (settled.type === 'rejected') throw this.loadError(name, errorOf(ctx, settled.error));
    throw new EngineError('SCRIPT_COMPILE_ERROR', `${name}: top-level await never settled`);
  }

  /** Runs the promise jobs queued so far (throws EngineError, after `cleanup`, when one escapes). */
  private runJobs(cleanup?: () => void): void {
    const rt = this.ctx.runtime;
    while (rt.hasPendingJob()) {
      const jobs = rt.executePendingJobs(-1);
      if (jobs.error) {
        const err = errorOf(this.ctx, jobs.error);
        cleanup?.();
        throw this.driver.failure(err);
      }
    }
  }

  hasFunction(fn: string, module = 0): boolean {
    const key = module === 0 ? fn : `${module}\u0000${fn}`;
    let known = this.functions.get(key);
    if (known === undefined) {
      const ns = this.namespaces[module];
      if (ns === undefined) return false;
      const h = this.ctx.getProp(ns, fn);
      known = this.ctx.typeof(h) === 'function';
      h.dispose();
      if (this.functions.size < 256) this.functions.set(key, known);
    }
    return known;
  }

  /** Calls an entry method with strings and numbers (and the namespace first for start; null, or undefined for an absent argument), then runs the jobs it queued. */
  private enter(method: QuickJSHandle, args: Array<string | number | QuickJSHandle | null | undefined>): string {
    const { ctx } = this;
    try {
      const handles = args.map((a) => (typeof a === 'string' ? ctx.newString(a) : typeof a === 'number' ? ctx.newNumber(a) : a === null ? ctx.null : (a ?? ctx.undefined)));
      const r = ctx.callFunction(method, ctx.undefined, ...handles);
      handles.forEach((h, i) => (typeof args[i] === 'string' || typeof args[i] === 'number') && h.dispose());
      if (r.error) throw this.driver.failure(errorOf(ctx, r.error));
      const text = ctx.typeof(r.value) === 'string' ? ctx.getString(r.value) : '';
      r.value.dispose();
      this.runJobs();
      this.driver.checkHeap();
      return text;
    } catch (e) {
      throw this.driver.trapped(e);
    }
  }

  start(stageId: number, fn: string, head: string, request: string, attributes: string, response: string, value: string, ctx = '', maps = '', body?: string | null, chunks?: string): void {
    // (a text enters QuickJS as a C string, ending at its first NUL: a body holding one comes as
    // JSON instead, where it is escaped)
    const nul = typeof body === 'string' && body.includes('\0');
    this.enter(this.entry!.start, [stageId, this.ns!, fn, head, request, attributes, response, value, ctx, maps, nul ? undefined : body, nul ? JSON.stringify(body) : undefined, chunks]);
  }

  reply(callId: number, replyJson: string): void {
    // (an answer the call's memory cannot hold fails that host call, where the script can catch it)
    const fits = this.driver.fits(replyJson);
    this.enter(this.entry!.reply, [callId, fits ? replyJson : JSON.stringify({ ok: false, error: { code: ERRORS.SCRIPT_OUT_OF_MEMORY.code, message: tooLarge('the host call', replyJson, this.driver.options.memoryLimitMb) } })]);
  }

  cancel(stageId: number): void {
    this.enter(this.entry!.cancel, [stageId]);
  }

  at(stageId: number): string {
    return this.enter(this.entry!.at, [stageId]);
  }

  drain(): string {
    const text = this.enter(this.entry!.drain, []);
    // (drain always answers a JSON text: none comes back when the context's heap had no room for
    // it, or for its copy out, and QuickJS could not even make the error)
    if (text === '') throw this.driver.failure({ name: 'InternalError', message: 'out of memory' });
    return text;
  }

  dispose(): void {
    try {
      for (const h of [this.ns, ...this.namespaces, ...Object.values(this.entry ?? {})]) if (h?.alive) h.dispose();
      this.driver.contextBytes -= this.bytes;
      this.bytes = 0;
      if (this.ctx.alive) this.closed();
      this.ctx.dispose();
    } catch {
      // a context left broken by out-of-memory or an interrupt can fail to free: the module is suspect
      this.driver.poisoned = true;
    }
  }
}
