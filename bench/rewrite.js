#!/usr/bin/env node
// Time of the host-call rewrite (lib/runtime/rewrite) per script: a typical 50-line script and
// a 1,000-line one (twenty such scripts in one module), and a 1,000-line script that falls back.
// One thread, no I/O. Usage: npm run build && node bench/rewrite.js [--runs N]
'use strict';
const path = require('node:path');
const { rewriteHostCalls } = require(process.env.SCRIPTABLE_API_REWRITE_PATH || path.join(__dirname, '..', 'dist', 'cjs', 'runtime', 'rewrite', 'index.js'));

/** About 50 lines in the spec's style: hooks, an upload, an outbound call through a helper. */
function typical(n) {
  return `// script ${n}: the spec's preprocessing hook, an upload, a report built from an upstream call,
// a mirrored file and a health check over two upstreams.

/** Preprocessing: the caller's account from its token, kept as a request attribute. */
export function authenticate${n}(ctx) {
  var account = platform.system.getAccountByToken(ctx.query.token);
  if (account == null) platform.app.abort('token expired', 401);
  ctx.request.setAttribute('account', account);
}

export function upload${n}(ctx) {
  const saved = [];
  for (const p of ctx.getParts()) {
    if (p.size > 10 * 1024 * 1024) platform.app.abort('too large: ' + p.submittedFileName, 413);
    p.save('uploads/' + p.submittedFileName);
    saved.push({ name: p.name, size: p.size, type: p.contentType });
  }
  return { count: saved.length, files: saved };
}

/** GET a JSON document with the caller's token; a failed upstream ends the call with 502. */
function fetchJson${n}(url, token) {
  const r = platform.http.request({ url, headers: { authorization: 'Bearer ' + token }, timeoutMs: 5000 });
  if (r.status >= 400) platform.app.abort('upstream answered ' + r.status, 502);
  return r.json();
}

export function report${n}(ctx) {
  const account = ctx.request.getAttribute('account');
  const orders = fetchJson${n}('https://api.example.com/orders?user=' + encodeURIComponent(account.id), ctx.query.token);
  const totals = orders.items.reduce((acc, o) => {
    acc[o.currency] = (acc[o.currency] || 0) + o.amount;
    return acc;
  }, {});
  const lines = Object.keys(totals).sort().map((c) => \`\${c}: \${totals[c].toFixed(2)}\`);
  console.log('report for', account.name, lines.length);
  return { user: account.name, lines, json: platform.utils.toJSON(totals) };
}

export function mirror${n}(ctx) {
  platform.http.request({ url: ctx.query.src }).saveBodyAsFile('mirror/' + ctx.query.name);
  return { path: 'mirror/' + ctx.query.name, name: ctx.query.name };
}

export async function status${n}(ctx) {
  const urls = ['https://a.example.com/health', 'https://b.example.com/health'];
  const codes = await Promise.all(urls.map(async (u) => platform.http.request({ url: u }).status));
  return { ok: codes.every((c) => c === 200), codes };
}
`;
}

function measure(label, source, runs) {
  for (let i = 0; i < 20; i++) rewriteHostCalls(source); // warm the JIT
  const times = [];
  let result;
  for (let i = 0; i < runs; i++) {
    const t0 = process.hrtime.bigint();
    result = rewriteHostCalls(source);
    times.push(Number(process.hrtime.bigint() - t0) / 1e6);
  }
  times.sort((a, b) => a - b);
  const lines = source.split('\n').length;
  console.log(
    `${label.padEnd(34)} ${String(lines).padStart(5)} lines  best ${times[0].toFixed(2)} ms  median ${times[runs >> 1].toFixed(2)} ms  p90 ${times[Math.floor(runs * 0.9)].toFixed(2)} ms  async=${result.async}${result.reason ? `  (${result.reason.slice(0, 60)}...)` : ''}`,
  );
}

const runs = Number(process.argv[process.argv.indexOf('--runs') + 1]) || 400;
const small = typical(1);
const large = Array.from({ length: 20 }, (_, i) => typical(i + 1)).join('');
const t0 = process.hrtime.bigint();
rewriteHostCalls(typical(0));
console.log(`first call in a fresh process (parser and analysis not yet compiled): ${(Number(process.hrtime.bigint() - t0) / 1e6).toFixed(1)} ms`);
measure('typical script', small, runs);
measure('twenty typical scripts in one', large, Math.max(20, runs >> 2));
measure('same, falling back (a callback)', `${large}\nexport function bad(ctx) { return ctx.query.u.map((u) => platform.http.request({ url: u }).status) }\n`, Math.max(20, runs >> 2));
