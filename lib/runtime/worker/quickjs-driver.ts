/**
 * The default engine: QuickJS compiled to WebAssembly (quickjs-emscripten). Each (app, source
 * hash) gets its own runtime + context, with a memory limit and an interrupt deadline that also
 * covers promise continuations. ES modules load natively; TypeScript is type-stripped first.
 */
import {
  newQuickJSWASMModuleFromVariant,
  shouldInterruptAfterDeadline,
  type QuickJSContext,
  type QuickJSHandle,
  type QuickJSRuntime,
  type QuickJSWASMModule,
} from 'quickjs-emscripten-core';
import releaseSync from '@jitl/quickjs-wasmfile-release-sync';
import type { StageOutput } from '../protocol';
import { EngineError, Lru, type LoadedModule, type SandboxDriver } from './driver';
import { transpile } from './transpile';

interface QuickJsModule extends LoadedModule {
  rt: QuickJSRuntime;
  ctx: QuickJSContext;
  ns: QuickJSHandle;
  invoke: QuickJSHandle;
  collect: QuickJSHandle;
}

export interface QuickJsDriverOptions {
  memoryLimitMb: number;
  adapterSource: string;
  /** The synchronous host bridge: (op, argsJson) => resultJson. */
  host: (op: string, argsJson: string) => string;
  maxContexts?: number;
}

function disposeModule(m: QuickJsModule): void {
  try {
    for (const h of [m.ns, m.invoke, m.collect]) if (h.alive) h.dispose();
    m.ctx.dispose();
    m.rt.dispose();
  } catch {
    // a context left broken by out-of-memory can fail to dispose; the worker is replaced anyway
  }
}

function errorText(ctx: QuickJSContext, handle: QuickJSHandle): { name: string; message: string } {
  const e = ctx.dump(handle) as unknown;
  handle.dispose();
  if (e && typeof e === 'object') {
    const o = e as { name?: unknown; message?: unknown };
    return { name: String(o.name ?? 'Error'), message: String(o.message ?? '') };
  }
  return { name: 'Error', message: String(e) };
}

export class QuickJsDriver implements SandboxDriver {
  poisoned = false;
  private readonly cache: Lru<string, QuickJsModule>;

  private constructor(
    private readonly wasm: QuickJSWASMModule,
    private readonly options: QuickJsDriverOptions,
  ) {
    this.cache = new Lru(options.maxContexts ?? 256, disposeModule);
  }

  static async create(options: QuickJsDriverOptions): Promise<QuickJsDriver> {
    return new QuickJsDriver(await newQuickJSWASMModuleFromVariant(releaseSync), options);
  }

  /** Classify an exception that escaped the adapter: interrupts, out-of-memory, stack overflow. */
  private fail(m: QuickJsModule, err: { name: string; message: string }, deadline: number, key?: string): never {
    if (key) this.drop(key, m);
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
    disposeModule(m);
  }

  load(appId: string, name: string, hash: string, source: string, deadline = Date.now() + 10_000): LoadedModule {
    const key = `${appId}\u0000${hash}`;
    const cached = this.cache.get(key);
    if (cached) return cached;
    let code: string;
    try {
      code = transpile(name, source, false);
    } catch (e) {
      throw new EngineError('SCRIPT_COMPILE_ERROR', `${name}: ${(e as Error).message}`);
    }
    const rt = this.wasm.newRuntime();
    rt.setMemoryLimit(this.options.memoryLimitMb * 1024 * 1024);
    rt.setMaxStackSize(512 * 1024);
    rt.setInterruptHandler(shouldInterruptAfterDeadline(deadline));
    const ctx = rt.newContext();
    const partial = { appId, hash, rt, ctx } as QuickJsModule;
    try {
      const host = ctx.newFunction('__host', (opH, argsH) => ctx.newString(this.options.host(ctx.getString(opH), ctx.getString(argsH))));
      ctx.setProp(ctx.global, '__host', host);
      host.dispose();
      const adapter = ctx.evalCode(this.options.adapterSource, 'scriptable-api:adapter.js');
      if (adapter.error) throw new EngineError('ENGINE_FAILURE', `adapter: ${errorText(ctx, adapter.error).message}`);
      adapter.value.dispose();
      const sa = ctx.getProp(ctx.global, '__sa');
      partial.invoke = ctx.getProp(sa, 'invoke');
      partial.collect = ctx.getProp(sa, 'collect');
      sa.dispose();
      const mod = ctx.evalCode(code, name, { type: 'module' });
      if (mod.error) {
        const err = errorText(ctx, mod.error);
        if (/out of memory|interrupted/i.test(err.message) || Date.now() >= deadline) this.fail(partial, err, deadline);
        throw new EngineError('SCRIPT_COMPILE_ERROR', `${name}: ${err.name}: ${err.message}`);
      }
      partial.ns = this.settleModule(ctx, rt, mod.value, name, deadline);
    } catch (e) {
      disposeModule(partial);
      throw e;
    }
    this.cache.set(key, partial);
    return partial;
  }

  /** A module with top-level await evaluates to a promise of its namespace. */
  private settleModule(ctx: QuickJSContext, rt: QuickJSRuntime, value: QuickJSHandle, name: string, deadline: number): QuickJSHandle {
    const state = ctx.getPromiseState(value);
    if (state.type === 'fulfilled' && state.notAPromise) return value;
    const jobs = rt.executePendingJobs(-1);
    if (jobs.error) throw new EngineError('SCRIPT_COMPILE_ERROR', `${name}: ${errorText(ctx, jobs.error).message}`);
    const settled = ctx.getPromiseState(value);
    value.dispose();
    if (settled.type === 'fulfilled') return settled.value;
    if (settled.type === 'rejected') throw new EngineError('SCRIPT_COMPILE_ERROR', `${name}: ${errorText(ctx, settled.error).message}`);
    if (Date.now() >= deadline) throw new EngineError('SCRIPT_TIMEOUT', 'The script timed out while loading');
    throw new EngineError('SCRIPT_COMPILE_ERROR', `${name}: top-level await never settled`);
  }

  async invoke(loaded: LoadedModule, fn: string, inputJson: string, deadline: number): Promise<StageOutput> {
    const m = loaded as QuickJsModule;
    const key = `${m.appId}\u0000${m.hash}`;
    const { ctx, rt } = m;
    rt.setInterruptHandler(shouldInterruptAfterDeadline(deadline));
    const fnH = ctx.getProp(m.ns, fn);
    if (ctx.typeof(fnH) !== 'function') {
      fnH.dispose();
      throw new EngineError('FUNCTION_NOT_FOUND', `The script does not export a function named '${fn}'`);
    }
    const inH = ctx.newString(inputJson);
    const called = ctx.callFunction(m.invoke, ctx.undefined, fnH, inH);
    fnH.dispose();
    inH.dispose();
    if (called.error) this.fail(m, errorText(ctx, called.error), deadline, key);
    called.value.dispose();
    while (rt.hasPendingJob()) {
      const jobs = rt.executePendingJobs(-1);
      if (jobs.error) this.fail(m, errorText(ctx, jobs.error), deadline, key);
    }
    const collected = ctx.callFunction(m.collect, ctx.undefined);
    if (collected.error) this.fail(m, errorText(ctx, collected.error), deadline, key);
    const json = ctx.getString(collected.value);
    collected.value.dispose();
    const out = JSON.parse(json) as StageOutput;
    if (Date.now() >= deadline) this.fail(m, { name: 'InternalError', message: 'interrupted' }, deadline, key);
    if (out.status === 'error' && out.error?.name === 'InternalError' && /out of memory/i.test(out.error.message)) {
      this.fail(m, out.error, deadline, key);
    }
    return out;
  }
}
