/**
 * The vm2 engine: V8 speed for trusted scripts. Each (app, source hash) gets its own VM. vm2's
 * timeout bounds loading a module; a call that runs past its deadline (synchronously or not) is
 * stopped by the pool terminating the worker, and a memory bomb by the worker's resourceLimits.
 */
import { VM, VMScript } from 'vm2';
import type { StageCall, StageOutput } from '../protocol';
import { EngineError, Lru, type LoadedModule, type SandboxDriver } from './driver';
import { transpile } from './transpile';
import { StageOutputCache } from './output-cache';
import { compileLocation } from '../../error-location';

interface Vm2Module extends LoadedModule {
  vm: VM;
  exportsObj: Record<string, unknown>;
}

export interface Vm2DriverOptions {
  adapterSource: string;
  host: (op: string, argsJson: string) => string;
  maxContexts?: number;
}

/**
 * Run in every new VM before the adapter. `Buffer` is a host object vm2 proxies into its sandboxes
 * (the bridge behind most vm2 advisories; QuickJS has none, so portable scripts cannot use it).
 * `Atomics.waitAsync` schedules a callback on the worker's event loop after the call has ended:
 * a spin there would stall the next call on this worker, whichever app it belongs to.
 */
const HARDEN = new VMScript(
  "'use strict'; delete globalThis.Buffer; if (typeof Atomics === 'object') delete Atomics.waitAsync;",
  'scriptable-api:harden.js',
);
/**
 * Stack traces inside a sandbox: vm2 hides host frames but prints every frame as `CallSite {}`;
 * this prints the sandbox's own frames as V8 does (`at f (orders.js:5:12)`) so a failure can name
 * its script line. Host frames have no file name here and are left out.
 */
const STACKS = new VMScript(
  `Error.prepareStackTrace = function (e, sites) {
    var out;
    try { out = String(e && e.name || 'Error'); var m = e && e.message; if (m) out += ': ' + String(m); } catch (x) { out = 'Error'; }
    for (var i = 0; i < sites.length; i++) {
      try {
        var s = sites[i], file = s.getFileName();
        if (typeof file !== 'string' || file === '') continue;
        var fn = s.getFunctionName(), loc = file + ':' + s.getLineNumber() + ':' + s.getColumnNumber();
        out += '\\n    at ' + (fn ? fn + ' (' + loc + ')' : loc);
      } catch (x) {}
    }
    return out;
  };`,
  'scriptable-api:stacks.js',
);

/** A compile (or load) error of script `name`, with its location when the engine gave one. */
function compileError(name: string, e: unknown): EngineError {
  const err = e as { name?: unknown; message?: unknown; stack?: unknown } | undefined;
  const message = String(err?.message ?? e);
  const stack = typeof err?.stack === 'string' ? err.stack : undefined;
  return new EngineError('SCRIPT_COMPILE_ERROR', `${name}: ${message}`, {
    name: typeof err?.name === 'string' ? err.name : 'Error',
    location: compileLocation(name, message, stack),
  });
}

const INVOKE = new VMScript('__sa.invoke(__sa_mod[__sa_fn], __sa_in.head, __sa_in.request, __sa_in.attributes, __sa_in.response, __sa_in.value)', 'scriptable-api:invoke.js');
const COLLECT = new VMScript('__sa.collect()', 'scriptable-api:collect.js');

function isTimeout(e: unknown): boolean {
  return /Script execution timed out/i.test(String((e as Error)?.message));
}

export class Vm2Driver implements SandboxDriver {
  readonly poisoned = false;
  private readonly cache: Lru<string, Vm2Module>;
  private readonly adapter: VMScript;
  /** Stage outputs parsed once per text (shared and frozen: see output-cache.ts). */
  private readonly outputs = new StageOutputCache();

  constructor(private readonly options: Vm2DriverOptions) {
    this.cache = new Lru(options.maxContexts ?? 256, () => undefined);
    this.adapter = new VMScript(options.adapterSource, 'scriptable-api:adapter.js');
  }

  load(appId: string, name: string, hash: string, source: string, deadline = Date.now() + 10_000): LoadedModule {
    const key = `${appId}\u0000${hash}`;
    const cached = this.cache.get(key);
    if (cached) return cached;
    let script: VMScript;
    try {
      const code = transpile(name, source, true);
      script = new VMScript(
        `(function () { 'use strict'; var module = { exports: {} }; var exports = module.exports;\n${code}\n;return module.exports; })()`,
        { filename: name, lineOffset: -1 }, // (the wrapper's first line: the script's lines keep their numbers)
      ).compile();
    } catch (e) {
      throw compileError(name, e);
    }
    const vm = new VM({ timeout: Math.max(1, deadline - Date.now()), allowAsync: true, eval: false, wasm: false, sandbox: {} });
    vm.run(HARDEN);
    vm.run(STACKS);
    vm.setGlobal('__host', (op: string, args: string) => this.options.host(String(op), String(args)));
    vm.run(this.adapter);
    let exportsObj: Record<string, unknown>;
    try {
      exportsObj = vm.run(script) as Record<string, unknown>;
    } catch (e) {
      if (isTimeout(e)) throw new EngineError('SCRIPT_TIMEOUT', 'The script timed out while loading');
      throw compileError(name, e);
    }
    vm.setGlobal('__sa_mod', exportsObj);
    const mod: Vm2Module = { appId, hash, vm, exportsObj };
    this.cache.set(key, mod, `${appId}\u0000${name}`);
    return mod;
  }

  async invoke(loaded: LoadedModule, fn: string, call: StageCall, deadline: number): Promise<StageOutput> {
    const m = loaded as Vm2Module;
    if (typeof m.exportsObj[fn] !== 'function') {
      throw new EngineError('FUNCTION_NOT_FOUND', `The script does not export a function named '${fn}'`);
    }
    const { vm } = m;
    try {
      vm.setGlobal('__sa_fn', fn);
      vm.setGlobal('__sa_in', { head: call.head, request: call.request, attributes: call.attributes, response: call.response, value: call.value });
      // Stages run without vm2's per-run timeout: it starts a watchdog for every run, which was
      // most of a stage's cost (vm2 served 0.47x plain Express with it, 0.82x without). A script
      // that never returns — synchronously, in a promise continuation or in a getter of its
      // result — is stopped by the pool terminating this worker at the deadline.
      vm.timeout = undefined;
      vm.run(INVOKE);
      // Promise continuations are V8 microtasks of this worker: one macrotask turn drains them.
      await new Promise((resolve) => setImmediate(resolve));
      const out = this.outputs.parse(String(vm.run(COLLECT)));
      if (Date.now() >= deadline) throw new EngineError('SCRIPT_TIMEOUT', 'The script timed out');
      return out;
    } catch (e) {
      if (e instanceof EngineError) throw e;
      if (isTimeout(e)) {
        this.cache.delete(`${m.appId}\u0000${m.hash}`);
        throw new EngineError('SCRIPT_TIMEOUT', 'The script timed out');
      }
      throw new EngineError('ENGINE_FAILURE', (e as Error)?.message ?? String(e));
    }
  }
}
