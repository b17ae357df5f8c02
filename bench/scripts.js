'use strict';
/** The bench's scripts, shared by bench/server.js and bench/stage-boundary.js. */

/** The call: a trivial JSON result. */
const MAIN = 'export function fn(ctx) { return { ok: true } }';
// Hooks that do trivial work: before reads a header and sets an attribute, after reads it back
// and sets a response header (the response body stays `{"ok":true}`).
const HOOKS = [
  'export function before(ctx) { ctx.request.setAttribute("t", ctx.request.getHeader("host") ? 1 : 0) }',
  'export function after(ctx, result) { ctx.response.setHeader("X-Hooked", String(ctx.request.getAttribute("t"))) }',
].join('\n');
// The same work done inside the call: one stage instead of three (the -inline diagnostic).
const INLINE = `${HOOKS}\nexport function fn(ctx) { before(ctx); const r = { ok: true }; after(ctx, r); return r }`;

module.exports = { MAIN, HOOKS, INLINE };
