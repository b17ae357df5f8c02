#!/usr/bin/env node
// CPU time of script stages on one QuickJS context, without the HTTP server or the worker pool:
// what a worker thread spends per request inside the engine (the adapter's own work included).
//   trivial   one stage: `return { ok: true }`
//   hooks     the same with a before hook (reads a header, sets an attribute) and an after hook
//             (reads it back, sets a response header): bench/scripts.js; as the worker runs them,
//             the three stages in one entry of a context holding both scripts
//   hooks-apart  the same three stages each in an entry of its own, in a context per script
// The request is a snapshot as the router builds it for `GET /web0/api/bench/p` from wrk (two
// headers); the `-browser` workloads run the same stages on a request as a browser sends it
// (sixteen headers with cookies and a bearer token: 1.3 KB of ctx maps), since what a stage
// costs grows with the request when its script reads the request's headers, cookies or query:
// they are parsed as JSON in QuickJS. The `-post` workloads run them on a POST of a 100 KB JSON
// body that none of the scripts reads; `hooks-written` runs the hooks around a call that writes
// a 10 KB CSV with the response's writer.
// One thread, no I/O. Usage: npm run build && node bench/stage.js [--stages N] [--rounds N] [--only NAME,...]
'use strict';
const scripts = require('./scripts');
const { QuickJsDriver, adapterSource, ctxFields, ctxMaps, newResponseState, prepareScript, args, flag } = require('./engine-parts');

const STAGES = flag('--stages', 20000);
const ROUNDS = flag('--rounds', 3);
// --only NAME[,NAME]: those workloads only (with --stages N at two values under
// `valgrind --tool=callgrind`, the difference of the two counts is N's instructions)
const ONLY = args.includes('--only') ? args[args.indexOf('--only') + 1].split(',') : null;

const snapshot = scripts.WRK_REQUEST;
const COOKIE = 'session=3f9a8c1e2b7d4a6f9e0c1b2a3d4e5f60718293a4b5c6d7e8f9; _ga=GA1.1.1234567890.1732540000; _gid=GA1.1.987654321.1732540000; theme=dark; lang=en-US; consent=%7B%22ads%22%3Afalse%7D';
const browser = {
  ...snapshot,
  headers: {
    host: 'api.example.com',
    connection: 'keep-alive',
    'sec-ch-ua': '"Chromium";v="131", "Not_A Brand";v="24"',
    'sec-ch-ua-mobile': '?0',
    'sec-ch-ua-platform': '"Linux"',
    'user-agent': 'Mozilla/5.0 (X11; Linux x86_64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/131.0.0.0 Safari/537.36',
    accept: 'application/json, text/plain, */*',
    'sec-fetch-site': 'same-origin',
    'sec-fetch-mode': 'cors',
    'sec-fetch-dest': 'empty',
    referer: 'https://api.example.com/app/orders?page=2',
    'accept-encoding': 'gzip, deflate, br, zstd',
    'accept-language': 'en-US,en;q=0.9,de;q=0.8',
    cookie: COOKIE,
    authorization: 'Bearer eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0In0.c2lnbmF0dXJl',
    'x-requested-with': 'XMLHttpRequest',
  },
  cookies: Object.fromEntries(COOKIE.split('; ').map((c) => c.split('='))),
  query: { page: '2', sort: 'date' },
  url: '/web0/api/bench/p?page=2&sort=date',
  queryString: 'page=2&sort=date',
};
// A POST of a 100 KB JSON document (orders a client uploads): scripts that never read ctx.body
// should not pay for it.
const ORDERS = JSON.stringify({ orders: Array.from({ length: 1300 }, (_, i) => ({ id: i, sku: `SKU-${100000 + i}`, qty: (i % 7) + 1, note: 'deliver to the back door "B"' })) });
const post = { ...snapshot, method: 'POST', contentType: 'application/json', headers: { ...snapshot.headers, 'content-type': 'application/json', 'content-length': String(Buffer.byteLength(ORDERS)) }, body: ORDERS };
const requests = { wrk: snapshot, browser, post };
const head = (stage) => JSON.stringify({ stage, returnType: 'JSON', wantValue: false, async: false });

async function main() {
  const driver = await QuickJsDriver.create({ memoryLimitMb: 64, contextBudgetMb: 256, adapterSource: adapterSource(), interrupt: () => false });
  // the worker answers 'stage.request' itself (lib/runtime/worker/stages.ts): so does this host,
  // with the request of the workload running (`texts` below)
  let request = '';
  // (and 'stage.body': as the worker, it hands a stage the body when its script reads ctx.body)
  const host = (stageId, op) => (op === 'stage.request' ? request : op === 'stage.body' ? texts.body : '{"ok":true,"value":null}');
  const open = async (name, source) => driver.open(name, prepareScript(name, source, false).code, host);
  const main = await open('main.js', scripts.MAIN);
  const hooks = await open('hooks.js', scripts.HOOKS);
  const writer = await open('writer.js', scripts.WRITER);
  // the hooks and the call as the worker runs them: one context holding both scripts, one entry
  // running on from the before hook to the call and the after hook (StageHead.next)
  const hooked = await driver.open('hooks.js', prepareScript('hooks.js', scripts.HOOKS, false).code, host, undefined, [{ name: 'main.js', code: prepareScript('main.js', scripts.MAIN, false).code }]);
  const next = (stage, module, fn) => ({ stage, returnType: 'JSON', wantValue: false, async: false, module, fn });
  const chainHead = JSON.stringify({ stage: 'before', returnType: 'JSON', wantValue: false, async: false, module: 0, next: [next('call', 1, 'fn'), next('after', 0, 'after')] });
  let id = 1;
  let texts = { ctx: '', maps: '' };
  const stage = (ctx, fn, stageName, attributes, response = '', chunks = '') => {
    ctx.start(id++, fn, head(stageName), '', attributes, response, '', texts.ctx, texts.maps, texts.body === '' ? '' : null, chunks);
    const out = JSON.parse(ctx.drain()).outputs[0];
    if (out.status !== 'value') throw new Error(`${fn}: ${JSON.stringify(out)}`);
    return out;
  };
  const kinds = {
    trivial: () => stage(main, 'fn', 'call', '{}'),
    hooks: () => {
      hooked.start(id++, 'before', chainHead, '', '{}', '', '', texts.ctx, texts.maps, texts.body === '' ? '' : null, '');
      // (drained again while the stages go on: the worker does so once the jobs they queued ran)
      let d;
      do d = JSON.parse(hooked.drain());
      while (d.more);
      const out = d.outputs[0];
      if (out?.status !== 'value' || out.chain?.length !== 2) throw new Error(`hooks: ${JSON.stringify(out)}`);
    },
    'hooks-apart': () => {
      const before = stage(hooks, 'before', 'before', '{}');
      const attributes = JSON.stringify(before.attributes ?? {});
      stage(main, 'fn', 'call', attributes);
      stage(hooks, 'after', 'after', attributes);
    },
  };
  const workloads = {};
  for (const [from, snap] of Object.entries(requests)) {
    const own = { request: JSON.stringify(snap), ctx: JSON.stringify(ctxFields(snap)), maps: JSON.stringify(ctxMaps(snap)), body: snap.body };
    for (const [kind, run] of Object.entries(kinds)) {
      workloads[from === 'wrk' ? kind : `${kind}-${from}`] = { texts: own, run };
    }
  }
  // the hooks around a call that writes a 10 KB CSV with the response's writer: the after hook
  // gets the response as the pipeline carries it, the state without its body and the body's
  // chunks apart (it sets a header: it never reads them)
  workloads['hooks-written'] = {
    texts: workloads.hooks.texts,
    run: () => {
      const before = stage(hooks, 'before', 'before', '{}');
      const attributes = JSON.stringify(before.attributes ?? {});
      const call = stage(writer, 'fn', 'call', attributes);
      const { chunks, ...rest } = { ...newResponseState(), ...call.response };
      stage(hooks, 'after', 'after', attributes, JSON.stringify(rest), chunks.length > 0 ? JSON.stringify(chunks) : '');
    },
  };
  console.log(`QuickJS, one context per script, ${STAGES} requests a round, ${ROUNDS} rounds (µs per request, median round)`);
  for (const [name, w] of Object.entries(workloads)) {
    if (ONLY && !ONLY.includes(name)) continue;
    request = w.texts.request;
    texts = w.texts;
    const run = w.run;
    for (let i = 0; i < 2000; i++) run(); // warm-up
    const rounds = [];
    for (let r = 0; r < ROUNDS; r++) {
      const t0 = process.hrtime.bigint();
      for (let i = 0; i < STAGES; i++) run();
      rounds.push(Number(process.hrtime.bigint() - t0) / 1000 / STAGES);
    }
    rounds.sort((a, b) => a - b);
    console.log(`  ${name.padEnd(15)} ${rounds[Math.floor(rounds.length / 2)].toFixed(1)} µs  (rounds ${rounds.map((x) => x.toFixed(1)).join(', ')})`);
  }
}

main().catch((e) => {
  console.error(e);
  process.exit(1);
});
