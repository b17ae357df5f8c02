'use strict';
// Random programs for the rewrite's differential test (test/rewrite-differential.test.js): host
// calls (direct, through helpers that wait on the host, account lookups, failing statuses) nested
// in expressions (?:, &&, ||, ??, comma, templates, IIFEs, assignments, default parameters) and in
// statements (if, loops with continue, try/catch/finally, switch fallthrough, labelled break,
// destructuring defaults). Deterministic: the same seed gives the same programs. ($U: upstream.)
let seed = 1;
const rnd = () => ((seed = (seed * 1103515245 + 12345) % 2147483648) / 2147483648);
const pick = (a) => a[Math.floor(rnd() * a.length)];
let n = 0;
function host() { n++; return pick([`status('/p${n}')`, `get('/p${n}').status`, `(acct('good')?.id === 'u1' ? ${n} : 0)`, `get('/st/${pick([200, 404, 500])}').status`, `get('/j${n}').json().path.length`]); }
function expr(d) {
  if (d <= 0) return pick([host(), String(Math.floor(rnd() * 5)), 'x', host()]);
  const a = () => expr(d - 1);
  return pick([
    () => `(${a()} + ${a()})`,
    () => `(${a()} ? ${a()} : ${a()})`,
    () => `(t(${n++}), ${a()})`,
    () => `h${Math.floor(rnd() * 3)}(${a()})`,
    () => `[${a()}, ${a()}].length`,
    () => `\`\${${a()}}-\${${a()}}\`.length`,
    () => `((y) => y * 2)(${a()})`,
    () => `(() => ${a()})()`,
    () => `(${a()} && ${a()})`,
    () => `(${a()} || ${a()})`,
    () => `(obj.v = ${a()})`,
    () => `Math.max(${a()}, ${a()})`,
    () => `(${a()} > 100 ? ${a()} : -1)`,
    () => `({ k: ${a()} }).k`,
    () => `(${a()} ?? 7)`,
  ])();
}
function stmt(d) {
  const e = () => expr(Math.floor(rnd() * 3));
  if (d <= 0) return pick([`out.push(${e()});`, `x = ${e()};`, `t(${e()});`]);
  const s = () => stmt(d - 1);
  return pick([
    () => `if (${e()} % 2) { ${s()} } else { ${s()} }`,
    () => `for (let i = 0; i < 2; i++) { ${s()} if (i) continue; ${s()} }`,
    () => `try { ${s()} if (${e()} > 300) throw new Error('e' + x); } catch (err) { out.push(String(err.message)); } finally { ${s()} }`,
    () => `switch (${e()} % 3) { case 0: ${s()} case 1: ${s()} break; default: ${s()} }`,
    () => { const l = `lab${n++}`; return `${l}: { ${s()} if (x % 2) break ${l}; ${s()} }`; },
    () => `{ const [a1 = ${e()}, b1 = ${e()}] = [undefined]; out.push(a1 + b1); }`,
    () => `out.push(h3(${e()}, ${e()}));`,
    () => `${s()} ${s()}`,
  ])();
}
function program() {
  n = 0;
  const body = Array.from({ length: 3 }, () => stmt(2)).join('\n  ');
  return `
const U = '$U';
const log = [];
const get = (p) => platform.http.request({ url: U + p });
function status(p) { return platform.http.request({ url: U + p }).status }
const acct = (t) => platform.system.getAccountByToken(t);
const t = (v) => (log.push(v), v);
function h0(v) { return v + 1 }
function h1(v) { return v > 1 ? status('/h1-' + v) + v : v }
const h2 = (v) => { log.push('h2'); return get('/h2-' + (v % 5)).status - v };
function h3(a, b = a * 2) { return [a, b].join(':') }
const obj = {};
export function main(ctx) {
  log.length = 0; let x = 0; const out = [];
  ${body}
  return { x, out, log: log.slice(), obj };
}`;
}
/** `count` programs from `start` (a seed): [name, source exporting main(ctx)]. */
function randomPrograms(start, count) {
  seed = start;
  return Array.from({ length: count }, (_, i) => [`random program ${start}.${i}`, program()]);
}

module.exports = { randomPrograms };
