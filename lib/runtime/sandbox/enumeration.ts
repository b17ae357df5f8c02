/*
 * Sandbox adapter module: java.util.Enumeration.
 *
 * Holds makeEnumeration(list): hasMoreElements / nextElement, also iterable (for...of, spread)
 * and through asIterator(); iteration consumes it.
 */
import { SymIterator, copyArray, makeError } from './prelude';

export function makeEnumeration(list) {
  var items = copyArray(list);
  var i = 0;
  function iterator() {
    return {
      next: () => (i < items.length ? { value: items[i++], done: false } : { value: undefined, done: true }),
      [SymIterator]: function () {
        return this;
      },
    };
  }
  return {
    hasMoreElements: () => i < items.length,
    nextElement: function () {
      if (i >= items.length) throw makeError('NoSuchElementException', 'No more elements');
      return items[i++];
    },
    asIterator: iterator,
    [SymIterator]: iterator,
  };
}
