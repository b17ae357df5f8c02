/**
 * The QuickJS WebAssembly module, compiled once per process on the pool's thread and handed to
 * every QuickJS worker (a `WebAssembly.Module` crosses to a worker thread without a copy).
 *
 * Each worker compiling the bytes itself went through V8's per-process cache of compiled
 * modules, and a compile there can wait for V8's WebAssembly code GC, which needs every isolate
 * holding the module to answer; a worker blocked in `Atomics.wait` on a host call answers only
 * when the call ends. The workers the pool starts to stand in for blocked ones could then become
 * ready only as those calls ended: the likely cause of a 20 x 500 ms burst that, once under
 * full-suite load, took 20 x 500 ms / pool size (not reproduced in isolation).
 * With one module compiled here and kept for the process, a new worker only instantiates it, and
 * it also starts with the code V8 has already optimized for the others.
 */
import { readFileSync } from 'node:fs';

/** A compiled `WebAssembly.Module` (this package's TypeScript lib has no WebAssembly types). */
export type WasmModule = object;

interface WasmGlobal {
  Module: new (bytes: Uint8Array) => WasmModule;
}

let compiled: WasmModule | null | undefined;

/**
 * The compiled module, or undefined when it cannot be made here: the worker then loads the
 * module file itself, as quickjs-emscripten does by default.
 */
export function quickjsWasmModule(): WasmModule | undefined {
  if (compiled === undefined) {
    try {
      const file = require.resolve('@jitl/quickjs-wasmfile-release-sync/wasm');
      const wasm = (globalThis as unknown as { WebAssembly: WasmGlobal }).WebAssembly;
      compiled = new wasm.Module(readFileSync(file));
    } catch {
      compiled = null;
    }
  }
  return compiled ?? undefined;
}
