/**
 * The default engine: QuickJS compiled to WebAssembly (quickjs-emscripten). Each (app, source
 * hash) gets its own runtime + context, with a memory limit and an interrupt deadline that also
 * covers promise continuations. ES modules load natively; TypeScript is type-stripped first.
 *
 * Memory: QuickJS's own limit (`setMemoryLimit`) only bounds single allocations in this
 * WebAssembly build (emscripten has no malloc_usable_size, so the runtime's byte count never
 * accumulates: justjake/quickjs-emscripten#255, #271). The real bound is the WebAssembly heap
 * itself: the driver hands the module a `WebAssembly.Memory` whose maximum is the call's limit
 * plus room for the cached contexts, so a bomb makes malloc fail inside QuickJS ("out of
 * memory"), the call fails with SCRIPT_OUT_OF_MEMORY and the worker is replaced. A worker whose
 * heap (which never shrinks) leaves less than one limit of room is recycled after its call.
 */
import {
  newQuickJSWASMModuleFromVariant,
  newVariant,
  shouldInterruptAfterDeadline,
  type QuickJSContext,
  type QuickJSHandle,
  type QuickJSRuntime,
  type QuickJSWASMModule,
} from 'quickjs-emscripten-core';
import releaseSync from '@jitl/quickjs-wasmfile-release-sync';
import type { StageCall, StageOutput } from '../protocol';
import { EngineError, Lru, type LoadedModule, type SandboxDriver } from './driver';
import { transpile } from './transpile';
import { callForText, newString } from './quickjs-fast';
import { StageOutputCache } from './output-cache';
import { compileLocation } from '../../error-location';

interface QuickJsModule extends LoadedModule {
  rt: QuickJSRuntime;
  ctx: QuickJSContext;
  ns: QuickJSHandle;
  run: QuickJSHandle;
  collect: QuickJSHandle;
  /** Handles of the exported functions called so far (the namespace is immutable). */
  fns: Map<string, QuickJSHandle>;
  /** Short texts passed again and again (stage heads, '{}', ''), as QuickJS strings. */
  texts: Map<string, QuickJSHandle>;
  /** The request text of the last stage, kept for the job's later stages in this context. */
  request?: { text: string; handle: QuickJSHandle };
  /** The context cache's key: app and source hash. */
  key: string;
  /** The deadline the runtime's interrupt handler enforces now. */
  deadline: number;
}

export interface QuickJsDriverOptions {
  memoryLimitMb: number;
  adapterSource: string;
  /** The synchronous host bridge: (op, argsJson) => resultJson. */
  host: (op: string, argsJson: string) => string;
  maxContexts?: number;
  /** A compiled `WebAssembly.Module` of the QuickJS build (lib/runtime/quickjs-wasm.ts); absent: loaded from its file. */
  wasmModule?: object;
}

const MiB = 1024 * 1024;
const PAGE = 64 * 1024;
/** Heap room, beyond one call's limit, for the adapter, the runtime and the cached contexts (~200 KiB each). */
const HEAP_HEADROOM_MB = 96;
/** wasm32 emscripten builds address at most 2 GiB. */
const MAX_HEAP_MB = 2048;

/** The part of WebAssembly.Memory the driver uses (the TypeScript lib of this package has no WebAssembly types). */
interface WasmMemory {
  readonly buffer: ArrayBuffer;
  grow(delta: number): number;
}
const WasmMemoryCtor = (globalThis as unknown as { WebAssembly: { Memory: new (d: { initial: number; maximum: number }) => WasmMemory } }).WebAssembly.Memory;

/** Texts up to this length are kept as QuickJS strings per context, up to TEXT_CACHE of them. */
const TEXT_CACHE_MAX_LENGTH = 512;
const TEXT_CACHE = 32;

/** False when the runtime could not be freed (QuickJS assertion, WebAssembly abort): the module is suspect. */
function disposeModule(m: QuickJsModule): boolean {
  try {
    const handles = [m.ns, m.run, m.collect, m.request?.handle, ...(m.fns?.values() ?? []), ...(m.texts?.values() ?? [])];
    for (const h of handles) if (h?.alive) h.dispose();
    m.ctx.dispose();
    m.rt.dispose();
    return true;
  } catch {
    // a context left broken by out-of-memory or an interrupted job can fail to dispose
    return false;
  }
}

function errorText(ctx: QuickJSContext, handle: QuickJSHandle): { name: string; message: string; stack?: string } {
  const e = ctx.dump(handle) as unknown;
  handle.dispose();
  if (e && typeof e === 'object') {
    const o = e as { name?: unknown; message?: unknown; stack?: unknown };
    return { name: String(o.name ?? 'Error'), message: String(o.message ?? ''), ...(typeof o.stack === 'string' ? { stack: o.stack } : {}) };
  }
  return { name: 'Error', message: String(e) };
}

/** A compile error of script `name` with its location (QuickJS gives `at name:line:column` frames). */
function compileError(name: string, err: { name: string; message: string; stack?: string }, message: string): EngineError {
  return new EngineError('SCRIPT_COMPILE_ERROR', message, { name: err.name, location: compileLocation(name, err.message, err.stack) });
}

export class QuickJsDriver implements SandboxDriver {
  poisoned = false;
  private readonly cache: Lru<string, QuickJsModule>;
  /** A heap growth was refused during the current stage: the script ran into the memory cap. */
  private heapFull = false;
  /** The WebAssembly heap's size in bytes (it only grows): kept by the memory's grow wrapper. */
  private heapBytes: number;
  /** Stage outputs parsed once per text (shared and frozen: see output-cache.ts). */
  private readonly outputs = new StageOutputCache();

  private constructor(
    private readonly wasm: QuickJSWASMModule,
    private readonly options: QuickJsDriverOptions,
    private readonly memory: WasmMemory,
    private readonly heapCapBytes: number,
  ) {
    this.heapBytes = memory.buffer.byteLength; // (`memory` stays readable for tests: test/helpers/quickjs-heap.js)
    this.cache = new Lru(options.maxContexts ?? 256, (m) => this.dispose(m));
  }

  static async create(options: QuickJsDriverOptions): Promise<QuickJsDriver> {
    const capMb = Math.min(MAX_HEAP_MB, Math.max(1, options.memoryLimitMb) + HEAP_HEADROOM_MB);
    const memory = new WasmMemoryCtor({ initial: 256, maximum: Math.ceil((capMb * MiB) / PAGE) });
    const wasm = await newQuickJSWASMModuleFromVariant(newVariant(releaseSync, {
        wasmMemory: memory,
        ...(options.wasmModule ? { wasmModule: options.wasmModule as never } : {}),
        // A QuickJS assertion (e.g. freeing a runtime left inconsistent by an interrupt) is caught
        // and poisons the worker; emscripten's own report of it must not reach the host's stderr.
        emscriptenModule: { printErr: () => undefined, print: () => undefined } as object,
      }));
    const driver = new QuickJsDriver(wasm, options, memory, capMb * MiB);
    // emscripten grows the heap with memory.grow() and turns a refusal into a failed malloc.
    // The heap's size is kept here too: reading memory.buffer after every stage costs more.
    const grow = memory.grow.bind(memory);
    memory.grow = (delta: number) => {
      try {
        const pages = grow(delta);
        driver.heapBytes = memory.buffer.byteLength;
        return pages;
      } catch (e) {
        driver.heapFull = true;
        throw e;
      }
    };
    return driver;
  }

  private dispose(m: QuickJsModule): void {
    if (!disposeModule(m)) this.poisoned = true;
  }

  /** After a stage: recycle the worker when its heap is full or leaves less than one limit of room. */
  private checkHeap(): void {
    if (this.heapFull || this.heapBytes > this.heapCapBytes - this.options.memoryLimitMb * MiB) this.poisoned = true;
  }

  private outOfMemory(): never {
    this.poisoned = true;
    throw new EngineError('SCRIPT_OUT_OF_MEMORY', `The script ran out of memory (limit ${this.options.memoryLimitMb} MiB)`);
  }

  /** Classify an exception that escaped the adapter: interrupts, out-of-memory, stack overflow. */
  private fail(m: QuickJsModule, err: { name: string; message: string }, deadline: number, key?: string): never {
    if (key) this.drop(key, m);
    this.checkHeap();
    if (this.heapFull && err.message !== 'interrupted') this.outOfMemory();
    if (/out of memory/i.test(err.message)) {
      this.poisoned = true;
      throw new EngineError('SCRIPT_OUT_OF_MEMORY', `The script ran out of memory (limit ${this.options.memoryLimitMb} MiB)`);
    }
    if (Date.now() >= deadline || err.message === 'interrupted') {
      throw new EngineError('SCRIPT_TIMEOUT', 'The script timed out');
    }
    throw new EngineError('ENGINE_FAILURE', `${err.name}: ${err.message}`);
  }

  private drop(key: string, m: QuickJsModule): void {
    this.cache.delete(key);
    this.dispose(m);
  }

  load(appId: string, name: string, hash: string, source: string, deadline = Date.now() + 10_000): LoadedModule {
    const key = `${appId}\u0000${hash}`;
    const cached = this.cache.get(key);
    if (cached) return cached;
    let code: string;
    try {
      code = transpile(name, source, false);
    } catch (e) {
      const err = { name: 'SyntaxError', message: String((e as Error)?.message) };
      throw compileError(name, err, `${name}: ${err.message}`);
    }
    this.heapFull = false;
    const rt = this.wasm.newRuntime();
    rt.setMemoryLimit(this.options.memoryLimitMb * 1024 * 1024);
    rt.setMaxStackSize(512 * 1024);
    rt.setInterruptHandler(shouldInterruptAfterDeadline(deadline));
    const ctx = rt.newContext();
    const partial = { appId, hash, key, deadline, rt, ctx, fns: new Map(), texts: new Map() } as unknown as QuickJsModule;
    try {
      const host = ctx.newFunction('__host', (opH, argsH) => ctx.newString(this.options.host(ctx.getString(opH), ctx.getString(argsH))));
      ctx.setProp(ctx.global, '__host', host);
      host.dispose();
      // the adapter lays its per-stage records out for QuickJS (prelude.js: IS_QUICKJS)
      const engine = ctx.newString('quickjs');
      ctx.setProp(ctx.global, '__saEngine', engine);
      engine.dispose();
      const adapter = ctx.evalCode(this.options.adapterSource, 'scriptable-api:adapter.js');
      if (adapter.error) this.setupFailed(partial, 'adapter', errorText(ctx, adapter.error), deadline);
      adapter.value.dispose();
      const sa = ctx.getProp(ctx.global, '__sa');
      partial.run = ctx.getProp(sa, 'run');
      partial.collect = ctx.getProp(sa, 'collect');
      sa.dispose();
      const mod = ctx.evalCode(code, name, { type: 'module' });
      if (mod.error) this.loadFailed(partial, errorText(ctx, mod.error), name, deadline);
      partial.ns = this.settleModule(partial, mod.value, name, deadline);
    } catch (e) {
      this.dispose(partial);
      this.checkHeap();
      throw e;
    }
    this.checkHeap();
    this.cache.set(key, partial, `${appId}\u0000${name}`);
    return partial;
  }

  /** Our own set-up code failed: a timeout or out-of-memory (interrupted while loading), else an engine failure. */
  private setupFailed(m: QuickJsModule, what: string, err: { name: string; message: string }, deadline: number): never {
    if (this.heapFull || /out of memory|interrupted/i.test(err.message) || Date.now() >= deadline) this.fail(m, err, deadline);
    throw new EngineError('ENGINE_FAILURE', `${what}: ${err.name}: ${err.message}`);
  }

  /** The module failed while loading: a timeout or out-of-memory, else a compile error. */
  private loadFailed(m: QuickJsModule, err: { name: string; message: string; stack?: string }, name: string, deadline: number): never {
    if (this.heapFull || /out of memory|interrupted/i.test(err.message) || Date.now() >= deadline) this.fail(m, err, deadline);
    throw compileError(name, err, `${name}: ${err.name}: ${err.message}`);
  }

  /** A module with top-level await evaluates to a promise of its namespace. */
  private settleModule(m: QuickJsModule, value: QuickJSHandle, name: string, deadline: number): QuickJSHandle {
    const { ctx, rt } = m;
    const state = ctx.getPromiseState(value);
    if (state.type === 'fulfilled' && state.notAPromise) return value;
    const jobs = rt.executePendingJobs(-1);
    if (jobs.error) {
      value.dispose();
      this.loadFailed(m, errorText(ctx, jobs.error), name, deadline);
    }
    const settled = ctx.getPromiseState(value);
    value.dispose();
    if (settled.type === 'fulfilled') return settled.value;
    if (settled.type === 'rejected') this.loadFailed(m, errorText(ctx, settled.error), name, deadline);
    if (Date.now() >= deadline) throw new EngineError('SCRIPT_TIMEOUT', 'The script timed out while loading');
    throw new EngineError('SCRIPT_COMPILE_ERROR', `${name}: top-level await never settled`);
  }

  /**
   * Make room for a stage's texts. Called once before the stage takes them, never in between: a
   * turnover while taking them would free a text the stage already holds.
   */
  private roomForTexts(m: QuickJsModule, count: number): void {
    if (m.texts.size + count <= TEXT_CACHE) return;
    for (const h of m.texts.values()) h.dispose();
    m.texts.clear();
  }

  /**
   * A QuickJS string for a text that comes back often (kept), or a new one for a long text: the
   * caller disposes a handle made for a text longer than TEXT_CACHE_MAX_LENGTH.
   */
  private text(m: QuickJsModule, value: string): QuickJSHandle {
    if (value.length > TEXT_CACHE_MAX_LENGTH) return newString(m.ctx, value);
    let handle = m.texts.get(value);
    if (!handle) {
      handle = m.ctx.newString(value);
      m.texts.set(value, handle);
    }
    return handle;
  }

  /** The request text as a QuickJS string: the same one for every stage of a job in this context. */
  private requestText(m: QuickJsModule, value: string): QuickJSHandle {
    if (m.request?.text === value) return m.request.handle;
    m.request?.handle.dispose();
    m.request = { text: value, handle: newString(m.ctx, value) };
    return m.request.handle;
  }

  /** Runs the stage and the promise jobs it leaves to the end, so it answers directly (throws EngineError). */
  invoke(loaded: LoadedModule, fn: string, call: StageCall, deadline: number): StageOutput {
    const m = loaded as QuickJsModule;
    const key = m.key;
    const { ctx, rt } = m;
    this.heapFull = false;
    if (m.deadline !== deadline) {
      // (the stages of one job share its deadline: a hooks script's context is set once per job)
      rt.setInterruptHandler(shouldInterruptAfterDeadline(deadline));
      m.deadline = deadline;
    }
    let fnH = m.fns.get(fn);
    if (!fnH) {
      fnH = ctx.getProp(m.ns, fn);
      if (ctx.typeof(fnH) !== 'function') {
        fnH.dispose();
        throw new EngineError('FUNCTION_NOT_FOUND', `The script does not export a function named '${fn}'`);
      }
      if (m.fns.size < 64) m.fns.set(fn, fnH);
    }
    const owned = m.fns.get(fn) !== fnH ? fnH : undefined;
    this.roomForTexts(m, 4);
    const head = this.text(m, call.head);
    const attributes = this.text(m, call.attributes);
    const response = this.text(m, call.response);
    const value = this.text(m, call.value);
    const called = callForText(ctx, m.run, [fnH, head, this.requestText(m, call.request), attributes, response, value]);
    owned?.dispose();
    if (call.head.length > TEXT_CACHE_MAX_LENGTH) head.dispose();
    if (call.attributes.length > TEXT_CACHE_MAX_LENGTH) attributes.dispose();
    if (call.response.length > TEXT_CACHE_MAX_LENGTH) response.dispose();
    if (call.value.length > TEXT_CACHE_MAX_LENGTH) value.dispose();
    if (called.error) this.fail(m, errorText(ctx, called.error), deadline, key);
    let json = called.text;
    if (json === '' || rt.hasPendingJob()) {
      // the stage waits on a promise, or settled but left promise jobs behind (a floating
      // promise chain): run them, then collect the stage as they left it
      while (rt.hasPendingJob()) {
        const jobs = rt.executePendingJobs(-1);
        if (jobs.error) this.fail(m, errorText(ctx, jobs.error), deadline, key);
      }
      const collected = callForText(ctx, m.collect, []);
      if (collected.error) this.fail(m, errorText(ctx, collected.error), deadline, key);
      json = collected.text;
    }
    const out = this.outputs.parse(json);
    if (Date.now() >= deadline) this.fail(m, { name: 'InternalError', message: 'interrupted' }, deadline, key);
    // A refused heap growth ends a call that did not return normally as out-of-memory: the script
    // may see the failure as a thrown null, or as a promise chain that silently stopped (pending).
    const outOfMemory = this.heapFull
      ? out.status !== 'value'
      : out.status === 'error' && out.error?.name === 'InternalError' && /out of memory/i.test(out.error.message);
    if (outOfMemory) this.fail(m, out.error ?? { name: 'InternalError', message: 'out of memory' }, deadline, key);
    this.checkHeap();
    return out;
  }
}
