/**
 * The vm2 engine: V8 speed for trusted scripts. Each (app, script version) gets its own VM. vm2's
 * timeout bounds loading a module. Stage code runs without a per-run timeout (vm2 starts a
 * watchdog for every timed run, which cost more than the stage itself): a script that never
 * yields is stopped by the pool terminating its worker, which also ends the other calls that
 * worker was running, and a memory bomb by the worker's resourceLimits.
 */
import { VM, VMScript } from 'vm2';
import { getHeapStatistics } from 'node:v8';
import { EngineError, type EngineContext, type HostFn, type SandboxDriver } from './driver';

/**
 * Run in every new VM before the adapter. `Buffer` is a host object vm2 proxies into its sandboxes
 * (the bridge behind most vm2 advisories; QuickJS has none, so portable scripts cannot use it).
 * `Atomics.waitAsync` schedules a callback on the worker's event loop after the call has ended:
 * a spin there would stall the other calls on this worker, whichever app they belong to.
 */
const HARDEN = new VMScript(
  "'use strict'; delete globalThis.Buffer; if (typeof Atomics === 'object') delete Atomics.waitAsync;",
  'scriptable-api:harden.js',
);

interface Entry {
  start(...args: unknown[]): void;
  reply(callId: number, json: string): void;
  drain(): string;
  cancel(stageId: number): void;
}

function isTimeout(e: unknown): boolean {
  return /Script execution timed out/i.test(String((e as Error)?.message));
}

export class Vm2Driver implements SandboxDriver {
  readonly poisoned = false;
  private readonly adapter: VMScript;

  constructor(adapterSource: string, private readonly loadTimeoutMs: () => number) {
    this.adapter = new VMScript(adapterSource, 'scriptable-api:adapter.js');
  }

  async open(name: string, code: string, host: HostFn, moduleStarts?: () => void): Promise<EngineContext> {
    let script: VMScript;
    try {
      script = new VMScript(`(function () { 'use strict'; var module = { exports: {} }; var exports = module.exports;\n${code}\n;return module.exports; })()`, name).compile();
    } catch (e) {
      throw new EngineError('SCRIPT_COMPILE_ERROR', `${name}: ${(e as Error).message}`);
    }
    const heapBefore = getHeapStatistics().used_heap_size;
    const vm = new VM({ allowAsync: true, eval: false, wasm: false, sandbox: {} });
    vm.run(HARDEN);
    const entry = (vm.run(this.adapter) as (h: HostFn) => Entry)((id, op, args, async) => host(Number(id), String(op), String(args), async === true));
    let exportsObj: Record<string, unknown>;
    moduleStarts?.();
    try {
      vm.timeout = Math.max(1, this.loadTimeoutMs());
      exportsObj = vm.run(script) as Record<string, unknown>;
    } catch (e) {
      if (isTimeout(e)) throw new EngineError('SCRIPT_TIMEOUT', 'The script timed out while loading');
      throw new EngineError('SCRIPT_COMPILE_ERROR', `${name}: ${(e as Error)?.message ?? String(e)}`);
    } finally {
      vm.timeout = undefined;
    }
    const bytes = Math.max(512 * 1024, getHeapStatistics().used_heap_size - heapBefore);
    const guard = <T>(f: () => T): T => {
      try {
        return f();
      } catch (e) {
        throw new EngineError('ENGINE_FAILURE', (e as Error)?.message ?? String(e));
      }
    };
    return {
      bytes,
      jobsRunLater: true,
      hasFunction: (fn) => typeof exportsObj[fn] === 'function',
      start: (id, fn, head, request, attributes, response, value) => guard(() => entry.start(id, exportsObj, fn, head, request, attributes, response, value)),
      reply: (callId, json) => guard(() => entry.reply(callId, json)),
      cancel: (id) => guard(() => entry.cancel(id)),
      drain: () => guard(() => String(entry.drain())),
      dispose: () => undefined,
    };
  }
}
