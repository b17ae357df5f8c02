#!/usr/bin/env node
/*
 * Large JSON bodies read by a script, against plain Express doing the same in the same run:
 *   count   the script reads an upstream's JSON body and answers `{ n: items.length }`
 *   proxy   the script reads it and answers the whole parsed body
 * The upstream, the Express app and the router run in this one process (the router's worker
 * threads included), one request at a time; the figure is this process's CPU time per request
 * (every thread: the upstream's share is the same for both) and the wall time per request.
 *
 *   npm run build && node bench/bodies.js [--size 4mb] [--requests 12] [--rounds 3]
 */
'use strict';
const http = require('node:http');
const path = require('node:path');

const args = process.argv.slice(2);
const flag = (name, fallback) => (args.includes(`--${name}`) ? args[args.indexOf(`--${name}`) + 1] : fallback);
const pkg = process.env.SCRIPTABLE_API_PATH || path.join(__dirname, '..', 'dist', 'cjs', 'index.js');
const { createApiRouter, MemoryRegistry } = require(pkg);
const { parseSize } = require(path.join(path.dirname(pkg), 'validations.js'));
const express = require('express');

const SIZE = parseSize(flag('size', '4mb'), '--size');
const REQUESTS = Number(flag('requests', 12));
const ROUNDS = Number(flag('rounds', 3));

const SCRIPT = `
export function count(ctx) { return { n: platform.http.request({ url: ctx.headers['x-upstream'] }).json().items.length } }
export function proxy(ctx) { return platform.http.request({ url: ctx.headers['x-upstream'] }).json() }
`;

function listen(server) {
  return new Promise((resolve) => server.listen(0, '127.0.0.1', () => resolve(`http://127.0.0.1:${server.address().port}`)));
}

async function measure(url, headers) {
  const c0 = process.cpuUsage();
  const t0 = performance.now();
  for (let i = 0; i < REQUESTS; i++) {
    const res = await fetch(url, { headers });
    const text = await res.text();
    if (res.status !== 200) throw new Error(`${url} answered ${res.status}: ${text.slice(0, 200)}`);
  }
  const cpu = process.cpuUsage(c0);
  return { cpuMs: (cpu.user + cpu.system) / 1000 / REQUESTS, wallMs: (performance.now() - t0) / REQUESTS };
}

async function main() {
  // items of about 33 characters each, about SIZE bytes in all
  const body = JSON.stringify({ items: Array.from({ length: Math.max(1, Math.floor(SIZE / 33)) }, (_, i) => ({ id: i, name: `item-${i}` })) });
  const upstream = http.createServer((req, res) => {
    res.setHeader('content-type', 'application/json');
    res.end(body);
  });
  const headers = { 'x-upstream': await listen(upstream) };

  const registry = new MemoryRegistry();
  registry.putScript('bench', 's.js', SCRIPT);
  for (const fn of ['count', 'proxy']) registry.putApi('bench', { path: fn, call: { script: 's.js', function: fn }, returnType: 'JSON' });
  const router = createApiRouter({ registry, outbound: { allowPrivateNetworks: true, maxBodyBytes: SIZE * 2 + 1024 } });
  const app = express();
  app.use('/web0/api', router);
  app.get('/express/count', async (req, res) => res.json({ n: (await (await fetch(req.headers['x-upstream'])).json()).items.length }));
  app.get('/express/proxy', async (req, res) => res.json(await (await fetch(req.headers['x-upstream'])).json()));
  const server = http.createServer(app);
  const base = await listen(server);
  await router.ready();

  const rows = [];
  for (const workload of ['count', 'proxy']) {
    const urls = { express: `${base}/express/${workload}`, router: `${base}/web0/api/bench/${workload}` };
    for (const url of Object.values(urls)) await measure(url, headers); // warm-up (the script's first compile)
    const rounds = { express: [], router: [] };
    for (let r = 0; r < ROUNDS; r++) for (const which of ['express', 'router']) rounds[which].push(await measure(urls[which], headers));
    const median = (list, key) => list.map((x) => x[key]).sort((a, b) => a - b)[Math.floor(list.length / 2)];
    for (const which of ['express', 'router']) rows.push({ workload, which, cpuMs: median(rounds[which], 'cpuMs'), wallMs: median(rounds[which], 'wallMs') });
  }
  console.log(`JSON body of ${(body.length / 1024).toFixed(0)} KiB, ${REQUESTS} requests a round, median of ${ROUNDS} rounds`);
  console.log('workload  server    CPU ms/req  wall ms/req');
  for (const r of rows) console.log(`${r.workload.padEnd(9)} ${r.which.padEnd(9)} ${r.cpuMs.toFixed(1).padStart(10)}  ${r.wallMs.toFixed(1).padStart(11)}`);
  await router.close();
  server.close();
  upstream.close();
}

main().catch((e) => {
  console.error(e);
  process.exit(1);
});
