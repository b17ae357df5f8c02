/**
 * Maps keyed by names a client (or a script) chooses: header, query, form and cookie names.
 *
 * They are plain objects, which V8 keeps in its fast mode (a map made with `Object.create(null)`
 * is a dictionary, and a third slower to fill and to write as JSON on every request), so they are
 * read and written only through their own properties: a name such as `constructor`, `toString`
 * or `__proto__` is an ordinary key, never a member of Object.prototype, and never a prototype.
 */
const hasOwn = Object.prototype.hasOwnProperty;

/** `map[key]` when it is the map's own entry, else undefined. */
export function ownGet<T>(map: Record<string, T>, key: string): T | undefined {
  return hasOwn.call(map, key) ? map[key] : undefined;
}

/** `map[key] = value`, made an own entry even for the key `__proto__`. */
export function ownSet<T>(map: Record<string, T>, key: string, value: T): void {
  if (key === '__proto__') Object.defineProperty(map, key, { value, writable: true, enumerable: true, configurable: true });
  else map[key] = value;
}
