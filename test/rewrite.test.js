'use strict';
// The compile-time rewrite of synchronous host calls (lib/runtime/rewrite): what it turns into
// `await`, and every shape that falls back to blocking mode with its reason. Every async result
// is checked to parse and to keep each statement on its line (helpers/rewrite-check.js).
const { HOST_METHODS, rewriteHostCalls, sourceColumn } = require('../dist/cjs/runtime/rewrite/index.js');
const { rewrite: checked } = require('./helpers/rewrite-check');

/** The plan alone: awaits as written, inserted as `(await x)` (the wrapping is tested apart: 'every await is wrapped'). */
const PLAIN = { wrapAwaits: false };
const rewrite = (source, options) => checked(source, { ...PLAIN, ...options });

/** Rewrites and expects async mode with exactly `expected` as code (awaits shown unwrapped: see 'every await is wrapped'). */
function expectCode(source, expected) {
  const r = rewrite(source);
  expect(r).toEqual({ code: expected, async: true });
}

/** Rewrites and expects a fallback whose reason matches. */
function expectFallback(source, reason) {
  const r = rewrite(source);
  expect(r.async).toBe(false);
  expect(r.reason).toMatch(reason);
  return r;
}

describe('HOST_METHODS', () => {
  test('names the host helpers that wait on I/O, and nothing local', () => {
    expect([...HOST_METHODS].sort()).toEqual(['getAccountByToken', 'request', 'save', 'saveAttachment', 'saveBodyAsFile', 'saveStorage']);
    expect(Object.isFrozen(HOST_METHODS)).toBe(true);
  });
});

describe('the spec examples', () => {
  test('account lookup in a preprocessing hook', () => {
    expectCode(
      `export function authenticate(ctx) {
  var account = platform.system.getAccountByToken(ctx.query.token);
  if (account == null) platform.app.abort('token expired', 401);
  ctx.request.setAttribute('account', account);
}`,
      `export async function authenticate(ctx) {
  var account = (await platform.system.getAccountByToken(ctx.query.token));
  if (account == null) platform.app.abort('token expired', 401);
  ctx.request.setAttribute('account', account);
}`,
    );
  });

  test('request, saveBodyAsFile and a local helper that makes a host call', () => {
    expectCode(
      `export function fetchIt(ctx) {
  var r = platform.http.request({ url: 'https://x/y' });
  r.saveBodyAsFile('a/b.bin');
  return helper(ctx) + r.status;
}
function helper(ctx) { return platform.http.request({ url: ctx.query.u }).text(); }`,
      `export async function fetchIt(ctx) {
  var r = (await platform.http.request({ url: 'https://x/y' }));
  (await r.saveBodyAsFile('a/b.bin'));
  return (await helper(ctx)) + r.status;
}
async function helper(ctx) { return (await platform.http.request({ url: ctx.query.u })).text(); }`,
    );
  });

  test('saving every uploaded part in a for-of loop', () => {
    expectCode(
      `export function upload(ctx) {
  for (const p of ctx.getParts()) p.save('uploads/' + p.submittedFileName);
  return 'ok';
}`,
      `export async function upload(ctx) {
  for (const p of ctx.getParts()) (await p.save('uploads/' + p.submittedFileName));
  return 'ok';
}`,
    );
  });

  test('a chained call awaits each host call in the chain', () => {
    expectCode(
      `export function f(ctx) { platform.http.request({ url: ctx.query.u }).saveBodyAsFile('a.bin'); }`,
      `export async function f(ctx) { (await (await platform.http.request({ url: ctx.query.u })).saveBodyAsFile('a.bin')); }`,
    );
    expectCode(
      `export function f(x) { return platform.http.request(x).status; }`,
      `export async function f(x) { return (await platform.http.request(x)).status; }`,
    );
    expectCode(
      `export function f(x) { return platform.http.request(x).body.length + platform.http.request(x).json().n; }`,
      `export async function f(x) { return (await platform.http.request(x)).body.length + (await platform.http.request(x)).json().n; }`,
    );
  });

  test('saveStorage, saveAttachment and a computed host method name', () => {
    expectCode(
      `export function f(p) { p.saveStorage('s/a'); return p['saveAttachment']('t', 'f'); }`,
      `export async function f(p) { (await p.saveStorage('s/a')); return (await p['saveAttachment']('t', 'f')); }`,
    );
  });
});

describe('what is not a host call', () => {
  test('a script without host calls comes back unchanged', () => {
    const src = `export function f(ctx) {
  platform.app.abort('no', 400); // platform.http.request(x) in a comment
  console.log(platform.utils.toJSON({ a: 'request(' }), ctx.request.getHeader('x'));
  const s = "p.save('x')" + \`request(\${ctx.query.a})\`;
  return platform.utils.stringToBytes(s, 'utf-8');
}
/* p.save(1) */`;
    expect(rewrite(src)).toEqual({ code: src, async: true });
  });

  test('ctx.request is the request object: reading it is not a host call', () => {
    const src = `export function f(ctx) { const r = ctx.request; r.setAttribute('a', 1); return ctx.request.getAttribute('a'); }`;
    expect(rewrite(src)).toEqual({ code: src, async: true });
  });

  test('destructuring request from ctx is fine', () => {
    const src = `export function f({ request, query }) { return request.getHeader(query.h); }`;
    expect(rewrite(src)).toEqual({ code: src, async: true });
  });

  test('an empty module and a module of declarations only', () => {
    expect(rewrite('')).toEqual({ code: '', async: true });
    expect(rewrite('export const a = 1;\nexport function f() { return a }')).toEqual({ code: 'export const a = 1;\nexport function f() { return a }', async: true });
  });
});

describe('functions', () => {
  test('nested function declarations called directly become async, callers await them', () => {
    expectCode(
      `export function outer(ctx) {
  function inner(u) { return platform.http.request({ url: u }).status }
  const a = inner('a');
  return a + inner('b');
}`,
      `export async function outer(ctx) {
  async function inner(u) { return (await platform.http.request({ url: u })).status }
  const a = (await inner('a'));
  return a + (await inner('b'));
}`,
    );
  });

  test('arrows and function expressions bound by const, let or var', () => {
    expectCode(
      `const get = (u) => platform.http.request({ url: u }).text();
let one = function (u) { return get(u) };
var two = u => one(u);
export const main = (ctx) => two(ctx.query.u);`,
      `const get = async (u) => (await platform.http.request({ url: u })).text();
let one = async function (u) { return (await get(u)) };
var two = async u => (await one(u));
export const main = async (ctx) => (await two(ctx.query.u));`,
    );
  });

  test('a named function expression that calls itself by its own name', () => {
    expectCode(
      `export const walk = function step(n) { return n ? step(n - 1) : platform.x.save(n) };`,
      `export const walk = async function step(n) { return n ? (await step(n - 1)) : (await platform.x.save(n)) };`,
    );
  });

  test('recursion and mutual recursion', () => {
    expectCode(
      `export function fetchAll(urls, i) { if (i >= urls.length) return 0; return platform.http.request({ url: urls[i] }).status + fetchAll(urls, i + 1); }`,
      `export async function fetchAll(urls, i) { if (i >= urls.length) return 0; return (await platform.http.request({ url: urls[i] })).status + (await fetchAll(urls, i + 1)); }`,
    );
    expectCode(
      `function even(n) { return n === 0 ? platform.x.save('even') : odd(n - 1); }
function odd(n) { return n === 0 ? 'odd' : even(n - 1); }
export function main(ctx) { return odd(Number(ctx.query.n)); }`,
      `async function even(n) { return n === 0 ? (await platform.x.save('even')) : (await odd(n - 1)); }
async function odd(n) { return n === 0 ? 'odd' : (await even(n - 1)); }
export async function main(ctx) { return (await odd(Number(ctx.query.n))); }`,
    );
  });

  test('functions already async keep their header; host calls inside get awaited', () => {
    expectCode(
      `export async function f(x) { const r = platform.http.request(x); return (await g(r)) + r.status; }
async function g(r) { return r.status; }`,
      `export async function f(x) { const r = (await platform.http.request(x)); return (await g(r)) + r.status; }
async function g(r) { return r.status; }`,
    );
  });

  test('host calls already awaited stay as they are', () => {
    const src = `export async function f(x) { const r = await platform.http.request(x); await r.saveBodyAsFile('a'); return (await (platform.http.request(x))).status }`;
    expect(rewrite(src)).toEqual({ code: src, async: true });
    expectCode(
      `export async function f(x) { await platform.http.request(x).saveBodyAsFile('a'); }`,
      `export async function f(x) { await (await platform.http.request(x)).saveBodyAsFile('a'); }`,
    );
  });

  test('an async callback may hold host calls (its callers already expect a promise)', () => {
    expectCode(
      `export async function f(urls) { return Promise.all(urls.map(async (u) => platform.http.request({ url: u }).status)); }`,
      `export async function f(urls) { return Promise.all(urls.map(async (u) => (await platform.http.request({ url: u })).status)); }`,
    );
  });

  test('an async callback may call a local function that waits on the host', () => {
    expectCode(
      `function st(u) { return platform.http.request({ url: u }).status }
export async function f(urls) { return Promise.all(urls.map(async (u) => st(u))); }`,
      `async function st(u) { return (await platform.http.request({ url: u })).status }
export async function f(urls) { return Promise.all(urls.map(async (u) => (await st(u)))); }`,
    );
  });

  test('Promise.all over a plain callback falls back; over an async callback it is rewritten', () => {
    // A host call that throws while the array is built ends a blocking-mode call at once; as a
    // rejection inside Promise.all(Settled) it would not: so the plain callback is not left unawaited.
    expectFallback(`export function f(urls) {\n  return Promise.all(urls.map((u) => platform.http.request({ url: u }))) }`, /callback passed to another function at line 2$/);
    expectCode(
      `export function f(a, b) { return Promise.allSettled([platform.http.request(a), platform.http.request(b)]) }`,
      `export async function f(a, b) { return Promise.allSettled([(await platform.http.request(a)), (await platform.http.request(b))]) }`,
    );
    expectCode(
      `export function f(urls) { return Promise.all(urls.map(async (u) => platform.http.request({ url: u }))) }`,
      `export function f(urls) { return Promise.all(urls.map(async (u) => (await platform.http.request({ url: u })))) }`,
    );
  });

  test('immediately invoked function and arrow expressions', () => {
    expectCode(
      `export function f(x) { const a = (function () { return platform.x.save(x) })(); return (() => platform.x.save(a))(); }`,
      `export async function f(x) { const a = (await (async function () { return (await platform.x.save(x)) })()); return (await (async () => (await platform.x.save(a)))()); }`,
    );
  });

  test('export default: a function declaration, an anonymous function, an arrow', () => {
    expectCode(`export default function main(x) { return platform.x.save(x) }`, `export default async function main(x) { return (await platform.x.save(x)) }`);
    expectCode(`export default function (x) { return platform.x.save(x) }`, `export default async function (x) { return (await platform.x.save(x)) }`);
    expectCode(`export default (x) => platform.x.save(x);`, `export default async (x) => (await platform.x.save(x));`);
  });

  test('a function exported by name and also called locally', () => {
    expectCode(
      `function lookup(t) { return platform.system.getAccountByToken(t) }
export function main(ctx) { return typeof lookup === 'function' && lookup(ctx.query.t) }
export { lookup, lookup as find };
export default lookup;`,
      `async function lookup(t) { return (await platform.system.getAccountByToken(t)) }
export async function main(ctx) { return typeof lookup === 'function' && (await lookup(ctx.query.t)) }
export { lookup, lookup as find };
export default lookup;`,
    );
  });

  test('a shadowing local of the same name is its own function', () => {
    expectCode(
      `function helper() { return platform.x.save(1) }
export function f() { function helper() { return 2 } return helper() }
export function g() { return helper() }`,
      `async function helper() { return (await platform.x.save(1)) }
export function f() { function helper() { return 2 } return helper() }
export async function g() { return (await helper()) }`,
    );
  });

  test('a callback that calls nothing waiting on the host is left alone inside a rewritten function', () => {
    expectCode(
      `export function f(ctx) { const names = ctx.getParts().map((p) => p.name); platform.x.save(names.join()); }`,
      `export async function f(ctx) { const names = ctx.getParts().map((p) => p.name); (await platform.x.save(names.join())); }`,
    );
  });
});

describe('expressions', () => {
  test('conditionals keep their short-circuit', () => {
    expectCode(
      `export function f(a, b) { a && platform.x.save(1); b || platform.x.save(2); a ?? platform.x.save(3); return a ? platform.x.save(4) : b ? 5 : platform.x.save(6); }`,
      `export async function f(a, b) { a && (await platform.x.save(1)); b || (await platform.x.save(2)); a ?? (await platform.x.save(3)); return a ? (await platform.x.save(4)) : b ? 5 : (await platform.x.save(6)); }`,
    );
  });

  test('template literals, tagged templates, spread, array and object literals', () => {
    expectCode(
      'export function f(x) { return `s=${platform.http.request(x).status}` + [...platform.x.request(x)].length + { a: platform.x.save(1) }.a + platform.x.request`t`; }',
      'export async function f(x) { return `s=${(await platform.http.request(x)).status}` + [...(await platform.x.request(x))].length + { a: (await platform.x.save(1)) }.a + (await platform.x.request`t`); }',
    );
  });

  test('optional chaining: a chain that ends with the host call is awaited whole', () => {
    expectCode(`export function f(x) { return platform.http?.request(x); }`, `export async function f(x) { return (await platform.http?.request(x)); }`);
    expectCode(`export function f(x) { return platform.http.request?.(x); }`, `export async function f(x) { return (await platform.http.request?.(x)); }`);
    expectCode(`export function f(x) { return platform.http.request(x)?.status; }`, `export async function f(x) { return (await platform.http.request(x))?.status; }`);
    expectCode(
      `function g(x) { return platform.x.save(x) }\nexport function f(x) { return g?.(x); }`,
      `async function g(x) { return (await platform.x.save(x)) }\nexport async function f(x) { return (await g?.(x)); }`,
    );
  });

  test('assignments, updates, unary operators, exponent and `new` of a result', () => {
    expectCode(
      `export function f(x) { platform.x.request(x).n = 1; platform.x.request(x).n++; delete platform.x.request(x).n; return 2 ** -platform.x.request(x).n + typeof platform.x.save(x) + new (platform.x.request(x).C)(); }`,
      `export async function f(x) { (await platform.x.request(x)).n = 1; (await platform.x.request(x)).n++; delete (await platform.x.request(x)).n; return 2 ** -(await platform.x.request(x)).n + typeof (await platform.x.save(x)) + new ((await platform.x.request(x)).C)(); }`,
    );
  });

  test('control flow: switch, try/catch/finally, labels, loops, block-scoped functions', () => {
    expectCode(
      `export function f(x) {
  switch (x) { case 1: platform.x.save(1); break; default: platform.x.save(2) }
  try { platform.x.save(3) } catch (e) { platform.x.save(e) } finally { platform.x.save(4) }
  outer: for (let i = platform.x.request(0); i < 2; i += platform.x.request(1)) { if (i) continue outer; while (platform.x.request(i)) break; }
  { function b() { return platform.x.save(5) } b() }
}`,
      `export async function f(x) {
  switch (x) { case 1: (await platform.x.save(1)); break; default: (await platform.x.save(2)) }
  try { (await platform.x.save(3)) } catch (e) { (await platform.x.save(e)) } finally { (await platform.x.save(4)) }
  outer: for (let i = (await platform.x.request(0)); i < 2; i += (await platform.x.request(1))) { if (i) continue outer; while ((await platform.x.request(i))) break; }
  { async function b() { return (await platform.x.save(5)) } (await b()) }
}`,
    );
  });

  test('a statement starting with a host call after a line without a semicolon gets one', () => {
    expectCode(
      `export function f(p) {
  const a = p.name
  p.save('a').ok
  let b = a
  p.save('b')
  if (a) p.save('c')
  b = [1]
  ;(p.save('d'))
}`,
      `export async function f(p) {
  const a = p.name
  ;(await p.save('a')).ok
  let b = a
  ;(await p.save('b'))
  if (a) (await p.save('c'))
  b = [1]
  ;((await p.save('d')))
}`,
    );
  });

  test('no space between a keyword and the function: async does not run into it', () => {
    expectCode(`export default(x)=>platform.x.save(x)`, `export default async (x)=>(await platform.x.save(x))`);
    expectCode(`export default/* c */function(x){return platform.x.save(x)}`, `export default/* c */async function(x){return (await platform.x.save(x))}`);
  });

  test('a hashbang line, CRLF and Unicode line separators keep every line', () => {
    const src = '#!/usr/bin/env node\r\nexport function f(p) {\r\n  p.save(1)\u2028  p.save(2)\u2029  return 1\r\n}\r\n';
    const r = rewrite(src);
    expect(r.code).toBe('#!/usr/bin/env node\r\nexport async function f(p) {\r\n  (await p.save(1))\u2028  ;(await p.save(2))\u2029  return 1\r\n}\r\n');
  });
});

describe('fallback to blocking mode, with the reason and its line', () => {
  test('host call in a callback passed to another function', () => {
    expectFallback(
      `export function f(ctx) {
  return ctx.query.urls
    .map((u) => platform.http.request({ url: u }).status);
}`,
      /^host call `platform\.http\.request\(\.\.\.\)` inside a callback passed to another function at line 3$/,
    );
    expectFallback(`export function f(ctx) {\n  ctx.getParts().forEach(function (p) { p.save(p.name) });\n}`, /inside a callback passed to another function at line 2$/);
    expectFallback(`export function f() {\n  return new Promise((ok) => ok(platform.x.save(1)));\n}`, /inside a callback passed to another function at line 2$/);
  });

  test('call of a local function that waits on the host, in a callback', () => {
    expectFallback(
      `function lookup(t) { return platform.system.getAccountByToken(t) }
export function f(ctx) {
  return ctx.query.tokens.map(t => lookup(t));
}`,
      /^call of `lookup` \(which waits on the host\) inside a callback passed to another function at line 3$/,
    );
  });

  test('getters, setters, constructors, class and object methods', () => {
    expectFallback(`const o = {\n  get a() { return platform.x.save(1) } };\nexport function f() { return o.a }`, /inside a getter at line 2$/);
    expectFallback(`const o = { set a(v) {\n platform.x.save(v) } };\nexport function f() { o.a = 1 }`, /inside a setter at line 2$/);
    expectFallback(`class A {\n  get a() { return platform.x.save(1) } }\nexport function f() { return new A().a }`, /inside a getter at line 2$/);
    expectFallback(`class A { constructor() {\n this.r = platform.x.request(1) } }\nexport function f() { return new A() }`, /inside a class constructor at line 2$/);
    expectFallback(`class A { m() {\n return platform.x.request(1) } }\nexport function f() { return new A().m() }`, /inside a class method at line 2$/);
    expectFallback(`const o = { m() {\n return platform.x.request(1) } };\nexport function f() { return o.m() }`, /inside an object method at line 2$/);
    expectFallback(`const o = { m: function () {\n return platform.x.request(1) } };\nexport function f() { return o.m() }`, /inside a function stored in an object at line 2$/);
    expectFallback(`class A { m = () =>\n platform.x.request(1) }\nexport function f() { return new A().m() }`, /inside a function stored in a class field at line 2$/);
  });

  test('an already async method is fine', () => {
    const r = rewrite(`class A { async m() { return platform.x.request(1) } }\nexport function f() { return new A().m() }`);
    expect(r).toEqual({ code: `class A { async m() { return (await platform.x.request(1)) } }\nexport function f() { return new A().m() }`, async: true });
  });

  test('generators (async generators are fine)', () => {
    expectFallback(`export function* f() {\n  yield platform.x.request(1);\n}`, /^host call `platform\.x\.request\(\.\.\.\)` inside a generator at line 2$/);
    expectCode(`export async function* f() { yield platform.x.request(1); }`, `export async function* f() { yield (await platform.x.request(1)); }`);
  });

  test('default parameter values', () => {
    expectFallback(`export function f(ctx,\n  acct = platform.system.getAccountByToken(ctx.query.t)) { return acct }`, /inside a default parameter value at line 2$/);
    expectFallback(`export async function f(ctx, { a = platform.x.save(1) } = {}) { return a }`, /inside a default parameter value at line 1$/);
  });

  test('top-level module code, class field initializers and static blocks', () => {
    expectFallback(`const x = 1;\nconst account = platform.system.getAccountByToken('t');\nexport function f() { return account }`, /^host call `platform\.system\.getAccountByToken\(\.\.\.\)` inside top-level module code \(outside any function\) at line 2$/);
    expectFallback(`for (const p of ctx.getParts()) p.save('uploads/' + p.submittedFileName);`, /inside top-level module code/);
    expectFallback(`function g() { return platform.x.save(1) }\nexport const v = g();`, /^call of `g` \(which waits on the host\) inside top-level module code \(outside any function\) at line 2$/);
    expectFallback(`class A {\n  r = platform.x.request(1) }\nexport function f() { return new A().r }`, /inside a class field initializer at line 2$/);
    expectFallback(`class A { static {\n  platform.x.request(1) } }`, /inside a class static block at line 2$/);
  });

  test('a function that waits on the host but is used as a value', () => {
    const defs = `function lookup(t) { return platform.system.getAccountByToken(t) }\n`;
    expectFallback(`${defs}export function f(ctx) {\n  return ctx.query.t.map(lookup) }`, /^function `lookup` waits on the host but is used as a value at line 3 \(only direct calls `lookup\(\.\.\.\)` can be awaited\)$/);
    expectFallback(`${defs}export function f() {\n  return lookup }`, /`lookup` waits on the host but is used as a value at line 3/);
    expectFallback(`${defs}const o = {};\no.find = lookup;`, /used as a value at line 3/);
    expectFallback(`${defs}export function f() {\n  return new lookup('t') }`, /used as a value at line 3/);
    expectFallback(`${defs}export function f() {\n  return lookup.call(null, 't') }`, /used as a value at line 3/);
    expectFallback(`${defs}export function f() {\n  return lookup.apply(null, ['t']) }`, /used as a value at line 3/);
    expectFallback(`${defs}export const o = {\n  lookup };`, /used as a value at line 3/);
  });

  test('anonymous functions returned or stored', () => {
    expectFallback(`export function f() {\n  return () => platform.x.save(1) }`, /^host call `platform\.x\.save\(\.\.\.\)` inside a function used as a value .* at line 2$/);
    expectFallback(`export const fns = [\n  function () { return platform.x.save(1) }];`, /inside a function used as a value .* at line 2$/);
  });

  test('a function that waits on the host and is reassigned or declared twice', () => {
    expectFallback(`let g = () => platform.x.save(1);\nexport function f() { return g() }\ng = () => 2;`, /^function `g` waits on the host but is reassigned at line 3$/);
    expectFallback(`export function f() {\n  var g = function () { return platform.x.save(1) };\n  var g = () => 2;\n  return g() }`, /^function `g` waits on the host but is declared more than once \(line 2\)$/);
  });

  test('an async function that waits on the host and whose promise is dropped', () => {
    expectFallback(
      `export function f(ctx) {\n  ctx.getParts().forEach(async (p) => { await p.save('u/' + p.name) });\n}`,
      /^async callback passed to forEach at line 2 waits on the host, but nothing waits for it \(use a for\.\.\.of loop\)$/,
    );
    const saveAll = `async function saveAll(ctx) { for (const p of ctx.getParts()) await p.save(p.name) }\n`;
    expectFallback(`${saveAll}export function f(ctx) {\n  saveAll(ctx);\n  return 'ok' }`, /^call of async `saveAll` at line 3 is not awaited, but it waits on the host$/);
    expectFallback(`${saveAll}export async function f(ctx) {\n  void saveAll(ctx) }`, /^call of async `saveAll` at line 3 is not awaited/);
    expectFallback(`export function f(p) {\n  (async () => { await p.save('a') })();\n}`, /^async function called at line 2 waits on the host, but its promise is not awaited$/);
    expectFallback(`export function f(ps) {\n  ps.map(async (p) => p.save('a'));\n}`, /^async callback at line 2 waits on the host, but the call it is passed to is not awaited$/);
    // returned by a callback whose value is dropped, under && / ?: / a comma, or through another async function
    expectFallback(`${saveAll}export function f(ctx) {\n  [ctx].forEach((c) => saveAll(c));\n  return 1 }`, /^call of async `saveAll` at line 3 is not awaited/);
    expectFallback(`${saveAll}export function f(ctx) {\n  ctx.query.go && saveAll(ctx);\n  return 1 }`, /^call of async `saveAll` at line 3 is not awaited/);
    expectFallback(`${saveAll}export function f(ctx) {\n  ctx.query.go ? saveAll(ctx) : null, 1;\n  return 1 }`, /^call of async `saveAll` at line 3 is not awaited/);
    expectFallback(`${saveAll}async function outer(ctx) { await saveAll(ctx) }\nexport function f(ctx) {\n  outer(ctx);\n  return 1 }`, /^call of async `outer` at line 4 is not awaited/);
    // chained with then/catch/finally as a statement, tested as a condition, kept in a variable never read
    expectFallback(`${saveAll}export function f(ctx) {\n  saveAll(ctx).catch(() => null);\n  return 1 }`, /^call of async `saveAll` at line 3 is not awaited/);
    expectFallback(`${saveAll}export function f(ctx) {\n  saveAll(ctx).then((x) => x).finally(() => 0);\n  return 1 }`, /^call of async `saveAll` at line 3 is not awaited/);
    expectFallback(`${saveAll}export function f(ctx) {\n  if (saveAll(ctx)) return 1;\n  return 2 }`, /^call of async `saveAll` at line 3 is not awaited/);
    expectFallback(`${saveAll}export function f(ctx) {\n  const pending = saveAll(ctx);\n  return 1 }`, /^call of async `saveAll` at line 3 is not awaited/);
    expectFallback(`export function f(ctx) {\n  const ps = ctx.getParts().map(async (p) => p.save(p.name));\n  return 1 }`, /^async callback at line 2 waits on the host, but the call it is passed to is not awaited$/);
    // an async method that waits on the host, called as a statement
    expectFallback(`const store = { async keep(ctx) { await ctx.getParts()[0].save('a') } };\nexport function f(ctx) {\n  store.keep(ctx);\n  return 1 }`, /^call of async method `keep` at line 3 is not awaited, but it waits on the host$/);
    expectFallback(`class Store { async keep(p) { return p.save('a') } }\nexport function f(ctx) {\n  new Store().keep(ctx.getParts()[0]).catch(() => 0);\n  return 1 }`, /^call of async method `keep` at line 3 is not awaited/);
    // an async method named like a host method: its calls are awaited like host calls
    const named = `const store = { async save(p) { await p.save('x') } };\nexport function f(p) { p.save('a'); store.save(p); return 1 }`;
    expect(rewrite(named).async).toBe(true);
    // awaited, returned or collected: fine
    const ok = `${saveAll}export async function f(ctx) { await saveAll(ctx); return saveAll(ctx) }\nexport function g(ctx) { const all = [saveAll(ctx)]; return Promise.all(all) }`;
    expect(rewrite(ok)).toEqual({ code: ok, async: true });
    // an async callback that only awaits local work may be dropped: it does not wait on the host
    const local = `export function f(ctx, xs) { xs.forEach(async (x) => { await x.done }); return ctx.request.getHeader('a') }`;
    expect(rewrite(local)).toEqual({ code: local, async: true });
  });

  test('a shared total updated with a host call while async code may run at the same time', () => {
    expectFallback(
      `export async function f(xs) {\n  let total = 0;\n  await Promise.all(xs.map(async (x) => { total += platform.http.request(x).status }));\n  return total }`,
      /^host call in `total \+= \.\.\.` at line 3: `total` would be read before the wait while other async code may change it \(write `const v = \.\.\.; total \+= v`\)$/,
    );
    expectFallback(`const o = { n: 0 };\nasync function add(x) {\n  o.n ||= platform.http.request(x).status }\nexport async function f(xs) { await Promise.all(xs.map(add)) }`, /^host call in `o\.n \|\|= \.\.\.` at line 3/);
    // the same with a plain assignment that reads its target (or, for its key, its object) first
    expectFallback(
      `export async function f(xs) {\n  let total = 0;\n  await Promise.all(xs.map(async (x) => { total = total + platform.http.request(x).json().n }));\n  return total }`,
      /^host call in `total = \.\.\.` at line 3: `total` would be read before the wait while other async code may change it \(take the host call into a variable first: `const v = \.\.\.;`\)$/,
    );
    expectFallback(`const o = { n: 0 };\nasync function add(x) {\n  o.n = o.n + platform.http.request(x).status }\nexport async function f(xs) { await Promise.all(xs.map(add)) }`, /^host call in `o\.n = \.\.\.` at line 3/);
    expectFallback(`export async function f(ctx) {\n  const seen = [];\n  await Promise.all(ctx.getParts().map(async (p) => { seen[seen.length] = p.save(p.name) }));\n  return seen }`, /^host call in `seen\[seen\.length\] = \.\.\.` at line 3/);
    // a plain assignment that reads nothing of its target: fine
    expectCode(
      `export async function f(xs) { const out = []; await Promise.all(xs.map(async (x, i) => { out[i] = platform.http.request(x).status; totals.last = platform.http.request(x).status })); return out }`,
      `export async function f(xs) { const out = []; await Promise.all(xs.map(async (x, i) => { out[i] = (await platform.http.request(x)).status; totals.last = (await platform.http.request(x)).status })); return out }`,
    );
    // read after the wait, or a variable of the function itself: fine
    expectCode(
      `export async function f(xs) { let total = 0; await Promise.all(xs.map(async (x) => { const v = platform.http.request(x).status; total += v })); return total }`,
      `export async function f(xs) { let total = 0; await Promise.all(xs.map(async (x) => { const v = (await platform.http.request(x)).status; total += v })); return total }`,
    );
    expectCode(
      `export async function f(xs) { let n = 0; for (const x of xs) n += platform.http.request(x).status; return n }`,
      `export async function f(xs) { let n = 0; for (const x of xs) n += (await platform.http.request(x)).status; return n }`,
    );
    // no function written async waits on the host: each call runs its steps in order
    expectCode(
      `let hits = 0;\nexport function f(x) { hits += platform.http.request(x).status; return hits }`,
      `let hits = 0;\nexport async function f(x) { hits += (await platform.http.request(x)).status; return hits }`,
    );
  });

  test('an optional chain before a host call inside a longer chain', () => {
    expectFallback(`export function f(a) {\n  return a?.b.request(1).status }`, /^host call `a\?\.b\.request\(\.\.\.\)` inside an optional chain \(`\?\.`\) before it at line 2$/);
    expectFallback(`export function f(p) {\n  return p?.save(1).ok }`, /optional chain .* at line 2$/);
    expectCode(`export function f(a) { return a?.b.request(1)?.status.code }`, `export async function f(a) { return (await a?.b.request(1))?.status.code }`);
  });

  test('host methods taken as values or destructured', () => {
    expectFallback(`export function f(x) {\n  const r = platform.http.request;\n  return r(x) }`, /^host method `platform\.http\.request` used as a value at line 2 \(only direct calls can be awaited\)$/);
    expectFallback(`export function f(x) {\n  return platform.http.request.call(platform.http, x) }`, /host method `platform\.http\.request` used as a value at line 2/);
    expectFallback(`export function f(x) {\n  const { request } = platform.http;\n  return request(x) }`, /^host method `request` destructured at line 2/);
    expectFallback(`export function f(x) {\n  const { http: { request } } = platform;\n  return request(x) }`, /host method `request` destructured at line 2/);
    expectFallback(`export function f(ctx) {\n  for (const { save, name } of ctx.getParts()) save(name) }`, /host method `save` destructured at line 2/);
    expectFallback(`export function f(p) {\n  return [p].map(p.save) }`, /host method `p\.save` used as a value at line 2/);
    expectFallback(`export function f(p) {\n  return (0, p.saveBodyAsFile)('a') }`, /host method `p\.saveBodyAsFile` used as a value at line 2/);
  });

  test('platform.http / platform.system kept in a variable: its helpers are host calls there too', () => {
    expectCode(
      `export function f(x) {\n  const h = platform.http;\n  return h.request(x).status }`,
      `export async function f(x) {\n  const h = platform.http;\n  return (await h.request(x)).status }`,
    );
    expectFallback(`export function f(x) {\n  const h = platform.http;\n  const get = h.request;\n  return get(x).status }`, /^host method `h\.request` used as a value at line 3/);
    expectFallback(`export function f(x) {\n  const h = platform.http;\n  const { request } = h;\n  return request(x).json() }`, /^host method `request` destructured at line 3/);
    expectFallback(`export function f(urls) {\n  const { http: net } = platform;\n  return urls.map(net.request).map((r) => r.status) }`, /^host method `net\.request` used as a value at line 3/);
    expectFallback(`export function f(x, op) {\n  let h;\n  h = platform.http;\n  return h[op](x).status }`, /^`h\[op\]\(\.\.\.\)` at line 4 calls a host helper by a computed name/);
    // `ctx.request` as a value is the request object, not a host method
    const src = `export function f(ctx) { var req = ctx.request; const p = platform; return [req.getHeader('a'), p.http] }`;
    expect(rewrite(src).reason).toMatch(/^host object `p\.http` passed on or stored at line 1/);
  });

  test('a host object passed on or stored: its helpers could be taken as values out of sight', () => {
    expectFallback(
      `function go({ request }, o) { return request(o).json() }\nexport function f(o) {\n  return go(platform.http, o) }`,
      /^host object `platform\.http` passed on or stored at line 3 \(call its helpers on it by name\)$/,
    );
    expectFallback(`export function f() {\n  const s = platform.system;\n  return { s } }`, /^host object `s` passed on or stored at line 3/);
    expectFallback(`export function f(o) {\n  return [platform?.http] }`, /host object `platform\?\.http` passed on or stored at line 2/);
    // tested, compared or read from: still in sight
    const src = `export function f(data) { if (!platform.http || typeof platform.system !== 'object') return 0; return JSON.stringify(data.system) }`;
    expect(rewrite(src)).toEqual({ code: src, async: true });
  });

  test('a helper of platform.http or platform.system called by a computed name', () => {
    expectFallback(`export function f(o, m) {\n  return platform.http[m](o) }`, /^`platform\.http\[m\]\(\.\.\.\)` at line 2 calls a host helper by a computed name \(call it by its name\)$/);
    expectFallback(`export function f(t, m) {\n  const system = platform.system; return system[m](t) }`, /^`system\[m\]\(\.\.\.\)` at line 2 calls a host helper/);
    const src = `export function f(handlers, op, ctx) { return handlers[op](ctx) + ctx.request.getHeader('a') }`;
    expect(rewrite(src)).toEqual({ code: src, async: true });
  });

  test('a host object, platform or globalThis read by a computed name: what it reaches cannot be seen', () => {
    expectFallback(`export function f(o, m) {\n  const get = platform.http[m];\n  return get(o).status }`, /^`platform\.http` read by a computed name at line 2 \(read host objects and their helpers by name\)$/);
    expectFallback(`export function f(o, k, m) {\n  return platform[k][m](o).status }`, /^`platform` read by a computed name at line 2/);
    expectFallback(`export function f(o, k) {\n  const p = platform;\n  return p[k].request(o).status }`, /^`p` read by a computed name at line 3/);
    expectFallback(`export function f(s, k) {\n  return globalThis[k](s) }`, /^`globalThis` read by a computed name at line 2/);
    expectFallback(`export function f(o, k, m) {\n  const { [k]: h } = platform;\n  return h[m](o).status }`, /^host object `platform` passed on or stored at line 2/);
    expectFallback(`export function f(o, k, m) {\n  const { app, ...rest } = platform;\n  return rest[k][m](o).status }`, /^host object `platform` passed on or stored at line 2/);
    expectFallback(`function go(p, o) { return p['ht' + 'tp']['req' + 'uest'](o).status }\nexport function f(o) {\n  return go(platform, o) }`, /^host object `platform` passed on or stored at line 3/);
    expectFallback(`export function f(k) {\n  return Object.values(globalThis).length }`, /^host object `globalThis` passed on or stored at line 2/);
    // read by name, aliased, destructured by name, tested: in sight
    const src = `export function f(ctx) { const p = platform, g = globalThis; const { http, app } = p; if (!g.platform || typeof platform !== 'object') app.abort('x'); return [http.request(ctx).status, g.Math.max(1, 2), globalThis.JSON.stringify(1)] }`;
    expect(rewrite(src).async).toBe(true);
  });

  test('defining a method of a host method name, testing it with typeof, deleting it: not a value use', () => {
    const src = `export function f(o) { o.save = (x) => x; if (typeof o.request === 'function') delete o.saveStorage; return 1 }`;
    expect(rewrite(src)).toEqual({ code: src, async: true });
  });

  test('code built at run time: eval, Function, globalThis.eval', () => {
    expectFallback(`export function f(s) {\n  return eval(s) }`, /^`eval` at line 2: code built at run time cannot be rewritten$/);
    expectFallback(`export function f(s) {\n  return new Function(s)() }`, /^`Function` at line 2: code built at run time/);
    expectFallback(`export function f(s) {\n  return globalThis['eval'](s) }`, /^`globalThis\['eval'\]` at line 2: code built at run time/);
    expectFallback(`export function f(s) {\n  return (() => 1).constructor(s)() }`, /^`\(\(\) => 1\)\.constructor\(\.\.\.\)` at line 2: code built at run time/);
  });

  test('a constructor taken as a value or newed: Function reached without its name', () => {
    expectFallback(`export function f(s) {\n  return new ((() => 1).constructor)(s)() }`, /^`\(\(\) => 1\)\.constructor` at line 2: code built at run time cannot be rewritten$/);
    expectFallback(`export function f(s) {\n  const F = Object.getPrototypeOf(async () => {}).constructor;\n  return F(s)() }`, /^`Object\.getPrototypeOf\(async \(\) => \{\}\)\.constru\.\.\.` at line 2: code built at run time/);
    expectFallback(`export function f(s) {\n  return (() => 1).constructor.call(null, s)() }`, /^`\(\(\) => 1\)\.constructor` at line 2: code built at run time/);
    // compared, named, typeof, or defined: not code built at run time
    const src = `export function f(o, C) { C.prototype.constructor = C; return [o.constructor === Object, o.constructor.name, typeof o.constructor, platform.http.request(o).status] }`;
    expect(rewrite(src).async).toBe(true);
  });

  test('a local binding named eval or Function is just a binding', () => {
    const src = `export function f(Function) { const ev = { eval: 1 }; return Function + ev.x; }`;
    expect(rewrite(src)).toEqual({ code: src, async: true });
  });

  test('imports: functions of another module may wait on the host', () => {
    expectFallback(`import { lookup } from './lib.js';\nexport function f(t) { return lookup(t) }`, /^`import` at line 1: functions of another module may wait on the host$/);
    expectFallback(`export async function f(t) {\n  return (await import('./lib.js')).lookup(t) }`, /^`import` at line 2/);
  });

  test('syntax errors are left for the engine to report', () => {
    const r = expectFallback(`export function f( {\n  return 1\n}`, /^syntax error at line 2: /);
    expect(r.reason).not.toMatch(/\(\d+:\d+\)$/);
    expectFallback(`export function f() {\n  with (a) { b() } }`, /^syntax error at line 2: /);
    expectFallback(`export function f() {\n  await platform.x.save(1) }`, /^syntax error at line 2: /);
  });

  test('the reason names the file when given, and the earliest problem wins', () => {
    const src = `export function f(a) {\n  a.map(x => platform.x.save(x));\n}\nexport function g(a) {\n  a.map(x => platform.x.save(x)) }`;
    expect(rewriteHostCalls(src, { filename: 'main.js' })).toEqual({
      code: src,
      async: false,
      reason: 'main.js: host call `platform.x.save(...)` inside a callback passed to another function at line 2',
    });
  });

  test('one fallback anywhere makes the whole script fall back', () => {
    const src = `export function ok(ctx) { return platform.http.request(ctx).status }\nexport function bad(a) {\n  return a.map(x => platform.x.save(x)) }`;
    expect(rewrite(src)).toEqual({ code: src, async: false, reason: expect.stringMatching(/at line 3$/) });
  });
});

describe('the shipped examples', () => {
  const fs = require('node:fs');
  const path = require('node:path');
  const { transform } = require('sucrase');
  const dirs = [path.join(__dirname, '..', 'examples', 'apps', 'shop', 'scripts'), path.join(__dirname, '..', 'examples', 'scripts-tsconfig')];
  const files = dirs.flatMap((d) => fs.readdirSync(d).filter((f) => /\.(js|ts)$/.test(f)).map((f) => path.join(d, f)));

  test.each(files.map((f) => [path.relative(path.join(__dirname, '..'), f), f]))('%s runs in async mode', (_name, file) => {
    let source = fs.readFileSync(file, 'utf8');
    if (file.endsWith('.ts')) source = transform(source, { transforms: ['typescript'], disableESTransforms: true, production: true }).code;
    const r = rewrite(source, { filename: path.basename(file) });
    expect(r.reason).toBeUndefined();
    expect(r.async).toBe(true);
  });
});

describe('every await is wrapped', () => {
  // (so that the code after it acts for its own call: lib/runtime/sandbox/continuations.ts)
  const wrapped = (x) => `__resume(__current(),${x})`;

  test("the script's own awaits and the inserted ones: the await itself as written", () => {
    expect(checked(`export async function f(p, q) {\n  const a = await p;\n  const b = platform.http.request(q).status;\n  return await(a) + await await b;\n}`)).toEqual({
      code: `export async function f(p, q) {\n  const a = ${wrapped('await p')};\n  const b = (${wrapped('await platform.http.request(q)')}).status;\n  return ${wrapped('await(a)')} + ${wrapped(`await ${wrapped('await b')}`)};\n}`,
      async: true,
    });
  });

  test('in a script with no host call too, and a statement that starts with an await after a line without a semicolon keeps its meaning', () => {
    expect(checked('export async function f(p) {\n  let a = 1\n  await p\n  return a\n}')).toEqual({
      code: `export async function f(p) {\n  let a = 1\n  ${wrapped('await p')}\n  return a\n}`,
      async: true,
    });
  });

  test("each try of an async function notes the call as it begins; its catch and finally resume it (a rejection thrown at an await lands there)", () => {
    const src = 'export async function f(p) {\n  a: try { await p } catch (e) { g(e) } finally { h() }\n  try { x() } catch { }\n}\nfunction s() { try { x() } catch (e) {} }';
    expect(checked(src)).toEqual({
      code:
        'export async function f(p) {\n' +
        `  {const __callToken=__current();a: try { ${wrapped('await p')} } catch (e) {__resume(__callToken); g(e) } finally {__resume(__callToken); h() }}\n` +
        '  {const __callToken=__current();try { x() } catch {__resume(__callToken); }}\n' +
        '}\nfunction s() { try { x() } catch (e) {} }',
      async: true,
    });
  });

  test('an await at the head of a catch or finally block comes after its resume', () => {
    expect(checked('export async function f(p) { try {await p} catch ({ message }) {await p} finally {await p} }')).toEqual({
      code: `export async function f(p) { {const __callToken=__current();try {${wrapped('await p')}} catch ({ message }) {__resume(__callToken);${wrapped('await p')}} finally {__resume(__callToken);${wrapped('await p')}}} }`,
      async: true,
    });
  });

  test("a yield of an async generator is wrapped as an await is (a queued next() resumes it from a promise job); a generator's is not", () => {
    expect(checked('export async function* g(p) { const v = yield p; yield; }\nexport function* h() { yield 1 }')).toEqual({
      code: `export async function* g(p) { const v = ${wrapped('yield p')}; ${wrapped('yield')}; }\nexport function* h() { yield 1 }`,
      async: true,
    });
  });

  test('the insertions it reports map the columns of code after a wrapped await back to the source', () => {
    const insertions = [];
    const r = rewriteHostCalls('export async function f(p) { return await p + x.y }', { insertions });
    const col = r.code.indexOf('x.y') + 1;
    expect(sourceColumn(insertions, 1, col)).toBe('export async function f(p) { return await p + x.y }'.indexOf('x.y') + 1);
  });

  test('a script that names what the wrapping uses, also with an escape, runs unchanged in blocking mode', () => {
    expectFallback('export async function f(p) {\n  return __resume(null, await p)\n}', /the name `__resume` at line 2 is the runtime's own/);
    expectFallback('const \\u005f_current = () => 1;\nexport async function f(p) { return await p }', /the name `__current` at line 1 is the runtime's own/);
    expectFallback('export async function f(p) { let __callToken = 1; try { await p } catch {} }', /`__callToken`/);
    // (also in a script with nothing else to rewrite)
    expectFallback('export function f() { return typeof __resume }', /the name `__resume` at line 1 is the runtime's own/);
    // a property of that name is no name of the script's scope
    expect(checked('export async function f(ctx) { await 1; return [ctx.__current, { __resume: 1 }.__resume] }').async).toBe(true);
  });

  test('`for await` runs the script in blocking mode, naming the loop', () => {
    expectFallback('async function* g() { yield 1 }\nexport async function f() {\n  for await (const v of g()) return v\n}', /^`for await` at line 3: /);
  });
});

describe('size', () => {
  test('a long expression chain is rewritten without overflowing the stack (900 terms: the parser recurses once a term, and stops at 1,000 levels)', () => {
    const sum = Array.from({ length: 900 }, (_, i) => `p.save(${i})`).join(' + ');
    const r = rewriteHostCalls(`export function f(p) { return ${sum} }`, PLAIN);
    expect(r.async).toBe(true);
    expect(r.code.match(/\(await p\.save\(/g)).toHaveLength(900);
  });

  // (the parser and the scope analysis looked each declared name up among those before it in its
  // scope: quadratic; each of these took half a minute or more, on the worker's thread, outside any limit)
  const many = (n, f, sep) => Array.from({ length: n }, (_, i) => f(i)).join(sep);
  test('a module of 120,000 top-level functions is parsed in time linear in its names', () => {
    const { parseModule } = require('../dist/cjs/runtime/rewrite/ast.js');
    const t0 = Date.now();
    const ast = parseModule(`${many(120000, (i) => `function f${i}(a) { return a + ${i} }`, '\n')}\nexport function fn() {}`);
    expect(ast.body).toHaveLength(120001);
    expect(Date.now() - t0).toBeLessThan(15000);
  });
  test.each([
    ['a function of 200,000 parameters', `function g(${many(200000, (i) => `p${i}`, ',')}) { return p1 }\nexport function fn(ctx) { return platform.http.request(ctx.query.u + g()) }`],
    ['one destructuring of 200,000 names', `export function fn(ctx) { const { ${many(200000, (i) => `k${i}`, ',')} } = ctx.query; return platform.http.request(ctx.query.u + k1) }`],
  ])('a module with %s is parsed and analyzed in time linear in its names', (_name, source) => {
    const t0 = Date.now();
    const r = rewriteHostCalls(source, PLAIN);
    expect(r.async).toBe(true);
    expect(r.code).toMatch(/return \(await platform\.http\.request\(ctx\.query\.u \+ (g\(\)|k1)\)\)/);
    expect(Date.now() - t0).toBeLessThan(15000);
  });

  test('redeclarations are still found, in every kind of scope', () => {
    for (const bad of ['let a; let a;', 'function f() {} let f;', 'var x; let x;', 'let y; { var y; }', 'try {} catch (e) { let e; }', 'function g() {} function g() {}', 'export { z }', 'function h(a, a) { "use strict" }']) {
      expect(rewriteHostCalls(bad)).toMatchObject({ async: false, syntaxError: expect.stringMatching(/has already been declared|is not defined|Argument name clash/) });
    }
    expect(rewriteHostCalls('var v; var v; let w; { let w; } try {} catch (c) { var c; }').async).toBe(true);
  });

  // (acorn caught its stack overflow with a regular expression, which V8 on Node.js 20 could not
  // compile with the stack that full: 500 nested function expressions ended the process)
  test.each([
    ['function expressions', (n) => `${'(function(){'.repeat(n)}${'})();'.repeat(n)}`],
    ['arrow functions', (n) => `var f = ${'() => '.repeat(n)}1;`],
    ['blocks', (n) => `${'{'.repeat(n)}${'}'.repeat(n)}`],
    ['arrays', (n) => `var a = ${'['.repeat(n)}${']'.repeat(n)};`],
    ['objects', (n) => `var o = ${'{a:'.repeat(n)}1${'}'.repeat(n)};`],
    ['unary operators', (n) => `var u = ${'!'.repeat(n)}1;`],
    ['conditionals', (n) => `var t = ${'a ? b : '.repeat(n)}c;`],
    ['binary operators', (n) => `var b = ${'a + '.repeat(n)}1;`],
    ['templates', (n) => `var t = ${'`${'.repeat(n)}1${'}`'.repeat(n)};`],
    ['if statements', (n) => `${'if (a) '.repeat(n)};`],
    ['binding patterns', (n) => `var ${'['.repeat(n)}a${']'.repeat(n)} = x;`],
    ['new expressions', (n) => `var x = ${'new '.repeat(n)}X;`],
  ])('%s nested 100,000 deep fall back to blocking mode, naming why; 500 deep are rewritten or fall back so', (_name, make) => {
    const source = (n) => `export function fn(ctx) { ${make(n)} return platform.http.request(ctx.query.u) }`;
    expect(rewriteHostCalls(source(100000))).toEqual({ code: source(100000), async: false, reason: 'the script is nested too deeply to analyze' });
    const r = rewriteHostCalls(source(500), PLAIN);
    if (r.async) expect(r.code).toContain('return (await platform.http.request(ctx.query.u))');
    else expect(r).toEqual({ code: source(500), async: false, reason: 'the script is nested too deeply to analyze' });
    // (nesting a person writes is far from the bound)
    expect(rewriteHostCalls(`export function fn(ctx) { ${make(40)} return platform.http.request(ctx.query.u) }`).async).toBe(true);
  });

  test('an expression nested too deeply to analyze falls back instead of throwing', () => {
    // (how deep the analysis can go depends on the stack left to this thread: 5,000 terms may or
    // may not fit, 200,000 never do; neither throws)
    const source = (n) => `export function f(p) { return ${Array.from({ length: n }, (_, i) => `p.save(${i})`).join(' + ')} }`;
    const mid = rewriteHostCalls(source(5000));
    if (mid.async) expect(mid.code.match(/\(await p\.save\(/g)).toHaveLength(5000);
    else expect(mid).toEqual({ code: source(5000), async: false, reason: 'the script is nested too deeply to analyze' });
    expect(rewriteHostCalls(source(200000))).toEqual({
      code: expect.any(String),
      async: false,
      reason: 'the script is nested too deeply to analyze',
    });
  });
});

describe('columns', () => {
  const { sourceColumn } = require('../dist/cjs/runtime/rewrite/index.js');
  const { corpus } = require('./helpers/rewrite-corpus');

  test('the insertions it reports map every column of the rewritten code to the column as written', () => {
    let checked = 0;
    for (const [, , source] of corpus()) {
      const insertions = [];
      const r = rewriteHostCalls(source, { insertions });
      if (!r.async) {
        expect(insertions).toEqual([]);
        continue;
      }
      const written = source.split('\n');
      const ran = r.code.split('\n');
      written.forEach((text, i) => {
        const line = i + 1;
        const here = insertions.filter(([l]) => l === line);
        for (let c = 0; c < text.length; c++) {
          const at = c + here.filter(([, col]) => col <= c).reduce((n, [, , length]) => n + length, 0);
          expect(ran[i][at]).toBe(text[c]);
          expect(sourceColumn(insertions, line, at + 1)).toBe(c + 1);
          checked++;
        }
        // (a column inside inserted text is where it was inserted)
        for (const [, col, length] of here) {
          const start = col + here.filter(([, c2]) => c2 < col).reduce((n, [, , l2]) => n + l2, 0);
          for (let k = 0; k < length; k++) expect(sourceColumn(insertions, line, start + k + 1)).toBe(col + 1);
        }
      });
    }
    expect(checked).toBeGreaterThan(10000);
  });

  test('a script with no host calls reports no insertions', () => {
    const insertions = [];
    expect(rewriteHostCalls('export function f() { return 1 }', { insertions })).toEqual({ code: 'export function f() { return 1 }', async: true });
    expect(insertions).toEqual([]);
  });
});
