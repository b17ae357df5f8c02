'use strict';
// Apps that share a worker share one WebAssembly heap (QuickJS) and one engine: a flaw of the
// engine a script can reach reads or writes other apps' contexts and requests, or aborts the engine
// under all of them. These tests make the attempts the adapter guards against (on both engines: a
// script behaves the same on each): a typed array outliving its buffer (a buffer shrunk or
// detached from a built-in's callback), an array-like whose length overflows a copying method's
// allocation, a typed array sorted with a comparison function past the engine's 32-bit index
// array, and an Object.prototype.then getter re-entering an async generator.
const request = require('supertest');
const { makeApp } = require('./helpers/app');

const SHRINKERS = `
/** Tries every way a script could shrink or detach ab; the name of the one that worked, or 'none'. */
function shrink(ab, to) {
  for (const m of ['resize', 'transfer', 'transferToFixedLength']) {
    try {
      ab[m](to);
      return m;
    } catch (e) {}
  }
  return 'none';
}
`;

const ATTACKER = `${SHRINKERS}
const N = 1 << 20;
export function methods() {
  const ab = new ArrayBuffer(8, { maxByteLength: 16 });
  return {
    resize: typeof ArrayBuffer.prototype.resize,
    transfer: typeof ArrayBuffer.prototype.transfer,
    transferToFixedLength: typeof ArrayBuffer.prototype.transferToFixedLength,
    shrunk: shrink(ab, 0),
    byteLength: ab.byteLength,
  };
}
// the typed array constructor reads new.target.prototype (a getter) after the buffer's length
export function plant() {
  const ab = new ArrayBuffer(N, { maxByteLength: N });
  let shrunk = 'not called';
  const target = function () {}.bind();
  Object.defineProperty(target, 'prototype', { get() { shrunk = shrink(ab, 0); return Uint8Array.prototype; } });
  globalThis.view = Reflect.construct(Uint8Array, [ab], target);
  globalThis.buffer = ab;
  return { shrunk, viewLength: globalThis.view.length, bufferLength: ab.byteLength };
}
/** Looks for the needle's bytes in the view (each read guarded: a detached view may throw). */
export function scan(ctx) {
  const v = globalThis.view, needle = ctx.query.needle;
  let hits = 0;
  for (let i = 0; i + needle.length <= v.length; i++) {
    let j = 0;
    try { while (j < needle.length && v[i + j] === needle.charCodeAt(j)) j++; } catch (e) { break; }
    if (j === needle.length) hits++;
  }
  return { hits };
}
// TypedArray.prototype.with reads the value (valueOf) after the array's length
export function withValue() {
  const ab = new ArrayBuffer(4096, { maxByteLength: 4096 });
  const ta = new Uint8Array(ab);
  let shrunk = 'not called';
  const copy = ta.with(0, { valueOf() { shrunk = shrink(ab, 8); return 1; } });
  let nonZero = 0;
  for (let i = 0; i < copy.length; i++) if (copy[i] !== 0) nonZero++;
  return { shrunk, length: copy.length, nonZero };
}
// with, toReversed, toSorted and toSpliced: an array-like whose length overflows the engine's
// allocation of their result (2^29 elements of 8 bytes is 2^32 bytes: 0 in 32 bits); its element
// 100 from either end throws (the reads stop there), the others are holes
export function hugeLength() {
  const out = {};
  const L = 2 ** 29 + 128;
  for (const m of ['with', 'toReversed', 'toSorted', 'toSpliced']) {
    const huge = { get length() { return L; } };
    for (const i of [100, L - 101]) Object.defineProperty(huge, i, { get() { throw new Error('enough at ' + i); } });
    try {
      out[m] = m === 'with' ? Array.prototype.with.call(huge, 0, 2) : m === 'toSorted' ? Array.prototype.toSorted.call(huge) : Array.prototype[m].call(huge, 0, 0);
    } catch (e) {
      out[m] = e.message;
    }
  }
  return out;
}
// what the language says they do, read by read (getters log the reads: vm2 has no Proxy)
export function copying() {
  const reads = [];
  const logged = {};
  for (const [k, v] of [['length', 3], ['0', 'a'], ['1', undefined], ['2', 'c']]) Object.defineProperty(logged, k, { get() { reads.push(k); return v; } });
  const err = (f) => { try { f(); return 'none'; } catch (e) { return e.name; } };
  const reversed = Array.prototype.toReversed.call(logged);
  return {
    reversed, reversedReads: reads.splice(0),
    sorted: [3, 1, undefined, 10, 2].toSorted(), byNumber: [3, 1, 10, 2].toSorted((a, b) => a - b),
    with: [1, 2, 3].with(-1, 9), withReads: (Array.prototype.with.call(logged, 1, 'b'), reads.splice(0)),
    spliced: [1, 2, 3, 4].toSpliced(1, 2, 'x', 'y', 'z'), noSkip: [1, 2, 3].toSpliced(1), noArgs: [1, 2].toSpliced(),
    negative: [1, 2, 3, 4].toSpliced(-2, 1), fromString: Array.prototype.toReversed.call('abc'),
    errors: [err(() => [1].with(1, 0)), err(() => [1].toSorted(1)), err(() => Array.prototype.toReversed.call(null)), err(() => Array.prototype.toReversed.call({ length: 2 ** 32 }))],
    shape: ['with', 'toReversed', 'toSorted', 'toSpliced'].map((m) => [Array.prototype[m].name, Array.prototype[m].length, Object.keys(Array.prototype).includes(m)]),
  };
}
// an Object.prototype.then getter that re-enters an async generator while the engine resolves its result
export async function thenReentry() {
  const deferred = () => { let resolve; const promise = new Promise((f) => (resolve = f)); return { promise, resolve }; };
  let it, hits = 0, inGetter = false;
  let defined = 'defined';
  try {
    Object.defineProperty(Object.prototype, 'then', {
      configurable: true,
      get() {
        if (inGetter || !it) return undefined;
        inGetter = true;
        try { if (hits === 0) it.return(0); else if (hits === 1) { it.next(1); it.return(1); } hits++; } catch (e) {}
        inGetter = false;
        return undefined;
      },
    });
  } catch (e) {
    defined = e.name;
  }
  const a = deferred(), b = deferred(), c = deferred();
  async function* g() { try { await a.promise; yield 1; await b.promise; yield 2; await c.promise; } finally { await c.promise; } }
  it = g();
  it.next();
  a.resolve({});
  await Promise.resolve();
  await Promise.resolve();
  b.resolve({});
  c.resolve({});
  await Promise.resolve();
  const o = {};
  o.then = 5;
  return { defined, hits, inherited: ({}).then === undefined, own: Object.keys(o) };
}
`;

const VICTIM = `
export function fn(ctx) {
  return { seen: ctx.request.getHeader('authorization').length };
}
`;

describe.each(['quickjs', 'vm2'])('heap isolation on the %s engine', (engine) => {
  let app;
  let router;
  beforeAll(() => {
    const api = (p, fn) => ({ path: p, call: { script: 'main.js', function: fn }, returnType: 'JSON' });
    ({ app, router } = makeApp({
      router: { engine, workers: 1, maxWorkers: 1 },
      apps: {
        attacker: { scripts: { 'main.js': ATTACKER }, apis: [api('methods', 'methods'), api('plant', 'plant'), api('scan', 'scan'), api('with', 'withValue'), api('huge', 'hugeLength'), api('copying', 'copying'), api('then', 'thenReentry')] },
        victim: { scripts: { 'main.js': VICTIM }, apis: [api('p', 'fn')] },
      },
    }));
  });
  afterAll(() => router.close());

  test('ArrayBuffers keep their size: resize, transfer and transferToFixedLength are not there', async () => {
    const res = await request(app).get('/web0/api/attacker/methods');
    expect(res.status).toBe(200);
    expect(res.body).toEqual({ resize: 'undefined', transfer: 'undefined', transferToFixedLength: 'undefined', shrunk: 'none', byteLength: 8 });
  });

  test("a typed array never outlives its buffer, and another app's request cannot be read through one", async () => {
    const plant = await request(app).get('/web0/api/attacker/plant');
    expect(plant.status).toBe(200);
    expect(plant.body).toEqual({ shrunk: 'none', viewLength: 1 << 20, bufferLength: 1 << 20 });
    const secret = 'Bearer SECRET-of-the-victim-app-7f3a9c';
    for (let i = 0; i < 3; i++) {
      const v = await request(app).get('/web0/api/victim/p').set('Authorization', secret);
      expect(v.body).toEqual({ seen: secret.length });
    }
    const scan = await request(app).get('/web0/api/attacker/scan').query({ needle: 'SECRET-of-the-victim' });
    expect(scan.status).toBe(200);
    expect(scan.body).toEqual({ hits: 0 });
  });

  test('with, toReversed, toSorted and toSpliced on an array-like of 2^29 elements read its elements, and end with its getter', async () => {
    const res = await request(app).get('/web0/api/attacker/huge');
    expect(res.status).toBe(200);
    const L = 2 ** 29 + 128;
    expect(res.body).toEqual({ with: 'enough at 100', toReversed: `enough at ${L - 101}`, toSorted: 'enough at 100', toSpliced: 'enough at 100' });
    // (the worker goes on serving)
    expect((await request(app).get('/web0/api/victim/p').set('Authorization', 'x')).body).toEqual({ seen: 1 });
  });

  test('with, toReversed, toSorted and toSpliced do what the language says, read by read', async () => {
    const res = await request(app).get('/web0/api/attacker/copying');
    expect(res.status).toBe(200);
    expect(res.body).toEqual({
      reversed: ['c', null, 'a'],
      reversedReads: ['length', '2', '1', '0'],
      sorted: [1, 10, 2, 3, null],
      byNumber: [1, 2, 3, 10],
      with: [1, 2, 9],
      withReads: ['length', '0', '2'],
      spliced: [1, 'x', 'y', 'z', 4],
      noSkip: [1],
      noArgs: [1, 2],
      negative: [1, 2, 4],
      fromString: ['c', 'b', 'a'],
      errors: ['RangeError', 'TypeError', 'TypeError', 'RangeError'],
      shape: [['with', 2, false], ['toReversed', 0, false], ['toSorted', 1, false], ['toSpliced', 2, false]],
    });
  });

  test("Object.prototype.then cannot be redefined: no getter runs inside the engine's resolution of an async generator's result", async () => {
    const res = await request(app).get('/web0/api/attacker/then');
    expect([res.status, res.body]).toEqual([200, { defined: 'TypeError', hits: 0, inherited: true, own: ['then'] }]);
    expect((await request(app).get('/web0/api/victim/p').set('Authorization', 'x')).body).toEqual({ seen: 1 });
  });

  test("TypedArray.prototype.with copies the array's own bytes only", async () => {
    const res = await request(app).get('/web0/api/attacker/with');
    expect(res.status).toBe(200);
    expect(res.body).toEqual({ shrunk: 'none', length: 4096, nonZero: 1 });
  });
});

// QuickJS sizes the index array of a typed array sorted with a comparison function as 4 bytes an
// element in 32 bits: it wraps at 2^30 elements, which a call allowed more than 1 GiB could make
describe.each(['quickjs', 'vm2'])('typed arrays sorted with a comparison function on the %s engine', (engine) => {
  const SORTS = `
export function sorts() {
  const err = (f) => { try { f(); return 'none'; } catch (e) { return e.name; } };
  const big = new Uint8Array(2 ** 29);
  return {
    small: Array.from(new Uint8Array([3, 1, 2]).sort((a, b) => b - a)),
    smallCopy: Array.from(new Uint8Array([3, 1, 2]).toSorted((a, b) => b - a)),
    plain: Array.from(new Uint8Array([3, 1, 2]).sort()),
    big: err(() => big.sort((a, b) => a - b)),
    bigCopy: err(() => big.toSorted((a, b) => a - b)),
    notTyped: err(() => Uint8Array.prototype.sort.call([2, 1], (a, b) => a - b)),
    shape: [Uint8Array.prototype.sort.name, Uint8Array.prototype.sort.length, Uint8Array.prototype.toSorted.length],
  };
}`;
  const { app, router } = makeApp({
    router: { engine, workers: 1, scriptMemoryLimitMb: 700, scriptTimeoutMs: 20_000 },
    apps: { a: { scripts: { 'main.js': SORTS }, apis: [{ path: 'p', call: { script: 'main.js', function: 'sorts' }, returnType: 'JSON' }] } },
  });
  afterAll(() => router.close());

  test('with 2^29 elements or more it is a RangeError; smaller ones sort as before', async () => {
    const res = await request(app).get('/web0/api/a/p');
    expect([res.status, res.body]).toEqual([200, { small: [3, 2, 1], smallCopy: [3, 2, 1], plain: [1, 2, 3], big: 'RangeError', bigCopy: 'RangeError', notTyped: 'TypeError', shape: ['sort', 1, 1] }]);
  }, 60_000);
});
