/**
 * Values leaving a CEL expression become plain JSON values: CEL integers are BigInts and unsigned
 * integers cel-js's UnsignedInt (numbers here; beyond 2^53 they lose precision as JSON.parse
 * would), timestamps are Dates (ms since the epoch, as script results are), durations are
 * milliseconds, types their name (`int`), bytes are Uint8Arrays (base64 text), maps may be Maps
 * (objects), optionals are their value or null, and `undefined` is null. Objects are rebuilt
 * without prototypes' help: only own enumerable string keys are read.
 */

const MAX_DEPTH = 100;
/**
 * Largest value an automation holds, as counted by toJson / measure: a byte per character of its
 * strings and keys, ITEM_BYTES per list element or map entry. The interpreter's values live on
 * the worker's own heap, outside any script's memory limit: a value doubled step after step
 * would fill that heap, and one copy of it made at once (a list copied, a string flattened to be
 * sent) aborts the whole process instead of failing its worker.
 */
export const MAX_VALUE_BYTES = 16 * 1024 * 1024;
const ITEM_BYTES = 8;

/** What is left of a value's MAX_VALUE_BYTES while it is walked. */
interface Room {
  left: number;
}

function use(room: Room, bytes: number): void {
  room.left -= bytes;
  if (room.left < 0) throw new RangeError(`a value larger than ${MAX_VALUE_BYTES / (1024 * 1024)} MiB (a byte a character, ${ITEM_BYTES} a list item or map entry)`);
}

/**
 * Walks `v` (plain JSON, celView Maps) counting its size into `room` (a fresh MAX_VALUE_BYTES
 * by default); throws RangeError when it does not fit. Nothing is copied.
 */
export function measure(v: unknown, room: Room = { left: MAX_VALUE_BYTES }, depth = 0): void {
  if (typeof v === 'string') return use(room, v.length);
  if (typeof v !== 'object' || v === null || depth > MAX_DEPTH) return;
  if (Array.isArray(v)) {
    use(room, v.length * ITEM_BYTES);
    for (const x of v) measure(x, room, depth + 1);
  } else if (v instanceof Map) {
    for (const [k, x] of v) {
      use(room, ITEM_BYTES + String(k).length);
      measure(x, room, depth + 1);
    }
  } else {
    for (const k of Object.keys(v)) {
      use(room, ITEM_BYTES + k.length);
      measure((v as Record<string, unknown>)[k], room, depth + 1);
    }
  }
}

/** The size of `v` as measure counts it, in bytes; throws RangeError past MAX_VALUE_BYTES. */
export function byteSize(v: unknown): number {
  const room = { left: MAX_VALUE_BYTES };
  measure(v, room);
  return MAX_VALUE_BYTES - room.left;
}

/** toJson of `v` and that value's byteSize, in one walk (toJson counts what measure would). */
export function sizedJson(v: unknown): { value: unknown; bytes: number } {
  const room = { left: MAX_VALUE_BYTES };
  const value = toJson(v, 0, room);
  return { value, bytes: MAX_VALUE_BYTES - room.left };
}

/** The class of a cel-js value (`UnsignedInt`, `Duration`, `Type`), by its prototype: never a key of the data. */
function celClass(v: object): unknown {
  return (Object.getPrototypeOf(v) as { constructor?: { name?: unknown } } | null)?.constructor?.name;
}

function isOptional(v: object): v is { hasValue(): boolean; value(): unknown } {
  const o = v as { hasValue?: unknown; value?: unknown; constructor?: { name?: string } };
  return typeof o.hasValue === 'function' && typeof o.value === 'function' && o.constructor?.name === 'Optional';
}

/**
 * The JSON value of `v` (see the file comment); throws RangeError past 100 levels of nesting or
 * past MAX_VALUE_BYTES (counted as it goes: no list is copied whole before it is counted).
 */
export function toJson(v: unknown, depth = 0, room: Room = { left: MAX_VALUE_BYTES }): unknown {
  switch (typeof v) {
    case 'bigint':
      return Number(v);
    case 'number':
      return Number.isFinite(v) ? v : null;
    case 'string':
      use(room, v.length);
      return v;
    case 'boolean':
      return v;
    case 'undefined':
    case 'function':
    case 'symbol':
      return null;
  }
  if (v === null) return null;
  if (depth > MAX_DEPTH) throw new RangeError(`a value nested more than ${MAX_DEPTH} levels deep`);
  if (Array.isArray(v) || v instanceof Set) {
    const out: unknown[] = [];
    for (const x of v) {
      use(room, ITEM_BYTES);
      out.push(toJson(x, depth + 1, room));
    }
    return out;
  }
  if (v instanceof Date) return Number.isNaN(v.getTime()) ? null : v.getTime();
  if (v instanceof Uint8Array) {
    use(room, Math.ceil(v.byteLength / 3) * 4);
    return Buffer.from(v.buffer, v.byteOffset, v.byteLength).toString('base64');
  }
  if (v instanceof Map) {
    const out: Record<string, unknown> = {};
    for (const [k, x] of v) {
      const key = String(k);
      use(room, ITEM_BYTES + key.length);
      setOwn(out, key, toJson(x, depth + 1, room));
    }
    return out;
  }
  const obj = v as object;
  switch (celClass(obj)) {
    case 'UnsignedInt':
      return Number((obj as { value: bigint }).value);
    case 'Duration':
      return Number(obj.valueOf()); // (ms, its valueOf)
    case 'Type':
      return String((obj as { name: string }).name);
  }
  if (isOptional(obj)) return obj.hasValue() ? toJson(obj.value(), depth + 1, room) : null;
  const out: Record<string, unknown> = {};
  for (const k of Object.keys(obj)) {
    use(room, ITEM_BYTES + k.length);
    setOwn(out, k, toJson((obj as Record<string, unknown>)[k], depth + 1, room));
  }
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
