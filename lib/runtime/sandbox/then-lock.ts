/*
 * Sandbox adapter module: Object.prototype.then, locked.
 *
 * The QuickJS build shipped resolves an async generator's results ({ value, done }, objects that
 * inherit from Object.prototype only) with a lookup of `then`: a getter a script put on
 * Object.prototype ran inside that resolution and could re-enter the generator, which failed an
 * assertion of the engine and aborted the worker's WebAssembly module: every app's calls on that
 * worker failed, and their contexts were gone. `then` on Object.prototype is made a
 * non-configurable accessor before any script runs: reading it gives undefined (as when it is
 * absent), assigning it (`o.then = f`) makes an own property of the object assigned to, as a
 * plain assignment does; redefining it on Object.prototype throws a TypeError. `'then' in {}` is
 * true.
 */
import { G, defineProperty, isObj } from './prelude';

defineProperty(G.Object.prototype, 'then', {
  __proto__: null,
  get: function (): undefined {
    return undefined;
  },
  set: function (this: unknown, value: unknown): void {
    if (isObj(this)) defineProperty(this, 'then', { __proto__: null, value: value, writable: true, enumerable: true, configurable: true });
  },
  enumerable: false,
  configurable: false,
});
