/**
 * Values leaving a CEL expression become plain JSON values: CEL integers are BigInts and unsigned
 * integers cel-js's UnsignedInt (numbers here; beyond 2^53 they lose precision as JSON.parse
 * would), timestamps are Dates (ms since the epoch, as script results are), durations are
 * milliseconds, types their name (`int`), bytes are Uint8Arrays (base64 text), maps may be Maps
 * (objects), optionals are their value or null, and `undefined` is null. Objects are rebuilt
 * without prototypes' help: only own enumerable string keys are read.
 */

const MAX_DEPTH = 100;

/** The class of a cel-js value (`UnsignedInt`, `Duration`, `Type`), by its prototype: never a key of the data. */
function celClass(v: object): unknown {
  return (Object.getPrototypeOf(v) as { constructor?: { name?: unknown } } | null)?.constructor?.name;
}

function isOptional(v: object): v is { hasValue(): boolean; value(): unknown } {
  const o = v as { hasValue?: unknown; value?: unknown; constructor?: { name?: string } };
  return typeof o.hasValue === 'function' && typeof o.value === 'function' && o.constructor?.name === 'Optional';
}

/** The JSON value of `v` (see the file comment); throws RangeError past 100 levels of nesting. */
export function toJson(v: unknown, depth = 0): unknown {
  switch (typeof v) {
    case 'bigint':
      return Number(v);
    case 'number':
      return Number.isFinite(v) ? v : null;
    case 'string':
    case 'boolean':
      return v;
    case 'undefined':
    case 'function':
    case 'symbol':
      return null;
  }
  if (v === null) return null;
  if (depth > MAX_DEPTH) throw new RangeError(`a value nested more than ${MAX_DEPTH} levels deep`);
  if (Array.isArray(v)) return v.map((x) => toJson(x, depth + 1));
  if (v instanceof Date) return Number.isNaN(v.getTime()) ? null : v.getTime();
  if (v instanceof Uint8Array) return Buffer.from(v.buffer, v.byteOffset, v.byteLength).toString('base64');
  if (v instanceof Map) {
    const out: Record<string, unknown> = {};
    for (const [k, x] of v) setOwn(out, String(k), toJson(x, depth + 1));
    return out;
  }
  if (v instanceof Set) return [...v].map((x) => toJson(x, depth + 1));
  const obj = v as object;
  switch (celClass(obj)) {
    case 'UnsignedInt':
      return Number((obj as { value: bigint }).value);
    case 'Duration':
      return Number(obj.valueOf()); // (ms, its valueOf)
    case 'Type':
      return String((obj as { name: string }).name);
  }
  if (isOptional(obj)) return obj.hasValue() ? toJson(obj.value(), depth + 1) : null;
  const out: Record<string, unknown> = {};
  for (const k of Object.keys(obj)) setOwn(out, k, toJson((obj as Record<string, unknown>)[k], depth + 1));
  return out;
}

/**
 * `v` as CEL expressions read it: cel-js takes an object's type from its `constructor` key, so a
 * JSON object with a key of that name (a body's, a query's, an upstream's) becomes a Map, which it
 * reads as a map (toJson turns it back). Unchanged objects are kept as they are, not copied.
 */
export function celView(v: unknown, depth = 0): unknown {
  if (typeof v !== 'object' || v === null || depth > MAX_DEPTH) return v;
  if (Array.isArray(v)) {
    let out: unknown[] | undefined;
    for (let i = 0; i < v.length; i++) {
      const x = celView(v[i], depth + 1);
      if (x !== v[i]) (out ??= v.slice())[i] = x;
    }
    return out ?? v;
  }
  const proto = Object.getPrototypeOf(v) as unknown;
  if (proto !== Object.prototype && proto !== null) return v; // (a Map, a Date, cel-js's own values)
  const obj = v as Record<string, unknown>;
  const own = Object.prototype.hasOwnProperty.call(obj, 'constructor');
  let out: Record<string, unknown> | undefined;
  for (const k of Object.keys(obj)) {
    const x = celView(obj[k], depth + 1);
    if (x !== obj[k]) setOwn((out ??= { ...obj }), k, x);
  }
  if (own) return new Map(Object.entries(out ?? obj));
  return out ?? v;
}

/** A JSON.stringify replacer: a celView Map as the object it stands for. */
export function mapsAsObjects(_key: string, v: unknown): unknown {
  return v instanceof Map ? Object.fromEntries(v) : v;
}

/** Sets a key as an own data property (a key named `__proto__` stays a plain key). */
export function setOwn(o: Record<string, unknown>, k: string, v: unknown): void {
  Object.defineProperty(o, k, { value: v, enumerable: true, writable: true, configurable: true });
}
