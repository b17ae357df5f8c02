/*
 * Sandbox adapter module: java.util.Enumeration.
 *
 * Holds makeEnumeration(list): hasMoreElements / nextElement, also iterable (for...of, spread)
 * and through asIterator(); iteration consumes it.
 */
import { SymIterator, copyArray, makeError, setOwn } from './prelude';

export type Enumeration<T> = ReturnType<typeof makeEnumeration<T>>;

/** java.util.Enumeration as scripts get it: also iterable, through asIterator() or itself. */
export function makeEnumeration<T>(list: ArrayLike<T>) {
  var items = copyArray(list);
  var i = 0;
  var e = {
    hasMoreElements: () => i < items.length,
    nextElement: function () {
      if (i >= items.length) throw makeError('NoSuchElementException', 'No more elements');
      return items[i++];
    },
    // (a function of the literal is named after its key: a declared one would carry the minifier's name)
    asIterator: function (): IterableIterator<T> {
      return {
        next: () => (i < items.length ? { value: items[i++], done: false } : { value: undefined, done: true }),
        [SymIterator as typeof Symbol.iterator]: function () {
          return this;
        },
      };
    },
  };
  setOwn(e, SymIterator, e.asIterator);
  return e as typeof e & Iterable<T>;
}
