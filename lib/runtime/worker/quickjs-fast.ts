/**
 * Fast paths into and out of QuickJS for the driver's per-stage work, with the library's public
 * API as the fallback.
 *
 * - newString: `TextEncoder.encodeInto` writes a long text's UTF-8 bytes straight into the
 *   WebAssembly heap in native code; quickjs-emscripten measures and encodes with emscripten's
 *   character-by-character JavaScript loops.
 * - callForText: calls a function and reads its string result without the library's per-call
 *   allocations (an Int32Array and a malloc for the argument pointers, lifetime objects for the
 *   result): ~1 µs of every stage.
 *
 * Both reach fields the library marks private (`module`, `ffi`, `ctx`, `memory`, present at
 * runtime in quickjs-emscripten-core 0.31 and 0.32), so they check for them once per context and
 * fall back to the public API when anything is missing.
 */
import type { QuickJSContext, QuickJSHandle } from 'quickjs-emscripten-core';

interface Internals {
  module: { HEAPU8: Uint8Array; _malloc(n: number): number; _free(p: number): void; UTF8ToString(ptr: number): string };
  ffi: {
    QTS_NewString(ctx: number, ptr: number): number;
    QTS_Call(ctx: number, fn: number, thisVal: number, argc: number, argv: number): number;
    QTS_ResolveException(ctx: number, value: number): number;
    QTS_GetString(ctx: number, value: number): number;
    QTS_FreeCString(ctx: number, ptr: number): void;
    QTS_FreeValuePointer(ctx: number, value: number): void;
  };
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
    const fns = ['QTS_NewString', 'QTS_Call', 'QTS_ResolveException', 'QTS_GetString', 'QTS_FreeCString', 'QTS_FreeValuePointer'] as const;
    const ok =
      c.module && typeof c.module._malloc === 'function' && typeof c.module._free === 'function' && c.module.HEAPU8 instanceof Uint8Array &&
      typeof c.module.UTF8ToString === 'function' &&
      c.ffi && fns.every((f) => typeof c.ffi![f] === 'function') && c.ctx && typeof c.ctx.value === 'number' &&
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

/** The result of callForText: the function's result as a string, or the exception it threw (the caller disposes it). */
export type TextResult = { text: string; error?: undefined } | { text?: undefined; error: QuickJSHandle };

const MAX_ARGS = 8;
/** One argument-pointer buffer per WebAssembly module, a view of it, and whether a call is using it. */
const argvs = new WeakMap<object, { ptr: number; busy: boolean; view: Int32Array | null }>();

/** `fn(...args)` with `this` undefined; its result converted to a string (as `context.getString`). */
export function callForText(context: QuickJSContext, fn: QuickJSHandle, args: QuickJSHandle[]): TextResult {
  const i = args.length <= MAX_ARGS ? internals(context) : null;
  let argv = i && argvs.get(i.module);
  if (i && !argv) {
    const ptr = i.module._malloc(MAX_ARGS * 4);
    if (ptr !== 0) argvs.set(i.module, (argv = { ptr, busy: false, view: null }));
  }
  if (!i || !argv || argv.busy) {
    // (a call made while another is running, from a host function, gets its own buffer)
    const r = context.callFunction(fn, context.undefined, args);
    if (r.error) return { error: r.error };
    const text = context.getString(r.value);
    r.value.dispose();
    return { text };
  }
  // (the view is made again only when a heap growth replaced the module's buffer)
  const buffer = i.module.HEAPU8.buffer;
  let heap = argv.view;
  if (heap === null || heap.buffer !== buffer) heap = argv.view = new Int32Array(buffer, argv.ptr, MAX_ARGS);
  for (let k = 0; k < args.length; k++) heap[k] = args[k].value as unknown as number;
  const ctx = i.ctx.value;
  argv.busy = true;
  let result: number;
  try {
    result = i.ffi.QTS_Call(ctx, fn.value as unknown as number, (context.undefined.value as unknown as number), args.length, argv.ptr);
  } finally {
    argv.busy = false;
  }
  const error = i.ffi.QTS_ResolveException(ctx, result);
  if (error) {
    i.ffi.QTS_FreeValuePointer(ctx, result);
    return { error: i.memory.heapValueHandle(error) };
  }
  const cstr = i.ffi.QTS_GetString(ctx, result);
  const text = i.module.UTF8ToString(cstr);
  i.ffi.QTS_FreeCString(ctx, cstr);
  i.ffi.QTS_FreeValuePointer(ctx, result);
  return { text };
}
