const http = require('node:http');
const { createApiRouter, MemoryRegistry, WorkerPool } = require('.');
const express = require('express');
(async () => {
  const upstream = http.createServer((req, res) => setTimeout(() => { res.setHeader('content-type', 'application/json'); res.end('{"w":1}'); }, 200));
  await new Promise((r) => upstream.listen(0, '127.0.0.1', 1024, r));
  const port = upstream.address().port;
  const registry = new MemoryRegistry({ apps: { app1: { scripts: { 'wait.js': `export function fn(ctx) {
    var res = platform.http.request({ url: 'http://127.0.0.1:' + ctx.query.port + '/wait/' + ctx.query.n });
    return { status: res.status, n: Number(ctx.query.n) };
  }` }, apis: [{ path: 'wait', call: { script: 'wait.js', function: 'fn' }, returnType: 'JSON' }] } } });
  const pool = new WorkerPool();
  const router = createApiRouter({ registry, engine: pool, outbound: { allowPrivateNetworks: true } });
  const app = express(); app.use('/api', router);
  const server = app.listen(0, '127.0.0.1', 1024);
  await router.ready();
  const base = `http://127.0.0.1:${server.address().port}/api/app1/wait?port=${port}`;
  await fetch(base + '&n=-1');
  const N = +(process.argv[2] || 500);
  const T = Date.now();
  let done = 0;
  const st = setInterval(() => console.log(Date.now() - T, done, JSON.stringify(pool.stats())), 250);
  const rs = await Promise.all(Array.from({ length: N }, (_, n) => fetch(base + '&n=' + n).then(async (r) => { done++; return r.status; })));
  console.log('total', Date.now() - T, rs.filter((s) => s !== 200).length, 'errors');
  clearInterval(st);
  server.close(); upstream.close(); await router.close(); await pool.close();
})();
