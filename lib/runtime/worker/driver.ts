/**
 * What an engine does inside a worker: load a script module into a context of its own (cached per
 * app and source hash, never shared between apps) and invoke one exported function through the
 * sandbox adapter. lib/runtime/worker/pipeline.ts drives the stages on top of it.
 */
import type { StageCall, StageOutput } from '../protocol';
import type { ErrorDetail } from '../../error-location';

export interface LoadedModule {
  readonly appId: string;
  readonly hash: string;
}

/** A failure of the engine rather than of the script's own code. */
export class EngineError extends Error {
  constructor(
    readonly errorName: 'SCRIPT_COMPILE_ERROR' | 'FUNCTION_NOT_FOUND' | 'SCRIPT_TIMEOUT' | 'SCRIPT_OUT_OF_MEMORY' | 'SCRIPT_STALLED' | 'ENGINE_FAILURE',
    message: string,
    /** Where it failed, when the engine knows (a compile error's `script.js:line:column`). */
    readonly detail?: ErrorDetail,
  ) {
    super(message);
    this.name = 'EngineError';
  }
}

export interface SandboxDriver {
  /** Compile or reuse the module; throws EngineError('SCRIPT_COMPILE_ERROR') on a bad source. */
  load(appId: string, name: string, hash: string, source: string, deadline: number): LoadedModule | Promise<LoadedModule>;
  /**
   * Call the export `fn` through the adapter's `__sa.invoke`: the StageOutput, or a promise of it
   * (an engine that settles every stage before it returns answers directly: the pipeline then
   * waits for nothing).
   */
  invoke(mod: LoadedModule, fn: string, call: StageCall, deadline: number): StageOutput | Promise<StageOutput>;
  /** True once the engine is unusable (after out-of-memory): the worker must be replaced. */
  readonly poisoned: boolean;
}

/**
 * A small LRU map used for context caches. A read only stamps its entry (moving it to the end of
 * a Map, a delete and an insert, cost more than the lookup itself on every stage); the least
 * recently used entry is looked for when one must go.
 */
export class Lru<K, V> {
  private readonly map = new Map<K, { value: V; used: number }>();
  private readonly slots = new Map<string, K>();
  private clock = 0;
  constructor(
    private readonly max: number,
    private readonly onEvict: (value: V) => void,
  ) {}
  get(key: K): V | undefined {
    const e = this.map.get(key);
    if (e === undefined) return undefined;
    e.used = ++this.clock;
    return e.value;
  }
  /**
   * Adds an entry. With a `slot` (e.g. app + script name), the entry this slot held before under
   * another key is evicted at once: a new version of a script frees the old version's context
   * instead of waiting for the LRU to push it out.
   */
  set(key: K, value: V, slot?: string): void {
    if (slot !== undefined) {
      const prev = this.slots.get(slot);
      this.slots.set(slot, key);
      if (prev !== undefined && prev !== key) {
        const old = this.map.get(prev);
        this.map.delete(prev);
        if (old !== undefined) this.onEvict(old.value);
      }
      if (this.slots.size > this.max * 4) this.slots.clear();
    }
    const had = this.map.get(key);
    if (had !== undefined) {
      had.value = value;
      had.used = ++this.clock;
      return;
    }
    this.map.set(key, { value, used: ++this.clock });
    if (this.map.size > this.max) {
      let oldest: K | undefined;
      let least = Infinity;
      for (const [k, e] of this.map) {
        if (e.used < least) {
          least = e.used;
          oldest = k;
        }
      }
      const e = this.map.get(oldest as K)!;
      this.map.delete(oldest as K);
      this.onEvict(e.value);
    }
  }
  /** Remove without calling onEvict. */
  delete(key: K): void {
    this.map.delete(key);
  }
  get size(): number {
    return this.map.size;
  }
}
