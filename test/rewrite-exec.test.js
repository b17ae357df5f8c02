'use strict';
// The rewrite keeps a script's meaning: each program runs as written against host helpers that
// answer at once (blocking mode), and rewritten against host helpers that answer with promises
// settled by a later timer (async mode); results, errors, host-call order and side effects must
// be the same.
const { rewrite, evaluateModule } = require('./helpers/rewrite-check');
const { corpus, QUERIES } = require('./helpers/rewrite-corpus');

/** A fake `platform` and `ctx` whose host calls return values ('sync') or later-settled promises ('async'). */
function makeEnv(mode) {
  const log = [];
  const attrs = {};
  const reply = (fn) => {
    if (mode === 'sync') return fn();
    let value;
    try {
      value = fn();
    } catch (err) {
      return new Promise((_, reject) => setTimeout(() => reject(err), 2));
    }
    return new Promise((resolve) => setTimeout(() => resolve(value), 2));
  };
  const response = (url) => ({
    status: url.includes('missing') ? 404 : 200,
    body: `body:${url}`,
    text() {
      return this.body;
    },
    json: () => ({ url }),
    saveBodyAsFile: (p) => reply(() => (log.push(`saveBodyAsFile ${url} -> ${p}`), { path: p })),
  });
  const platform = {
    system: { getAccountByToken: (t) => reply(() => (log.push(`account ${t}`), t === 'good' ? { id: 'u1', name: 'Ann' } : null)) },
    http: {
      request: (o) =>
        reply(() => {
          log.push(`request ${o.url}`);
          if (o.url.includes('down')) throw new Error(`connect ECONNREFUSED ${o.url}`);
          return response(o.url);
        }),
    },
    app: {
      abort: (message, status) => {
        throw Object.assign(new Error(message), { status });
      },
    },
    utils: { toJSON: (o) => JSON.stringify(o) },
  };
  const part = (name) => ({ name, submittedFileName: `${name}.txt`, save: (p) => reply(() => (log.push(`save ${name} -> ${p}`), { path: p })) });
  const ctx = (query) => ({
    query,
    request: { setAttribute: (k, v) => (attrs[k] = v), getAttribute: (k) => attrs[k] },
    getParts: () => [part('a'), part('b')],
  });
  return { log, attrs, platform, ctx };
}

/** Runs an exported function of `code`; returns what an observer of the call could see. */
async function run(code, mode, fn, query = {}) {
  const env = makeEnv(mode);
  const mod = evaluateModule(code, env.platform);
  let outcome;
  try {
    const value = mod[fn](env.ctx(query));
    if (mode === 'async') expect(value).toBeInstanceOf(Promise);
    outcome = { value: await value };
  } catch (err) {
    outcome = { error: err.message, status: err.status };
  }
  return { outcome, log: env.log, attrs: env.attrs };
}

/** The rewritten program in async mode behaves as the original in blocking mode, for each call. */
async function expectSameBehaviour(source, calls) {
  const r = rewrite(source);
  expect(r.async).toBe(true);
  for (const [fn, query] of calls) {
    const before = await run(source, 'sync', fn, query);
    const after = await run(r.code, 'async', fn, query);
    expect(after).toEqual(before);
  }
  return r;
}

const AUTH = `export function authenticate(ctx) {
  var account = platform.system.getAccountByToken(ctx.query.token);
  if (account == null) platform.app.abort('token expired', 401);
  ctx.request.setAttribute('account', account);
  return account.name;
}`;

test('the harness can tell: the unrewritten script breaks when host calls return promises', async () => {
  const wrong = await run(AUTH, 'async', 'authenticate', { token: 'good' });
  const right = await run(AUTH, 'sync', 'authenticate', { token: 'good' });
  expect(wrong).not.toEqual(right);
  expect(right.outcome).toEqual({ value: 'Ann' });
});

test('spec example: account lookup, abort when the token is bad', async () => {
  await expectSameBehaviour(AUTH, [
    ['authenticate', { token: 'good' }],
    ['authenticate', { token: 'bad' }],
  ]);
});

test('spec example: request, saveBodyAsFile and a helper', async () => {
  await expectSameBehaviour(
    `export function fetchIt(ctx) {
  var r = platform.http.request({ url: 'https://x/y' });
  r.saveBodyAsFile('a/b.bin');
  return helper(ctx) + r.status;
}
function helper(ctx) { return platform.http.request({ url: ctx.query.u }).text(); }`,
    [
      ['fetchIt', { u: 'https://u/1' }],
      ['fetchIt', { u: 'https://down/1' }],
    ],
  );
});

test('spec example: save every uploaded part; chained host calls', async () => {
  await expectSameBehaviour(
    `export function upload(ctx) {
  const saved = [];
  for (const p of ctx.getParts()) saved.push(p.save('uploads/' + p.submittedFileName).path);
  platform.http.request({ url: 'https://x/' + saved.length }).saveBodyAsFile('copy.bin')
  return saved.join(',') + platform.http.request({ url: 'https://x/missing' }).status;
}`,
    [['upload', {}]],
  );
});

test('recursion, mutual recursion and loops with closures', async () => {
  await expectSameBehaviour(
    `function fetchAll(urls, i) { if (i >= urls.length) return []; return [platform.http.request({ url: urls[i] }).status].concat(fetchAll(urls, i + 1)); }
function even(n) { return n === 0 ? platform.system.getAccountByToken('even') : odd(n - 1); }
function odd(n) { return n === 0 ? 'odd' : even(n - 1); }
export function main(ctx) {
  let total = 0;
  const get = (i) => platform.http.request({ url: 'https://x/' + i }).status;
  for (let i = 0; i < 3; i++) total += get(i);
  return { all: fetchAll(ctx.query.urls, 0), total, parity: odd(ctx.query.n) };
}`,
    [
      ['main', { urls: ['https://a/1', 'https://a/missing'], n: 3 }],
      ['main', { urls: [], n: 4 }],
    ],
  );
});

test('short-circuits and evaluation order are kept', async () => {
  await expectSameBehaviour(
    `function mark(s) { return platform.http.request({ url: s }).status; }
export function main(ctx) {
  const q = ctx.query;
  const a = q.a && mark('https/a');
  const b = q.b || mark('https/b');
  const c = q.c ?? mark('https/c');
  const d = q.a ? mark('https/d1') : mark('https/d2');
  return [a, b, c, d, mark('https/e1') + mark('https/e2'), \`\${mark('https/f')}-\${platform.http?.request({ url: 'g' })?.status}\`, q.none?.request({ url: 'z' })?.status];
}`,
    [
      ['main', { a: 1, b: 0, c: null }],
      ['main', { a: 0, b: 2, c: 3 }],
    ],
  );
});

test('errors from the host reach the same try/catch/finally', async () => {
  await expectSameBehaviour(
    `function load(u) { return platform.http.request({ url: u }).text(); }
export function main(ctx) {
  const out = [];
  try { out.push(load(ctx.query.u)); out.push('after') }
  catch (e) { out.push('caught ' + e.message) }
  finally { out.push(platform.http.request({ url: 'https://finally' }).status) }
  return out;
}
export function bubbles(ctx) { return load('https://down/2') + 'never'; }`,
    [
      ['main', { u: 'https://ok' }],
      ['main', { u: 'https://down' }],
      ['bubbles', {}],
    ],
  );
});

test('IIFEs, arrows, named function expressions, default exports, already-async code', async () => {
  await expectSameBehaviour(
    `const get = (u) => platform.http.request({ url: u });
export const walk = function step(n) { return n ? step(n - 1) + 1 : get('https://w').status };
export default function (ctx) { return (() => get('https://iife').text())() + (function () { return walk(2) })(); }
export async function both(ctx) {
  const rs = await Promise.all(['https://p1', 'https://p2'].map(async (u) => get(u).status));
  const r = await platform.http.request({ url: 'https://awaited' });
  return rs.concat(r.status, (await get('https://x')).text());
}
export async function* gen() { yield get('https://g1').status; yield get('https://g2').status; }
export async function consume() { const out = []; const it = gen(); for (let s = await it.next(); !s.done; s = await it.next()) out.push(s.value); return out; }`,
    [
      ['default', {}],
      ['walk', {}],
      ['both', {}],
      ['consume', {}],
    ],
  );
});

test('statements starting with a host call after a line without a semicolon', async () => {
  const r = await expectSameBehaviour(
    `export function main(ctx) {
  const parts = ctx.getParts()
  parts[0].save('one').path
  let n = parts.length
  parts[1].save('two')
  return n
}`,
    [['main', {}]],
  );
  expect(r.code).toContain("\n  ;(__resume(__current(),await parts[0].save('one'))).path\n");
});

test('a switch and labelled loop, with a host call deciding each branch', async () => {
  await expectSameBehaviour(
    `export function main(ctx) {
  const seen = [];
  outer: for (const u of ctx.query.urls) {
    switch (platform.http.request({ url: u }).status) {
      case 404: seen.push('missing ' + u); continue outer;
      default: seen.push(platform.http.request({ url: u + '/again' }).text());
    }
    if (seen.length > 2) break;
  }
  return seen;
}`,
    [['main', { urls: ['https://a', 'https://missing', 'https://b', 'https://c'] }]],
  );
});

test('async callbacks handed to Promise.all(Settled) run at once, with the same results and errors', async () => {
  const src = `function status(u) { return platform.http.request({ url: u }).status }
export async function main(ctx) {
  const rs = await Promise.all(ctx.query.urls.map(async (u) => platform.http.request({ url: u })));
  const settled = await Promise.allSettled(['https://down/s', 'https://missing'].map(async (u) => status(u)));
  return rs.map((r) => r.text()).concat(settled.map((s) => s.status + ':' + (s.value ?? s.reason.message)));
}
export async function failing(ctx) {
  return Promise.all(['https://a', 'https://down/1', 'https://b'].map(async (u) => platform.http.request({ url: u }).status));
}`;
  const r = await expectSameBehaviour(src, [
    ['main', { urls: ['https://a', 'https://b', 'https://missing'] }],
    ['failing', {}],
  ]);
  // all three requests are in flight before the first answers: the rewritten calls overlap
  const env = makeEnv('async');
  let inFlight = 0;
  let most = 0;
  const request = env.platform.http.request;
  env.platform.http.request = (o) => {
    most = Math.max(most, ++inFlight);
    return request(o).finally(() => inFlight--);
  };
  await evaluateModule(r.code, env.platform).main(env.ctx({ urls: ['https://a', 'https://b', 'https://c'] }));
  expect(most).toBe(3);
});

test('a total summed by parallel async callbacks, read after each wait', async () => {
  await expectSameBehaviour(
    `export async function main(ctx) {
  let total = 0;
  await Promise.all(ctx.query.urls.map(async (u) => { const s = platform.http.request({ url: u }).status; total += s; }));
  return total;
}`,
    [['main', { urls: ['https://a', 'https://missing', 'https://b'] }]],
  );
});

test('promise callbacks the script queued run during a host call in async mode, after the calling code in blocking mode (docs/script-engine.md)', async () => {
  const src = `export function main(ctx) {
  const log = [];
  Promise.resolve().then(() => log.push('then'));
  platform.http.request({ url: 'https://a' });
  log.push('after the call');
  return log;
}`;
  const r = rewrite(src);
  expect(r.async).toBe(true);
  const settle = async (value) => {
    await new Promise((resolve) => setTimeout(resolve, 10));
    return value;
  };
  const blocking = await run(src, 'sync', 'main');
  const rewritten = await run(r.code, 'async', 'main');
  expect(await settle(blocking.outcome.value)).toEqual(['after the call', 'then']);
  expect(await settle(rewritten.outcome.value)).toEqual(['then', 'after the call']);
});

describe('every form of host call in every context', () => {
  test.each(corpus())('context %i, form %i', async (_i, _j, src, fallback) => {
    if (fallback) {
      expect(rewrite(src)).toEqual({ code: src, async: false, reason: expect.stringMatching(fallback) });
      return;
    }
    await expectSameBehaviour(
      src,
      QUERIES.map((q) => ['main', q]),
    );
  });
});
