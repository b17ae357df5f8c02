/**
 * The QuickJS WebAssembly module, compiled once per process on the pool's thread and handed to
 * every QuickJS worker (a `WebAssembly.Module` crosses to a worker thread without a copy).
 *
 * A worker compiling the bytes itself goes through V8's per-process cache of compiled modules,
 * where a compile can wait for V8's WebAssembly code GC, which needs every isolate holding the
 * module to answer; a worker blocked in `Atomics.wait` on a host call answers only when the call
 * ends, so the workers the pool starts to stand in for blocked ones would become ready only as
 * those calls end. With one module compiled here and kept for the process, a new worker only
 * instantiates it, and starts with the code V8 has already optimized for the others.
 */
import { readFileSync } from 'node:fs';

/** A compiled `WebAssembly.Module` (this package's TypeScript lib has no WebAssembly types). */
export type WasmModule = object;

let compiled: WasmModule | null | undefined;

/**
 * The compiled module, or undefined when it cannot be made here: the worker then loads the
 * module file itself, as quickjs-emscripten does by default.
 */
export function quickjsWasmModule(): WasmModule | undefined {
  if (compiled === undefined) {
    try {
      const file = require.resolve('@jitl/quickjs-wasmfile-release-sync/wasm');
      const wasm = (globalThis as unknown as { WebAssembly: { Module: new (bytes: Uint8Array) => WasmModule } }).WebAssembly;
      compiled = new wasm.Module(readFileSync(file));
    } catch {
      compiled = null;
    }
  }
  return compiled ?? undefined;
}
