/*
 * Sandbox adapter module: ArrayBuffers that keep their size.
 *
 * Every context of a QuickJS worker lives in one WebAssembly heap. The QuickJS that
 * quickjs-emscripten 0.32 ships (2025-09-13+f1139494) reads a buffer's length in several
 * built-ins before it calls back into script code (the typed array constructor reads
 * `new.target.prototype`, a getter; TypedArray.prototype.with calls the value's valueOf; sort
 * calls the comparator) and uses that length after the call: a script that shrank or detached
 * the buffer in the callback kept a typed array over freed heap, which the runtime hands to other
 * apps' contexts and requests (they could be read and written). A script can change a buffer's
 * size only with resize, transfer and transferToFixedLength (SharedArrayBuffer: grow): they are
 * removed before any script runs, on every engine (a script behaves the same on both).
 * `maxByteLength` still makes a buffer `resizable`, which then keeps its size.
 */
import { G, hasOwn, makeError } from './prelude';

var FIXED: Array<[string, string]> = [
  ['ArrayBuffer', 'resize'],
  ['ArrayBuffer', 'transfer'],
  ['ArrayBuffer', 'transferToFixedLength'],
  ['SharedArrayBuffer', 'grow'],
];
for (var i = 0; i < FIXED.length; i++) {
  var ctor = G[FIXED[i][0]];
  if (typeof ctor !== 'function') continue;
  var proto = (ctor as { prototype: { [name: string]: unknown } }).prototype;
  // (a built-in that cannot be removed stops the adapter: no script runs with it)
  if (!delete proto[FIXED[i][1]] || hasOwn(proto, FIXED[i][1])) throw makeError('Error', 'cannot remove ' + FIXED[i].join('.prototype.'));
}
