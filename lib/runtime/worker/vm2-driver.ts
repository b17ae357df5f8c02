/**
 * The vm2 engine: V8 speed for trusted scripts. Each (app, script version) gets its own VM. vm2's
 * timeout bounds loading a module. Stage code runs without a per-run timeout (vm2 starts a
 * watchdog for every timed run, which cost more than the stage itself): a script that never
 * yields is stopped by the pool terminating its worker, which also ends the other calls that
 * worker was running, and a memory bomb by the worker's resourceLimits.
 */
import { VM, VMScript } from 'vm2';
import { getHeapStatistics } from 'node:v8';
import { EngineError, engineFailure, type EngineContext, type HostFn, type ModuleCode, type SandboxDriver } from './driver';
import { compileLocation } from '../../error-location';
import { CONTINUATION_SCRIPT, type AdapterEntry } from '../protocol';

/**
 * Run in every new VM before the adapter. `Buffer` is a host object vm2 proxies into its sandboxes
 * (the bridge behind most vm2 advisories; QuickJS has none, so portable scripts cannot use it).
 * `Atomics.waitAsync` schedules a callback on the worker's event loop after the call has ended:
 * a spin there would stall the other calls on this worker, whichever app they belong to.
 */
const HARDEN = new VMScript(
  "'use strict'; delete globalThis.Buffer; if (typeof Atomics === 'object') delete Atomics.waitAsync;" +
    // (V8 makes them non-configurable: emptied and made read-only where they cannot be deleted)
    `for (const n of ${JSON.stringify(v8FlagGlobals())}) { const d = Object.getOwnPropertyDescriptor(globalThis, n);` +
    ' if (d && d.configurable) delete globalThis[n]; else if (d) Object.defineProperty(globalThis, n, { value: undefined, writable: false }); }',
  'scriptable-api:harden.js',
);

/**
 * What V8's flags put on every new context's global object when the process runs with them:
 * `gc` (`--expose-gc`, or the name `--expose-gc-as` gives) would let a script pause this worker's
 * whole heap for a full collection at will; `--expose-externalize-string` adds three test helpers.
 */
function v8FlagGlobals(): string[] {
  const names = ['gc', 'externalizeString', 'createExternalizableString', 'isOneByteString'];
  const args = [...process.execArgv, ...(process.env.NODE_OPTIONS ?? '').split(/\s+/)];
  for (const a of args) {
    const m = /^--expose[-_]gc[-_]as=(.+)$/.exec(a);
    if (m && /^[A-Za-z_$][\w$]*$/.test(m[1])) names.push(m[1]);
  }
  return names;
}

/**
 * Stack traces inside a sandbox: vm2 hides host frames but prints every frame as `CallSite {}`;
 * this prints the sandbox's own frames as V8 does (`at f (orders.js:5:12)`) so a failure can name
 * its script line. Host frames have no file name here and are left out.
 */
/** Binds the adapter's continuation functions as global consts (CONTINUATION_SCRIPT). */
const CONTINUATIONS = new VMScript(CONTINUATION_SCRIPT, 'scriptable-api:continuations.js');

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

/**
 * A compile (or load) error of script `name`, with its location when the engine gave one. Its
 * message is `name: ErrorName: message`, as the QuickJS driver writes it (a value thrown that is
 * no error is an `Error` there too).
 */
function compileError(name: string, e: unknown): EngineError {
  const err = e as { name?: unknown; message?: unknown; stack?: unknown } | undefined;
  const message = String(err?.message ?? e);
  const stack = typeof err?.stack === 'string' ? err.stack : undefined;
  const errorName = typeof err?.name === 'string' && err.name !== '' ? err.name : 'Error';
  return new EngineError('SCRIPT_COMPILE_ERROR', `${name}: ${errorName}: ${message}`, {
    name: errorName,
    location: compileLocation(name, message, stack),
  });
}

function isTimeout(e: unknown): boolean {
  return /Script execution timed out/i.test(String((e as Error)?.message));
}

export class Vm2Driver implements SandboxDriver {
  readonly poisoned = false;
  readonly jobsRunLater = true;
  private readonly adapter: VMScript;

  constructor(adapterSource: string, private readonly loadTimeoutMs: () => number) {
    this.adapter = new VMScript(adapterSource, 'scriptable-api:adapter.js');
  }

  /** Script `name` as a function returning its exports (a compile error: SCRIPT_COMPILE_ERROR). */
  private compile(name: string, code: string): VMScript {
    // a hashbang is allowed only at the very start of a script: inside the wrapper it becomes a comment
    const body = code.startsWith('#!') ? `//${code.slice(2)}` : code;
    try {
      return new VMScript(
        `(function () { 'use strict'; var module = { exports: {} }; var exports = module.exports;\n${body}\n;return module.exports; })()`,
        { filename: name, lineOffset: -1 }, // (the wrapper's first line: the script's lines keep their numbers)
      ).compile();
    } catch (e) {
      throw compileError(name, e);
    }
  }

  async open(name: string, code: string, host: HostFn, moduleStarts?: () => void, more: readonly ModuleCode[] = []): Promise<EngineContext> {
    const scripts = [{ name, code }, ...more].map((m) => ({ name: m.name, script: this.compile(m.name, m.code) }));
    const heapBefore = getHeapStatistics().used_heap_size;
    const vm = new VM({ allowAsync: true, eval: false, wasm: false, sandbox: {} });
    vm.run(HARDEN);
    vm.run(STACKS);
    const entry = (vm.run(this.adapter) as (h: HostFn) => AdapterEntry)((id, op, args, async) => host(Number(id), String(op), String(args), async === true));
    vm.run(CONTINUATIONS);
    const namespaces: Record<string, unknown>[] = [];
    moduleStarts?.();
    for (const { name, script } of scripts) {
      try {
        vm.timeout = Math.max(1, this.loadTimeoutMs());
        namespaces.push(vm.run(script) as Record<string, unknown>);
      } catch (e) {
        if (isTimeout(e)) throw new EngineError('SCRIPT_TIMEOUT', 'The script timed out'); // (the table's message, as on QuickJS)
        throw compileError(name, e);
      } finally {
        vm.timeout = undefined;
      }
    }
    // (one module: its exports; several: an array of them, by module)
    const ns = namespaces.length === 1 ? namespaces[0] : namespaces;
    const bytes = Math.max(512 * 1024, getHeapStatistics().used_heap_size - heapBefore);
    const guard = <T>(f: () => T): T => {
      try {
        return f();
      } catch (e) {
        throw engineFailure(e);
      }
    };
    return {
      bytes,
      // (its own exports only, as the adapter calls them: not what the object inherits, `toString`...)
      hasFunction: (fn, module = 0) => {
        const exportsObj = namespaces[module];
        return exportsObj !== undefined && Object.prototype.hasOwnProperty.call(exportsObj, fn) && typeof exportsObj[fn] === 'function';
      },
      start: (id, fn, head, request, attributes, response, value, ctx, maps, body, chunks) => guard(() => entry.start(id, ns, fn, head, request, attributes, response, value, ctx, maps, body, undefined, chunks)),
      reply: (callId, json) => guard(() => entry.reply(callId, json)),
      cancel: (id) => guard(() => entry.cancel(id)),
      at: (id) => guard(() => String(entry.at(id))),
      drain: () => guard(() => String(entry.drain())),
      dispose: () => undefined,
    };
  }
}
