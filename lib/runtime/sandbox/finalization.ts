/*
 * Sandbox adapter module: an inert globalThis.FinalizationRegistry.
 *
 * The contexts of a worker share QuickJS runtimes (32 to one), and a collector frees what a registry
 * watched during whichever call allocates next: the registry's cleanup callback would run inside
 * another app's call (its deadline, its errors, its host calls). The language lets an engine never
 * call cleanup callbacks; here none is ever called. register / unregister check their arguments
 * as the built-in does.
 */
import { G, defineHidden, defineProperty, isObj, typeError } from './prelude';

/** The built-in's name, and the start of its methods' messages. */
var FR = 'FinalizationRegistry';
var FR_PROTO = FR + '.prototype.';
if (typeof G[FR] === 'function') {
  class FinalizationRegistry {
    constructor(cleanup: unknown) {
      if (typeof cleanup !== 'function') throw typeError(FR + ': cleanup must be callable');
    }

    register(target: unknown): void {
      if (!isObj(target)) throw typeError(FR_PROTO + 'register: invalid target');
    }

    unregister(token: unknown): boolean {
      if (!isObj(token)) throw typeError(FR_PROTO + 'unregister: invalid unregister token');
      return false;
    }
  }
  // (the bundle is minified: the class's own name would be whatever the minifier gave it)
  defineProperty(FinalizationRegistry, 'name', { __proto__: null, value: FR, writable: false, enumerable: false, configurable: true });
  defineProperty(FinalizationRegistry.prototype, Symbol.toStringTag, { __proto__: null, value: FR, writable: false, enumerable: false, configurable: true });
  defineHidden(G, FR, FinalizationRegistry);
}
