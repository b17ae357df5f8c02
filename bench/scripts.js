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

// Diagnostics (see bench/server.js): hooks that do nothing (what the two extra stages cost by
// themselves), and a call that keeps QuickJS busy for about as long as the hooked job does but
// sends and returns exactly what MAIN does (what the workers' CPU alone costs the main thread).
const EMPTY_HOOKS = ['export function before(ctx) {}', 'export function after(ctx, result) {}'].join('\n');
const BUSY = 'export function fn(ctx) { let s = 0; for (let i = 0; i < 1500; i++) s += i; return { ok: s > 0 } }';

module.exports = { MAIN, HOOKS, INLINE, EMPTY_HOOKS, BUSY };
