const http = require('node:http');
const { createApiRouter, MemoryRegistry } = require('.');
const express = require('express');
(async () => {
  const engine = process.argv[2] || 'vm2';
  const upstream = http.createServer((req, res) => setTimeout(() => { res.setHeader('content-type', 'application/json'); res.end('{"waited":500}'); }, 500));
  await new Promise((r) => upstream.listen(0, '127.0.0.1', r));
  const port = upstream.address().port;
  const SLOW = `export function fn(ctx) {
  const started = Date.now();
  const res = platform.http.request({ url: 'http://127.0.0.1:' + ctx.query.port + '/wait?ms=' + (ctx.query.ms ?? 500) });
  return { status: res.status, body: res.json(), waitedMs: Date.now() - started };
}`;
  const registry = new MemoryRegistry({ apps: { app1: { scripts: { 'slow.js': SLOW }, apis: [{ path: 'slow', call: { script: 'slow.js', function: 'fn' }, returnType: 'JSON' }] } } });
  const router = createApiRouter({ registry, engine, workers: 2, scriptTimeoutMs: 15000, outbound: { allowPrivateNetworks: true } });
  const app = express(); app.use('/api', router);
  const server = app.listen(0);
  const base = `http://127.0.0.1:${server.address().port}/api/app1/slow?port=${port}`;
  const T = Date.now();
  const st = setInterval(() => console.log(Date.now() - T, JSON.stringify(router.engine?.stats?.() ?? '')), 250);
  for (let round = 0; round < 2; round++) {
    const t = Date.now();
    const rs = await Promise.all(Array.from({ length: 20 }, () => fetch(base).then(async (r) => [r.status, (await r.json()).waitedMs])));
    console.log('burst', Date.now() - t, rs.map((r) => r.join(':')).join(' '));
  }
  clearInterval(st);
  server.close(); upstream.close(); await router.close();
})();
