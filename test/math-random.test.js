'use strict';
// Math.random in the sandbox: each context's numbers are its own and cannot be computed by
// someone who knows when the context was made (QuickJS seeds it from the clock by itself).
const request = require('supertest');
const { makeApp } = require('./helpers/app');

const MASK = (1n << 64n) - 1n;
/** QuickJS's own Math.random: xorshift64* from `seed`, the first number. */
function quickjsFirst(seed) {
  let x = seed;
  x ^= x >> 12n;
  x = (x ^ (x << 25n)) & MASK;
  x ^= x >> 27n;
  const v = (x * 0x2545f4914f6cdd1dn) & MASK;
  return Number(v >> 12n) / 2 ** 52;
}

const SCRIPT = `export function fn(ctx) {
  const r = Math.random;
  const seq = [r(), Math.random(), Math.random()];
  let constructs = true;
  try { new r(); } catch (e) { constructs = !(e instanceof TypeError); }
  const d = Object.getOwnPropertyDescriptor(Math, 'random');
  return { seq, name: r.name, length: r.length, constructs, writable: d.writable, enumerable: d.enumerable, configurable: d.configurable };
}`;

describe.each(['quickjs', 'vm2'])('%s', (engine) => {
  let fixture;
  beforeAll(async () => {
    const apps = {};
    for (let n = 0; n < 12; n++) apps[`r${n}`] = { scripts: { 'main.js': SCRIPT }, apis: [{ path: 'p', call: { script: 'main.js', function: 'fn' }, returnType: 'JSON' }] };
    fixture = makeApp({ apps, router: { engine, workers: 1, maxWorkers: 1 } });
    await fixture.router.ready();
  });
  afterAll(() => fixture.router.close());

  test("an app's Math.random cannot be computed from the time its context was made", async () => {
    const t0 = Date.now();
    const res = await request(fixture.app).get('/web0/api/r0/p').expect(200);
    const t1 = Date.now();
    const [first] = res.body.seq;
    // every seed the clock gave while the context was made (QuickJS: microseconds since 1970, in
    // this build at millisecond steps), with a second of margin either side
    const found = [];
    for (let ms = t0 - 1000; ms <= t1 + 1000; ms++) if (quickjsFirst(BigInt(ms) * 1000n) === first) found.push(ms);
    expect(found).toEqual([]);
  });

  test('apps whose contexts are made together get numbers of their own, from a Math.random shaped like the built-in', async () => {
    const all = await Promise.all(Array.from({ length: 11 }, (_, n) => request(fixture.app).get(`/web0/api/r${n + 1}/p`).expect(200)));
    const firsts = new Set(all.map((r) => r.body.seq[0]));
    expect(firsts.size).toBe(11);
    for (const { body } of all) {
      for (const x of body.seq) expect(x >= 0 && x < 1).toBe(true);
      expect(new Set(body.seq).size).toBe(3);
      expect(body).toEqual(expect.objectContaining({ name: 'random', length: 0, constructs: false, writable: true, enumerable: false, configurable: true }));
    }
  });
});
