/**
 * Strings into QuickJS, faster than `context.newString` for long texts (request snapshots, stage
 * heads with results). quickjs-emscripten measures and encodes a string with emscripten's
 * character-by-character JavaScript loops; `TextEncoder.encodeInto` writes the UTF-8 bytes straight
 * into the WebAssembly heap in native code. It reaches fields the library marks private (`module`,
 * `ffi`, `ctx`, `memory`, present at runtime in quickjs-emscripten-core 0.31), so it checks for
 * them once per context and falls back to `newString` when they are missing.
 */
import type { QuickJSContext, QuickJSHandle } from 'quickjs-emscripten-core';

interface Internals {
  module: { HEAPU8: Uint8Array; _malloc(n: number): number; _free(p: number): void };
  ffi: { QTS_NewString(ctx: number, ptr: number): number };
  ctx: { value: number };
  memory: { heapValueHandle(ptr: number): QuickJSHandle };
}

const encoder = new TextEncoder();
/** Below this length newString's loops cost less than the extra calls. */
const MIN_LENGTH = 64;
const usable = new WeakMap<QuickJSContext, Internals | null>();

function internals(context: QuickJSContext): Internals | null {
  let i = usable.get(context);
  if (i === undefined) {
    const c = context as unknown as Partial<Internals>;
    const ok =
      c.module && typeof c.module._malloc === 'function' && typeof c.module._free === 'function' && c.module.HEAPU8 instanceof Uint8Array &&
      c.ffi && typeof c.ffi.QTS_NewString === 'function' && c.ctx && typeof c.ctx.value === 'number' &&
      c.memory && typeof c.memory.heapValueHandle === 'function';
    i = ok ? (c as Internals) : null;
    usable.set(context, i);
  }
  return i;
}

/** `context.newString(text)`, with the UTF-8 encoding done natively for long texts. */
export function newString(context: QuickJSContext, text: string): QuickJSHandle {
  const i = text.length >= MIN_LENGTH ? internals(context) : null;
  if (i === null) return context.newString(text);
  const size = text.length * 3 + 1; // (UTF-8 takes at most 3 bytes per UTF-16 unit)
  const ptr = i.module._malloc(size);
  if (ptr === 0) return context.newString(text); // (let the library report the failed allocation)
  try {
    const heap = i.module.HEAPU8; // (read after malloc: a heap growth replaces the view)
    const { written } = encoder.encodeInto(text, heap.subarray(ptr, ptr + size - 1));
    heap[ptr + written] = 0;
    return i.memory.heapValueHandle(i.ffi.QTS_NewString(i.ctx.value, ptr));
  } finally {
    i.module._free(ptr);
  }
}
