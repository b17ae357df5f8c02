'use strict';
// A corpus for the host-call rewrite: every form of host call (FORMS) in every context (CONTEXTS),
// as exported functions `main(ctx)` over two local helpers. Used by the execution tests in Node
// (test/rewrite-exec.test.js) and in QuickJS (test/rewrite-quickjs.test.js).

const FORMS = [
  `platform.http.request({ url: 'https://h/1' })`,
  `platform.http?.request({ url: 'https://h/2' })`,
  `platform.http.request?.({ url: 'https://h/3' })`,
  `platform.http['request']({ url: 'https://h/missing' })`,
  `get('https://h/5')`,
  `getArrow('https://h/6')`,
  `(() => platform.http.request({ url: 'https://h/7' }))()`,
  `(function () { return get('https://h/8') })()`,
];
const CONTEXTS = [
  'return H.status;',
  'const r = H; return r.status;',
  'return [H.status, H.text()];',
  'return `${H.status}-${H.body}`;',
  'let x = 1; x += H.status; return x;',
  'return ctx.query.a && H.status;',
  'return ctx.query.b && H.status;',
  'return ctx.query.a ? H.status : 0;',
  'return ctx.query.none ?? H.status;',
  'return ctx.query.a || H.status;',
  "if (H.status === 200) return 'ok'; return 'no';",
  'const a = []; for (let i = 0; i < 2; i++) { a.push(H.status) } return a;',
  'const a = []; while (a.length < 2) a.push(H.status); return a;',
  "switch (H.status) { case 200: return 'ok'; default: return 'other' }",
  'try { return H.text() } finally { ctx.query.f = 1 }',
  'try { throw new Error(H.text()) } catch (e) { return e.message }',
  'const { status } = H; return status;',
  'const [s = H.status] = []; return s;',
  'return { s: H.status, ...{ t: H.text() } };',
  'return typeof H;',
  'return (0, H).status;',
  'return (H).status;',
  'return H.json().url;',
  'label: { if (H.status) break label; } return 1;',
  'const o = {}; o[H.status] = 1; return o;',
  'const o = { n: 1 }; o.n += H.status; return o.n;',
  'return -H.status + 2 ** H.status % 7;',
  'return !H;',
  'do { return H.status } while (false);',
  'const f = () => 1; return f() + H.status;',
  'return [1, 200].indexOf(H.status);',
  'return H.status in { 200: 1 };',
  'return H instanceof Object;',
  "let s = 'a'\n  H.saveBodyAsFile('f.bin')\n  return s;",
  'let s\n  (H).status\n  return 1;',
  'const r = H\n  ;[r.status].forEach((x) => x)\n  return r.status;',
  'const v = [H, H].map((r) => r.status); return v;',
  'return `${[H.status].map((s) => s + 1)}`;',
  'for (const k of [H.status]) return k;',
  'for (const k in { [H.status]: 1 }) return k;',
  'class A { [H.status]() { return 1 } } return Object.getOwnPropertyNames(A.prototype);',
  'const r = H?.status; return r;',
  "return H.text().split(':')[0];",
  'return ((x) => x)(H.status);',
  'return Math.max(H.status, 1);',
  'return [...H.text()].length;',
];
const HELPERS = `
function get(u) { return platform.http.request({ url: u }) }
const getArrow = (u) => platform.http.request({ url: u });`;
/** The fallbacks these programs must get: null where they must be rewritten. */
function expectedFallback(context, form) {
  // `a?.b.request(x).status`: the `?.` could skip past the await
  if (form.includes('?.') && /H[.[]/.test(context.replace(/H\?\./g, ''))) return /inside an optional chain/;
  // `let s = 'a'\n(() => ...)()` is a call of 'a' with the arrow as its argument: no ASI there
  if (context.startsWith("let s = 'a'\n") && form.startsWith('(')) return /inside a callback passed to another function/;
  return null;
}

/** [context index, form index, module source, expected fallback (RegExp) or null] for every pair. */
function corpus() {
  const out = [];
  for (const [i, context] of CONTEXTS.entries()) {
    for (const [j, form] of FORMS.entries()) {
      const body = context.replaceAll('H', form);
      out.push([i, j, `export function main(ctx) {\n  ${body}\n}\n${HELPERS}`, expectedFallback(context, form)]);
    }
  }
  return out;
}

/** The two calls each corpus program is run with. */
const QUERIES = [{ a: 1, b: 0 }, { a: 0, b: 2 }];

module.exports = { FORMS, CONTEXTS, corpus, QUERIES };
