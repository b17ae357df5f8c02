/** Store constructors refuse option keys they do not know: a mistyped one would leave the default in place. */
import { nearestName } from '../definitions/names';

/** Throws a TypeError naming the first key of `options` not in `known`, with the nearest known name. */
export function checkOptionKeys(options: object, known: readonly string[], owner: string, hint = ''): void {
  for (const k of Object.keys(options)) {
    if (known.includes(k)) continue;
    const near = nearestName(k, known);
    throw new TypeError(`scriptable-api: ${owner} ${k} is not an option${near ? ` (did you mean '${near}'?)` : `; the options are ${known.join(', ')}`}${hint}`);
  }
}
