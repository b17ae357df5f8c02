'use strict';
// Differential test of the sync-to-await rewrite through the real router (QuickJS): each corpus
// script runs as written (rewritten into async mode where the rewrite can) and forced into
// blocking mode (a copy with a function using `eval`), against a real upstream on 127.0.0.1 and
// an account service; status, body (failures with their `location`: exposeErrorLocation), and the
// host calls made (in order) must be the same. Each case also states whether the rewrite must make
// it async or fall back (and why).
const http = require('node:http');
const request = require('supertest');
const { rewriteHostCalls } = require('../dist/cjs/runtime/rewrite/index.js');
const { makeApp } = require('./helpers/app');
const { BLOCKING, pairedModes } = require('./helpers/rewrite-check');
const { randomPrograms } = require('./helpers/rewrite-random');


/** Helpers every case may use ($U: the upstream's URL). */
const H = `
const U = '$U';
const get = (p) => platform.http.request({ url: U + p });
function status(p) { return platform.http.request({ url: U + p }).status }
const acct = (t) => platform.system.getAccountByToken(t);
`;

/** Helpers for the cases of async functions ($U: the upstream's URL). */
const K = `
const U = '$U';
const log = [];
async function keep(tag) { log.push('start ' + tag); const r = platform.http.request({ url: U + '/' + tag }); log.push('got ' + tag + ' ' + r.status); return r.status }
`;

/** An async function that waits on the host, its promise dropped. */
const DROPPED = /call of async `keep` at line \d+ is not awaited, but it waits on the host/;

/** A function that waits on the host and returns a promise: its callers must get the promise. */
const RETURNS_PROMISE = /waits on the host and returns a promise/;

/** [name, source of a module exporting main(ctx), expected fallback reason (RegExp) or undefined for async mode]. */
const CASES = [
  ['closure called by name', `${H}
export function main(ctx) { const base = '/c'; function inner(x) { return get(base + x).status } return [inner('/1'), inner('/2')] }`],
  ['recursion', `${H}
function walk(n) { if (n === 0) return []; const s = status('/r' + n); return [s, ...walk(n - 1)] }
export function main(ctx) { return walk(3) }`],
  ['mutual recursion', `${H}
function even(n) { return n === 0 ? status('/e') : odd(n - 1) }
function odd(n) { return n === 0 ? -status('/o') : even(n - 1) }
export function main(ctx) { return [even(3), odd(3)] }`],
  ['arguments object', `${H}
function many() { const out = []; for (let i = 0; i < arguments.length; i++) out.push(get(arguments[i]).status + ':' + arguments.length); return out }
export function main(ctx) { return many('/a1', '/a2') }`],
  ['this in a plain function', `${H}
function f() { get('/t'); return typeof this }
export function main(ctx) { return f() }`],
  ['arrow this/arguments lexical', `${H}
function outer() { const g = () => [typeof this, arguments.length, get('/x' + arguments[0]).status]; return g() }
export function main(ctx) { return outer(7, 8) }`],
  ['try/catch/finally with return in finally', `${H}
export function main(ctx) { const log = []; function f() { try { log.push('t'); return get('/f1').status } finally { log.push('f'); return get('/f2').status + 1 } } const v = f(); return [v, log] }`],
  ['finally after throw', `${H}
export function main(ctx) { const log = []; try { try { throw new Error('x' + get('/th').status) } finally { log.push(get('/fin').status) } } catch (e) { log.push(e.message) } return log }`],
  ['labelled break/continue', `${H}
export function main(ctx) { const out = []; outer: for (let i = 0; i < 3; i++) { for (let j = 0; j < 3; j++) { if (j === 1) continue outer; if (i === 2) break outer; out.push(get('/l' + i + j).status) } } return out }`],
  ['switch fallthrough', `${H}
export function main(ctx) { const out = []; switch (get('/sw').status) { case 404: out.push('nf'); case 200: out.push(get('/c200').status); case 201: out.push('fall'); break; default: out.push('d') } return out }`],
  ['destructuring defaults', `${H}
export function main(ctx) { const { a = get('/d1').status, b = get('/d2').status } = { b: 5 }; const [x = status('/d3'), y = 9] = []; return [a, b, x, y] }`],
  ['optional chaining around host', `${H}
export function main(ctx) { const n = null; return [n?.request({}), get('/oc')?.status, acct('good')?.id, acct('bad')?.id, get('/oc2').json()?.path] }`],
  ['short-circuit and comma', `${H}
export function main(ctx) { const log = []; const a = (log.push(1), get('/sc1').status, log.push(2), get('/sc2').status); const b = false && get('/never'); const c = null ?? get('/sc3').status; const d = 0 || get('/sc4').status; let e = 1; e &&= get('/sc5').status; let f = null; f ??= status('/sc6'); let g = 1; g ||= status('/never2'); return [a, b, c, d, e, f, g, log] }`],
  ['conditional', `${H}
export function main(ctx) { return [ctx.query.x ? get('/q1').status : get('/q2').status, get('/q3').status === 200 ? 'y' : 'n'] }`],
  ['template and tagged template', `${H}
function tag(s, ...v) { return s.raw.join('|') + v.join(',') }
export function main(ctx) { return [\`a\${get('/tp').status}b\${status('/tp2')}\`, tag\`x\${get('/tt').status}y\`] }`],
  ['default parameters of a callee given host values', `${H}
function f(a, b = a * 2) { return [a, b] }
export function main(ctx) { return f(get('/dp').status) }`],
  ['spread and rest', `${H}
function sum(...xs) { return xs.reduce((a, b) => a + b, 0) }
export function main(ctx) { const arr = [get('/s1').status, status('/s2')]; return [sum(...arr, get('/s3').status), Math.max(...[status('/s4')])] }`],
  ['async function and await mixed', `${H}
async function both() { const a = await platform.http.request({ url: U + '/aw1' }); const b = get('/aw2'); return a.status + b.status }
export async function main(ctx) { const x = await both(); return [x, get('/aw3').status] }`],
  ['Promise.all over async callbacks', `${H}
export async function main(ctx) { const rs = await Promise.all(['/p1', '/p2'].map(async (p) => get(p).status)); return rs }`],
  ['shadowed platform', `${H}
export function main(ctx) { const platform = { http: { request: (o) => ({ status: 7, url: o.url }) } }; return platform.http.request({ url: 'x' }) }`],
  ['shadowed platform as param', `${H}
function f(platform) { return platform.http.request({ url: 'y' }).status }
export function main(ctx) { return f({ http: { request: () => ({ status: 9 }) } }) }`],
  ['host object in a variable', `${H}
export function main(ctx) { const h = platform.http; const s = platform.system; const { http } = platform; return [h.request({ url: U + '/hv1' }).status, http.request({ url: U + '/hv2' }).status, s.getAccountByToken('good')] }`],
  ['response object kept and reused', `${H}
export function main(ctx) { const r = get('/keep'); const copy = r; return [copy.status, r.json().path, r.text().length, Object.keys(r).sort()] }`],
  ['response returned from helper', `${H}
function fetchIt(p) { return get(p) }
export function main(ctx) { const r = fetchIt('/ret'); return r.json() }`],
  ['account object', `${H}
export function main(ctx) { const a = acct('good'); const b = acct('bad'); const c = acct(''); const d = acct(); return [a, b, c, d] }`],
  ['ctx.request getters mixed', `${H}
export function main(ctx) { const h = ctx.request.getHeader('x-t'); const s = get('/rq?h=' + h).status; return [h, s, ctx.request.getMethod(), ctx.method] }`],
  ['console and utils', `${H}
export function main(ctx) { console.log('a', get('/cu').status); return [platform.utils.toJSON({ s: get('/cu2').status }), platform.utils.stringToBytes('é' + status('/cu3')).length] }`],
  ['host error caught', `${H}
export function main(ctx) { try { platform.http.request({ url: 'http://127.0.0.1:1/' }); return 'no' } catch (e) { return [e.name, e.message, e.code, e instanceof Error, e.constructor === Error, Object.keys(e).sort(), typeof e.stack] } }`],
  ['host error: bad url caught', `${H}
export function main(ctx) { try { platform.http.request({ url: 'not a url' }); return 'no' } catch (e) { return [e.name, e.message, e.code, Object.keys(e).sort(), Object.getPrototypeOf(e) === TypeError.prototype] } }`],
  ['host error: bad options caught', `${H}
export function main(ctx) { try { platform.http.request({}); return 'no' } catch (e) { return [e.name, e.message, e.code, e instanceof TypeError] } }`],
  ['host error uncaught', `${H}
export function main(ctx) { return platform.http.request({ url: 'ftp://x/' }).status }`],
  ['account lookup fails', `${H}
export function main(ctx) { try { return acct('boom') } catch (e) { return [e.name, e.message, e.code, Object.keys(e).sort()] } }`],
  ['error thrown after host call uncaught', `${H}
export function main(ctx) { get('/pre'); throw new TypeError('bad ' + status('/pre2')) }`],
  ['abort after host call', `${H}
export function main(ctx) { if (get('/ab').status === 200) platform.app.abort('nope', 403); return 1 }`],
  ['abort caught', `${H}
export function main(ctx) { try { platform.app.abort('x', 409) } catch (e) {} return get('/abc').status }`],
  ['loops', `${H}
export function main(ctx) { const out = []; for (const p of ['/l1', '/l2']) out.push(get(p).status); let i = 0; while (get('/w' + i).status === 200 && i < 2) i++; do { out.push(i--) } while (status('/dw' + i) === 200 && i > 0); for (let k = status('/fi'); k > 198; k--) out.push(k); for (const k in { a: 1 }) out.push(k + get('/fk').status); return out }`],
  ['generator consuming host values', `${H}
function* gen(xs) { for (const x of xs) yield x * 2 }
export function main(ctx) { return [...gen([get('/g1').status, status('/g2')])] }`],
  ['class with host values passed in', `${H}
class Box { static #n = 0; #v; constructor(v) { this.#v = v; Box.#n++ } get v() { return this.#v } static count() { return Box.#n } }
export function main(ctx) { const b = new Box(get('/cl').status); return [b.v, Box.count() > 0] }`],
  ['class static block/fields without host', `${H}
class K { static x = 1; y = 2; static { K.z = 3 } }
export function main(ctx) { const k = new K(); return [K.x, k.y, K.z, get('/k').status] }`],
  ['JSON.parse reviver without host, host around', `${H}
export function main(ctx) { const t = get('/jr').text(); return JSON.parse(t, (k, v) => (typeof v === 'string' ? v.toUpperCase() : v)) }`],
  ['String.replace callback without host', `${H}
export function main(ctx) { const s = get('/rp').json().path; return s.replace(/[a-z]/g, (m) => m.toUpperCase()) }`],
  ['sort/reduce callbacks without host', `${H}
export function main(ctx) { const xs = [status('/x1'), 3, 1]; return [xs.sort((a, b) => a - b), xs.reduce((a, b) => a + b)] }`],
  ['evaluation order of operands', `${H}
export function main(ctx) { const log = []; const t = (x) => (log.push(x), x); const o = {}; o[t('k')] = t(get('/eo').status) + t(2); const v = t(1) + get('/eo2').status * t(3); return [o, v, log] }`],
  ['update through member of local', `${H}
export function main(ctx) { const o = { n: 1, a: [] }; o.n += get('/u1').status; o.a[o.a.length] = status('/u2'); o.a.push(status('/u3')); return o }`],
  ['module state counter', `${H}
let hits = 0;
export function main(ctx) { hits = 0; hits += get('/ms').status; hits++; return hits }`],
  ['host call in a nested arrow called at once', `${H}
export function main(ctx) { return ((p) => get(p).status)('/ia') + (function () { return status('/ib') })() }`],
  ['getAccountByToken via ctx header', `${H}
export function main(ctx) { const a = platform.system.getAccountByToken(ctx.request.getHeader('x-t')); return a && a.id }`],
  ['saveBodyAsFile', `${H}
export function main(ctx) { const r = get('/file'); const f = r.saveBodyAsFile('out-' + ctx.query.k + '.json'); return [typeof f, f === undefined || f === null || typeof f === 'object'] }`],
  ['string host call form', `${H}
export function main(ctx) { return platform.http.request(U + '/str').status }`],
  ['request with body object', `${H}
export function main(ctx) { return platform.http.request({ url: U + '/post', method: 'post', body: { a: get('/pre').status } }).json() }`],
  ['404 upstream status', `${H}
export function main(ctx) { const r = get('/st/404'); return [r.status, r.json()] }`],
  ['exported arrow', `${H}
export const main = (ctx) => get('/arrow').status;`],
  ['export default-like alias', `${H}
function impl(ctx) { return get('/alias').status }
export { impl as main };`],
  ['local method named save', `${H}
export function main(ctx) { const store = { items: [], save(x) { this.items.push(x); return this.items.length } }; store.save(get('/lm').status); return [store.save(2), store.items] }`],
  ['local method named request', `${H}
export function main(ctx) { const api = { request(o) { return { status: 5, o } } }; return api.request({ a: 1 }).status + get('/lr').status }`],
  ['throw non-Error', `${H}
export function main(ctx) { try { if (get('/tn').status) throw { code: 7 } } catch (e) { return e } }`],
  ['nested functions each waiting', `${H}
function a(x) { return b(x) + 1 }
function b(x) { return c(x) * 2 }
function c(x) { return get('/n' + x).status }
export function main(ctx) { return [a(1), b(2), c(3)] }`],
  ['function hoisting use before def', `${H}
export function main(ctx) { return later() }
function later() { return get('/late').status }`],
  ['typeof function that waits', `${H}
function f() { return get('/ty').status }
export function main(ctx) { return [typeof f, f()] }`],
  ['getter reading cached host value', `${H}
export function main(ctx) { const s = get('/gt').status; const o = { get s() { return s } }; return o.s }`],
  ['async generator with host, stepped with next()', `${H}
async function* g() { yield get('/ag1').status; yield status('/ag2') }
export async function main(ctx) { const out = []; const it = g(); for (let s = await it.next(); !s.done; s = await it.next()) out.push(s.value); return out }`],
  // (each await is wrapped so that the code after it acts for its own call: the await itself keeps its promise ticks and its reads of `then`)
  ['an await and a then of one promise, raced', `export async function main(ctx) {
  const p = Promise.resolve(1);
  const a = (async () => { await p; return 'await' })();
  const b = p.then(() => 'then');
  return await Promise.race([a, b]);
}`],
  ['an awaited thenable beside a then chain', `export async function main(ctx) {
  const log = [];
  (async () => { await { then(r) { r() } }; log.push('A') })();
  Promise.resolve().then(() => log.push('1')).then(() => log.push('2')).then(() => log.push('3')).then(() => log.push('4'));
  for (let i = 0; i < 8; i++) await null;
  return log;
}`],
  ['an awaited promise of a subclass with its own then', `class P extends Promise {
  static get [Symbol.species]() { return Promise }
  then(f, r) { return super.then((v) => f(v * 2), r) }
}
export async function main(ctx) { return await P.resolve(5) }`],
  ['an awaited object whose then getter changes', `export async function main(ctx) {
  let n = 0;
  const o = { get then() { return n++ === 0 ? undefined : (r) => r('second') } };
  const v = await o;
  return [v === o ? 'self' : v, n];
}`],
  ['a rejection awaited in a try, beside a then chain', `export async function main(ctx) {
  const log = [];
  (async () => { try { await Promise.reject(new Error('x')) } catch (e) { log.push('C') } finally { log.push('F') } })();
  Promise.resolve().then(() => log.push('1')).then(() => log.push('2')).then(() => log.push('3'));
  for (let i = 0; i < 8; i++) await null;
  return log;
}`],
  ['a name of the wrapping written with an escape', `const \\u005f_resume = (t, v) => 42;
export async function main(ctx) { return [await 1, await Promise.resolve('x')] }`, /the name \`__resume\` at line 1 is the runtime's own/],
  ['async generator with host, read with for await', `${H}
async function* g() { yield get('/ag1').status; yield status('/ag2') }
export async function main(ctx) { const out = []; for await (const v of g()) out.push(v); return out }`, /`for await` at line 8/],
  ['sequence of semicolon-less statements', `${H}
export function main(ctx) {
  let a = 1
  get('/asi1')
  const b = [1]
  ;[2].forEach((x) => a += x)
  status('/asi2')
  a++
  get('/asi3').status
  return a
}`],
  ['IIFE statement after semicolon-less line', `${H}
export function main(ctx) {
  let out = []
  out.push(1)
  ;(function () { out.push(get('/iife').status) })()
  return out
}`],
  ['host call in computed key and class heritage', `${H}
export function main(ctx) { const o = { [get('/ck').status]: 1 }; class A extends (status('/ch') === 200 ? Array : Object) {} return [o, new A() instanceof Array] }`],
  ['delete and in', `${H}
export function main(ctx) { const o = { a: get('/di').status }; delete o.a; return ['a' in o, 'status' in get('/di2')] }`],
  ['new on a class with args from host', `${H}
export function main(ctx) { const d = new Date(status('/nd') * 0); return [d.getTime(), new Array(status('/na') - 198).length] }`],
  ['host value in object spread and array holes', `${H}
export function main(ctx) { return [{ ...get('/sp').json(), x: 1 }, [, status('/ho'), ,].length] }`],

  ['catch param default', `${H}
export function main(ctx) { try { throw {} } catch ({ message = get('/cp').status }) { return message } }`],
  ['class field computed key', `${H}
export function main(ctx) { class A { [get('/fk').status] = 1; static [status('/sk')] = 2 } return [Object.keys(new A()), Object.keys(A)] }`],
  ['class heritage', `${H}
export function main(ctx) { class A extends (get('/he').status === 200 ? Error : Object) {} return new A('m') instanceof Error }`],
  ['assignment target member of call', `${H}
export function main(ctx) { const r = get('/as'); get('/as2').extra = 5; r.n = status('/as3'); return [r.n] }`],
  ['update of member of call', `${H}
export function main(ctx) { const o = { c: 0 }; const k = () => o; k(get('/up')).c++; o.c += status('/up2'); return o }`],
  ['for-of with member lhs of call result', `${H}
export function main(ctx) { const box = { v: [] }; const holder = () => box; for (holder(get('/fo').status).last of [1, 2]); return box }`],
  ['delete member of call', `${H}
export function main(ctx) { return delete get('/de').extra }`],
  ['for-in/of loop with continue in switch', `${H}
export function main(ctx) { const out = []; for (const i of [1, 2, 3]) { switch (i) { case 2: continue; default: out.push(status('/sw' + i)) } } return out }`],
  ['break out of for-of closes iterator', `${H}
export function main(ctx) { const log = []; const it = { [Symbol.iterator]() { let i = 0; return { next: () => ({ value: i++, done: i > 5 }), return: () => (log.push('closed'), { done: true }) } } }; for (const v of it) { log.push(status('/it' + v)); if (v === 1) break } return log }`],
  ['nested template in tagged template arg', `${H}
const tag = (s, ...v) => v;
export function main(ctx) { return tag\`\${\`\${get('/nt').status}\`}\` }`],
  ['await in exponent and unary', `${H}
export function main(ctx) { return [(-status('/u1')) ** 1, typeof get('/u2'), void get('/u3'), !get('/u4'), ~status('/u5')] }`],
  ['conditional chain with host call in test of while', `${H}
export function main(ctx) { let n = 0; while (n < 3 && get('/wh' + n).status === 200) n++; return n }`],
  ['comma in for update', `${H}
export function main(ctx) { const out = []; for (let i = 0; i < 2; i++, out.push(status('/fu' + i))); return out }`],
  ['object getter result of converted fn read outside', `${H}
function mk() { const s = status('/mk'); return { get s() { return s + 1 } } }
export function main(ctx) { return mk().s }`],
  ['converted fn returning a function, called at once', `${H}
function mk() { const s = status('/mf'); return () => s }
export function main(ctx) { return mk()() }`],
  ['converted fn returning a thenable-free object with then-like name', `${H}
function mk() { const s = status('/th'); return { thenValue: s } }
export function main(ctx) { return mk().thenValue }`],
  ['sparse ASI with regex and template starts', `${H}
export function main(ctx) {
  let t = 'a'
  status('/asi')
  const r = /x/g
  get('/asi2').status
  const v = \`\${status('/asi3')}\`
  return [t, r.source, v]
}`],
  ['export default anonymous function', `${H}
export default function (ctx) { return status('/dd') }
export function main(ctx) { return 1 + status('/dm') }`],
  ['async arrow callback in Promise.all with local accumulation', `${H}
export async function main(ctx) { let total = 0; const vs = await Promise.all(['/pa1', '/pa2'].map(async (p) => { const v = status(p); return v })); for (const v of vs) total += v; return total }`],
  ['converted function awaited explicitly', `${H}
export async function main(ctx) { const s = await status('/ea'); return s + (await get('/ea2')).status }`],
  ['host call result destructured in params of called arrow', `${H}
export function main(ctx) { return (({ status }) => status)(get('/dpa')) }`],
  ['json body then arithmetic in return of nested ternary', `${H}
export function main(ctx) { const a = ctx.query.k === '1'; return a ? (status('/t1') > 100 ? get('/t2').json().path : 'small') : 'none' }`],
  // a function made async hands its callers the value of a promise it returns, not the promise
  ['converted function returning a promise, chained with then', `${H}
function load(p) { const r = get(p); return Promise.resolve(r.json()) }
export async function main(ctx) { return load('/pr').then((j) => j.path) }`, RETURNS_PROMISE],
  ['converted function returning a rejected promise, caught with catch', `${H}
function load(p) { const r = get(p); if (r.status !== 200) return Promise.reject(new Error('status ' + r.status)); return Promise.resolve(r.status) }
export async function main(ctx) { return load('/st/404').catch((e) => 'handled ' + e.message) }`, RETURNS_PROMISE],
  ['converted function returning an async function call, kept in a variable', `${H}
async function audit(x) { return 'audited ' + x }
function handle(p) { const s = get(p).status; return audit(s) }
export async function main(ctx) { const p = handle('/au'); return [p instanceof Promise, await p] }`, RETURNS_PROMISE],
  ['allSettled over a converted function returning a rejection', `${H}
function load(p) { const r = get(p); return r.status === 200 ? Promise.resolve(1) : Promise.reject(new Error('x')) }
export async function main(ctx) { const rs = await Promise.allSettled([load('/st/500')]); return rs.map((r) => r.status) }`, RETURNS_PROMISE],
  ['converted function returning a promise through another one', `${H}
function load(p) { get(p); const q = new Promise((ok) => ok(7)); return q }
function outer(p) { return load(p) }
export function main(ctx) { return outer('/po').then((v) => v + 1) }`, RETURNS_PROMISE],
  ['converted function returning a promise it was given, chained with then', `${H}
function touch(p, url) { get(url); return p }
export function main(ctx) { return touch(Promise.resolve(5), '/tg').then((v) => v + 1) }`, /its result is used as a promise \(`.then`\)/],
  ['a promise a converted function returns reaches only awaits and the runtime: still async', `${H}
function load(p) { const s = status(p); return Promise.all([s, Promise.resolve(s + 1)]) }
function pick(p, n) { return n > 0 ? pick(p, n - 1) : load(p) }
export async function main(ctx) { const a = await load('/aw'); return [a, await pick('/aw2', 2)] }
export function other(ctx) { return load('/aw3') }`],
  // an async function that waits on the host, its promise dropped: blocking mode finished its host calls first
  ['async function promises in an array statement', `${K}
export function main(ctx) { log.length = 0; [keep('a1'), keep('a2')]; log.push('after'); return log.slice() }`, DROPPED],
  ['async function promise assigned to a let never read', `${K}
export function main(ctx) { log.length = 0; let p; p = keep('b1'); log.push('after'); return log.slice() }`, DROPPED],
  ['async function promise in an object never read', `${K}
export function main(ctx) { log.length = 0; const o = { p: keep('e1') }; log.push('after'); return log.slice() }`, DROPPED],
  ['typeof of an async function promise', `${K}
export function main(ctx) { log.length = 0; const t = typeof keep('g1'); log.push('after'); return [t, log.slice()] }`, DROPPED],
  ['async function promise made text', `${K}
export function main(ctx) { log.length = 0; const s = \`\${keep('h1')}\`; log.push('after' + (keep('h2') === null)); return [s, log.slice()] }`, DROPPED],
  ['async function promise left of &&', `${K}
export function main(ctx) { log.length = 0; const v = keep('k1') && 5; log.push('after'); return [v, log.slice()] }`, DROPPED],
  ['a function returning an async function promise, its call dropped', `${K}
function go(t) { return keep(t) }
export function main(ctx) { log.length = 0; go('z1'); log.push('after'); return log.slice() }`, /call of async `go` at line \d+ is not awaited/],
  ['an arrow returning an async function promise, its call dropped', `${K}
const go = (t) => (log.push('go'), keep(t));
const twice = (t) => go(t);
export function main(ctx) { log.length = 0; twice('z2'); log.push('after'); return log.slice() }`, /call of async `twice` at line \d+ is not awaited/],
  ['a function returning an async function promise, awaited: still async', `${K}
function go(t) { return keep(t) }
export async function main(ctx) { log.length = 0; await go('z3'); log.push('after'); return log.slice() }`],
  ['async function passed by name to forEach', `${K}
export function main(ctx) { log.length = 0; ['y1', 'y2'].forEach(keep); log.push('after'); return log.slice() }`, /async `keep` passed to forEach at line \d+/],
  ['async function passed by name to map, dropped', `${K}
export function main(ctx) { log.length = 0; ['y3'].map(keep); log.push('after'); return log.slice() }`, /async `keep` passed at line \d+ waits on the host, but the call it is passed to is not awaited/],
  ['async function stored in an object, called through it and dropped', `${K}
const api = { keep };
export function main(ctx) { log.length = 0; api.keep('y4'); log.push('after'); return log.slice() }`, /async `keep` waits on the host and is stored or passed on at line \d+/],
  ['async function under another name, called and dropped', `${K}
const k2 = keep;
export function main(ctx) { log.length = 0; k2('y5'); log.push('after'); return log.slice() }`, /async `keep` waits on the host and is stored or passed on at line \d+/],
  ['async arrow assigned to a variable, called and dropped', `${K}
let later;
later = async (t) => { const r = platform.http.request({ url: U + '/' + t }); log.push('got ' + t) };
export function main(ctx) { log.length = 0; later('y6'); log.push('after'); return log.slice() }`, /call of async `later` at line \d+ is not awaited/],
  ['async function passed by name to map under Promise.all: still async', `${K}
export async function main(ctx) { log.length = 0; const vs = await Promise.all(['y7'].map(keep)); return [vs, log.slice()] }`],
  ['async function promise given to a tag that awaits it: still async', `${K}
async function tag(strings, p) { return strings.raw.join('|') + (await p) }
export async function main(ctx) { log.length = 0; const v = await tag\`a\${keep('t1')}b\`; return [v, log.slice()] }`],
  ['async function whose name is read and compared: still async', `${K}
export async function main(ctx) { log.length = 0; return [keep.name, keep.length, typeof keep, keep === keep, await keep('n1'), log.slice()] }`],
  ['async function promise stored in a member and awaited: still async', `${K}
export async function main(ctx) { log.length = 0; const s = {}; s.p = keep('m1'); const v = await s.p; const q = [keep('m2')]; return [v, await q[0], log.slice()] }`],
  // an error's location names the script as written, not the text the rewrite inserted
  ['error location after a host call on the same line', `${H}
export function main(ctx) { const a = get('/loc').json().nope.deeper; return a }`],
  ['error location in a converted function', `${H}
function f(x) { return platform.http.request({ url: U + '/loc2' }).status + x.y.z }
export function main(ctx) { return f({}) }`],
  ['thrown Error location after two host calls on its line', `${H}
export function main(ctx) { const s = status('/loc3') + get('/loc4').status; throw new Error('boom ' + s) }`],
  // constructs nested at random around host calls (always rewritten)
  ...randomPrograms(7, 24),
];

let upstream;
const seen = [];
let made;

beforeAll(async () => {
  upstream = http.createServer((req, res) => {
    let body = '';
    req.on('data', (c) => (body += c));
    req.on('end', () => {
      seen.push(`${req.method} ${req.url}${body ? ` ${body}` : ''}`);
      res.writeHead(req.url.startsWith('/st/') ? Number(req.url.slice(4)) : 200, { 'content-type': 'application/json' });
      res.end(JSON.stringify({ path: req.url }));
    });
  });
  await new Promise((resolve) => upstream.listen(0, '127.0.0.1', resolve));
  const base = `http://127.0.0.1:${upstream.address().port}`;
  const { scripts, apis } = pairedModes(CASES, base);
  const accounts = {
    getAccountByToken: (t) => {
      seen.push(`account ${t}`);
      if (t === 'boom') throw new Error('db down');
      return t === 'good' ? { id: 'u1', name: 'Ann' } : null;
    },
  };
  const logger = { info: () => undefined, warn: () => undefined, error: () => undefined };
  made = makeApp({ apps: { app1: { scripts, apis } }, router: { workers: 1, logger, accounts, outbound: { allowPrivateNetworks: true }, exposeErrorLocation: true } });
  await made.router.ready();
}, 60_000);

afterAll(async () => {
  await made.router.close();
  await new Promise((resolve) => upstream.close(resolve));
});

/** What a client, the upstream and the account service see of one call. */
async function observe(path) {
  seen.length = 0;
  const res = await request(made.app).get(`/web0/api/app1/${path}?k=1&x=1`).set('x-t', 'good');
  const body = res.text.replace(/"requestId":"[^"]*",?/, '').replace(/c\d+b?\.js/g, 'main.js');
  return { status: res.status, body, host: [...seen] };
}

test.each(CASES.map(([name, , fallback], i) => [name, i, fallback]))('%s: as rewritten and in blocking mode, the same', async (_name, i, fallback) => {
  const source = CASES[i][1];
  const r = rewriteHostCalls(source);
  if (fallback === undefined) expect({ async: r.async, reason: r.reason }).toEqual({ async: true, reason: undefined });
  else expect(r).toEqual(expect.objectContaining({ async: false, reason: expect.stringMatching(fallback) }));
  expect(rewriteHostCalls(source + BLOCKING).async).toBe(false);
  const blocking = await observe(`c${i}b`);
  expect(await observe(`c${i}`)).toEqual(blocking);
});
