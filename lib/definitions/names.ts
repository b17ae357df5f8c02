/** How messages show values and suggest names (no dependencies: script workers load it too). */

/**
 * A value as a message shows it: NaN and Infinity as themselves (JSON.stringify prints null); past
 * `max` characters, its start and '…'. A value JSON cannot write (nested past the stack, a cycle,
 * a BigInt inside) shows as its kind, so the message naming the field is still made.
 */
export function shown(v: unknown, max = Infinity): string {
  let text: string;
  try {
    text = typeof v === 'number' || typeof v === 'bigint' ? String(v) : JSON.stringify(v) ?? String(v);
  } catch {
    text = Array.isArray(v) ? '[…]' : v !== null && typeof v === 'object' ? '{…}' : typeof v;
  }
  return text.length > max ? `${text.slice(0, max)}…` : text;
}

/** Edit distance between two short names, or Infinity once it passes `max`. */
function distance(a: string, b: string, max: number): number {
  if (Math.abs(a.length - b.length) > max) return Infinity;
  let prev = Array.from({ length: b.length + 1 }, (_, j) => j);
  for (let i = 1; i <= a.length; i++) {
    const row = [i];
    for (let j = 1; j <= b.length; j++) row[j] = Math.min(prev[j] + 1, row[j - 1] + 1, prev[j - 1] + (a[i - 1] === b[j - 1] ? 0 : 1));
    if (Math.min(...row) > max) return Infinity;
    prev = row;
  }
  return prev[b.length];
}

/** The known name `name` was probably meant to be (same letters in another case, or a typo or two), if any. */
export function nearestName(name: string, known: readonly string[]): string | undefined {
  const lower = name.toLowerCase();
  // (a short name is near everything: two edits of a two-letter name are a different name)
  return known.find((n) => n.toLowerCase() === lower) ?? known.find((n) => distance(lower, n.toLowerCase(), 2) * 2 < Math.max(lower.length, 3));
}
