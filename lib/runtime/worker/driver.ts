/**
 * What an engine does inside a worker: load a script module into a context of its own (cached per
 * app and source hash, never shared between apps) and invoke one exported function through the
 * sandbox adapter. lib/runtime/worker/pipeline.ts drives the stages on top of it.
 */
import type { StageCall, StageOutput } from '../protocol';

export interface LoadedModule {
  readonly appId: string;
  readonly hash: string;
}

/** A failure of the engine rather than of the script's own code. */
export class EngineError extends Error {
  constructor(
    readonly errorName: 'SCRIPT_COMPILE_ERROR' | 'FUNCTION_NOT_FOUND' | 'SCRIPT_TIMEOUT' | 'SCRIPT_OUT_OF_MEMORY' | 'SCRIPT_STALLED' | 'ENGINE_FAILURE',
    message: string,
  ) {
    super(message);
    this.name = 'EngineError';
  }
}

export interface SandboxDriver {
  /** Compile or reuse the module; throws EngineError('SCRIPT_COMPILE_ERROR') on a bad source. */
  load(appId: string, name: string, hash: string, source: string, deadline: number): LoadedModule | Promise<LoadedModule>;
  /** Call the export `fn` through the adapter's `__sa.invoke`; resolves with the StageOutput. */
  invoke(mod: LoadedModule, fn: string, call: StageCall, deadline: number): Promise<StageOutput>;
  /** True once the engine is unusable (after out-of-memory): the worker must be replaced. */
  readonly poisoned: boolean;
}

/** A small LRU map used for context caches. */
export class Lru<K, V> {
  private readonly map = new Map<K, V>();
  private readonly slots = new Map<string, K>();
  constructor(
    private readonly max: number,
    private readonly onEvict: (value: V) => void,
  ) {}
  get(key: K): V | undefined {
    const v = this.map.get(key);
    if (v !== undefined) {
      this.map.delete(key);
      this.map.set(key, v);
    }
    return v;
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
        if (old !== undefined) this.onEvict(old);
      }
      if (this.slots.size > this.max * 4) this.slots.clear();
    }
    this.map.set(key, value);
    if (this.map.size > this.max) {
      const [k, v] = this.map.entries().next().value as [K, V];
      this.map.delete(k);
      this.onEvict(v);
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
