/*
 * Sandbox adapter module: an inert globalThis.FinalizationRegistry.
 *
 * The contexts of a worker share one QuickJS runtime, and its collector frees what a registry
 * watched during whichever call allocates next: the registry's cleanup callback would run inside
 * another app's call (its deadline, its errors, its host calls). The language lets an engine never
 * call cleanup callbacks; here none is ever called. register / unregister check their arguments
 * as the built-in does.
 */
import { G, defineHidden, defineProperty, isObj, makeError } from './prelude';

if (typeof G.FinalizationRegistry === 'function') {
  class FinalizationRegistry {
    constructor(cleanup: unknown) {
      if (typeof cleanup !== 'function') throw makeError('TypeError', 'FinalizationRegistry: cleanup must be callable');
    }

    register(target: unknown): void {
      if (!isObj(target)) throw makeError('TypeError', 'FinalizationRegistry.prototype.register: invalid target');
    }

    unregister(token: unknown): boolean {
      if (!isObj(token)) throw makeError('TypeError', 'FinalizationRegistry.prototype.unregister: invalid unregister token');
      return false;
    }
  }
  defineProperty(FinalizationRegistry.prototype, Symbol.toStringTag, { __proto__: null, value: 'FinalizationRegistry', writable: false, enumerable: false, configurable: true });
  defineHidden(G, 'FinalizationRegistry', FinalizationRegistry);
}
