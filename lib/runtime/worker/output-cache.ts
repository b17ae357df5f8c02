/**
 * The parsed StageOutputs of a worker, by their JSON text.
 *
 * A stage answers with a StageOutput as JSON text (lib/runtime/sandbox/entry.js, collect), and a
 * script answers the same few texts again and again: a hook that sets the same attribute or
 * header, a call that returns the same small object. Parsing such a text costs more than finding
 * it (about 0.8 µs a stage under load, measured in bench/README.md, "Session 19"), so texts up to
 * MAX_LENGTH characters are parsed once and their StageOutput is shared by every stage that
 * answers the same text.
 *
 * A shared StageOutput is deeply frozen: the worker and the pipeline only read a stage's output
 * (they build new objects from it), and a write to one would reach other calls' results, so it
 * throws instead (the worker's code is strict mode). Since a shared part never changes, its own
 * JSON text is kept too, once asked for (jsonOf): a job's result message repeats the parts of its
 * stages' outputs (the call's output, the attributes, the response headers).
 */
import type { StageOutput } from '../protocol';

/** Texts longer than this are parsed each time (a large result is rarely answered twice). */
const MAX_LENGTH = 1024;
/** How many texts are kept; the cache starts over when full. */
const MAX_ENTRIES = 64;

/** Every object a cache froze and shares (from JSON.parse: no cycles), with its JSON text once made (null: not yet). */
const shared = new WeakMap<object, string | null>();

function deepFreeze<T>(value: T): T {
  if (value !== null && typeof value === 'object' && !shared.has(value)) {
    Object.freeze(value);
    shared.set(value, null);
    for (const key of Object.keys(value)) deepFreeze((value as Record<string, unknown>)[key]);
  }
  return value;
}

/**
 * `JSON.stringify(value)` for a value that has a JSON form (not undefined, a function or a
 * symbol), made once for a part of a shared StageOutput.
 */
export function jsonOf(value: unknown): string {
  if (value !== null && typeof value === 'object') {
    const text = shared.get(value);
    if (text !== undefined) {
      if (text !== null) return text;
      const made = JSON.stringify(value);
      shared.set(value, made);
      return made;
    }
  }
  return JSON.stringify(value);
}

export class StageOutputCache {
  private readonly parsed = new Map<string, StageOutput>();

  /** The StageOutput of `json` (throws a SyntaxError for text that is not JSON, as JSON.parse). */
  parse(json: string): StageOutput {
    let out = this.parsed.get(json);
    if (out !== undefined) return out;
    out = JSON.parse(json) as StageOutput;
    if (json.length <= MAX_LENGTH) {
      if (this.parsed.size >= MAX_ENTRIES) this.parsed.clear();
      this.parsed.set(json, deepFreeze(out));
    }
    return out;
  }

  /** Texts held now (for tests). */
  get size(): number {
    return this.parsed.size;
  }
}
