/*
 * Sandbox adapter module: Array.prototype's copying methods (with, toReversed, toSorted,
 * toSpliced), written here in place of the engine's own; and a bound on typed arrays sorted with
 * a comparison function (below).
 *
 * The QuickJS build shipped allocates their result for the receiver's `length` before it reads
 * the elements, and leaves its slots unset while it reads them. On an array-like whose `length`
 * says 2^29 (a Proxy, an object with a getter) the size of that allocation overflows 32 bits and
 * the reads write past its end, over other apps' data in the worker's WebAssembly heap; and a
 * collection during a getter reads the unset slots. These read the receiver's elements, in the
 * order the language gives, into an array of their own: the engine's versions never run. Each
 * reads `length` once and converts its arguments as the language says, in the same order.
 */
import { G, TypedArrayPrototype, defineProperty, fnApply, isNil, makeError, mathMax, mathMin, mathTrunc, push, taLength, typeError } from './prelude';

var ObjectCtor = G.Object;
var ArrayProto = G.Array.prototype;
var arraySort = ArrayProto.sort;
/** The largest length of an array-like (2^53 - 1), and of an array (2^32 - 1). */
var MAX_LENGTH = 9007199254740991;
var MAX_ARRAY = 4294967295;

/** ToIntegerOrInfinity. */
function integer(v: unknown): number {
  var n = +(v as number); // (throws for a BigInt or a Symbol, as the language does)
  return n !== n ? 0 : mathTrunc(n);
}
/** ToObject(this), then LengthOfArrayLike. */
function receiver(self: unknown, name: string): { o: { [i: number]: unknown }; len: number } {
  if (isNil(self)) throw typeError('Array.prototype.' + name + ' called on null or undefined');
  var o = ObjectCtor(self) as { [i: number]: unknown; length?: unknown };
  var n = integer(o.length);
  return { o: o, len: n <= 0 ? 0 : mathMin(n, MAX_LENGTH) };
}
/** ArrayCreate's bound. */
function checkLength(n: number): void {
  if (n > MAX_ARRAY) throw makeError('RangeError', 'invalid array length');
}

var COPYING = {
  with(this: unknown, index: unknown, value: unknown): unknown[] {
    var r = receiver(this, 'with');
    var rel = integer(index);
    var at = rel >= 0 ? rel : r.len + rel;
    if (at >= r.len || at < 0) throw makeError('RangeError', 'invalid array index');
    checkLength(r.len);
    var a: unknown[] = [];
    for (var k = 0; k < r.len; k++) push(a, k === at ? value : r.o[k]);
    return a;
  },
  toReversed(this: unknown): unknown[] {
    var r = receiver(this, 'toReversed');
    checkLength(r.len);
    var a: unknown[] = [];
    for (var k = r.len - 1; k >= 0; k--) push(a, r.o[k]);
    return a;
  },
  toSorted(this: unknown, compare: unknown): unknown[] {
    if (compare !== undefined && typeof compare !== 'function') throw typeError('Array.prototype.toSorted: the comparison function must be a function or undefined');
    var r = receiver(this, 'toSorted');
    checkLength(r.len);
    var a: unknown[] = [];
    for (var k = 0; k < r.len; k++) push(a, r.o[k]);
    return fnApply(arraySort, a, [compare]) as unknown[];
  },
  toSpliced(this: unknown, start: unknown, skipCount: unknown): unknown[] {
    var r = receiver(this, 'toSpliced');
    var rel = integer(start);
    var from = rel < 0 ? mathMax(r.len + rel, 0) : mathMin(rel, r.len);
    var n = arguments.length;
    var skip = n === 0 ? 0 : n === 1 ? r.len - from : mathMin(mathMax(integer(skipCount), 0), r.len - from);
    var newLen = r.len + (n > 2 ? n - 2 : 0) - skip;
    if (newLen > MAX_LENGTH) throw typeError('invalid array length');
    checkLength(newLen);
    var a: unknown[] = [];
    for (var i = 0; i < from; i++) push(a, r.o[i]);
    for (var j = 2; j < n; j++) push(a, arguments[j]);
    for (var k = from + skip; k < r.len; k++) push(a, r.o[k]);
    return a;
  },
};

/**
 * Most elements a typed array's sort or toSorted takes with a comparison function: QuickJS sizes
 * their index array as 4 bytes an element in 32 bits, which wraps at 2^30 (a 1 GiB Uint8Array,
 * within a `scriptMemoryLimitMb` past 1 GiB), and the sort then writes past it.
 */
var MAX_COMPARED = 536870912; // 2^29
var typedSort = TypedArrayPrototype.sort as (this: unknown, compare?: unknown) => unknown;
var typedToSorted = TypedArrayPrototype.toSorted as ((this: unknown, compare?: unknown) => unknown) | undefined;
function compared(self: unknown, compare: unknown): void {
  if (compare !== undefined && taLength(self) >= MAX_COMPARED) throw makeError('RangeError', 'a typed array of ' + MAX_COMPARED + ' elements or more cannot be sorted with a comparison function');
}
var TYPED = {
  sort(this: unknown, compare: unknown): unknown {
    compared(this, compare);
    return fnApply(typedSort, this, arguments);
  },
  toSorted(this: unknown, compare: unknown): unknown {
    compared(this, compare);
    return fnApply(typedToSorted!, this, arguments);
  },
};
defineProperty(TypedArrayPrototype, 'sort', { __proto__: null, value: TYPED.sort, writable: true, enumerable: false, configurable: true });
if (typeof typedToSorted === 'function') defineProperty(TypedArrayPrototype, 'toSorted', { __proto__: null, value: TYPED.toSorted, writable: true, enumerable: false, configurable: true });

var NAMES = ['with', 'toReversed', 'toSorted', 'toSpliced'] as const;
for (var i = 0; i < NAMES.length; i++) {
  // (only where the engine has them: the set of built-ins stays the engine's)
  if (typeof (ArrayProto as unknown as { [name: string]: unknown })[NAMES[i]] === 'function') {
    defineProperty(ArrayProto, NAMES[i], { __proto__: null, value: COPYING[NAMES[i]], writable: true, enumerable: false, configurable: true });
  }
}
