/**
 * Definitions that cannot change: the registries freeze what they hand out, and the router checks
 * such a definition once instead of on every request.
 */

/** Freezes `o` and every object inside it; returns `o`. */
export function deepFreeze<T>(o: T): T {
  if (o && typeof o === 'object') {
    for (const v of Object.values(o)) deepFreeze(v);
    Object.freeze(o);
  }
  return o;
}

/**
 * True when nothing in `o` can change any more: `o` and every object inside it are frozen and
 * hold data properties only (a getter may answer differently at each read, even on a frozen
 * object). A proxy passes only when its target is settled too (the language holds a proxy of a
 * frozen target to the target's values).
 */
export function isSettled(o: unknown, depth = 0): boolean {
  if (typeof o !== 'object' || o === null) return typeof o !== 'function';
  if (depth > 32 || !Object.isFrozen(o)) return false;
  const props = Object.getOwnPropertyDescriptors(o);
  for (const key of Reflect.ownKeys(props)) {
    const p = props[key as string];
    if (!('value' in p) || !isSettled(p.value, depth + 1)) return false;
  }
  return true;
}
