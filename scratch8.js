const http = require('node:http');
const express = require('express');
(async () => {
  const upstream = http.createServer((req, res) => setTimeout(() => { res.setHeader('content-type', 'application/json'); res.end('{"w":1}'); }, 200));
  await new Promise((r) => upstream.listen(0, '127.0.0.1', 1024, r));
  const port = upstream.address().port;
  const app = express();
  app.get('/x', async (req, res) => { const r = await fetch(`http://127.0.0.1:${port}/w`); res.json({ status: r.status, b: await r.json() }); });
  const server = await new Promise((r) => { const s = app.listen(0, '127.0.0.1', 1024, () => r(s)); });
  const base = `http://127.0.0.1:${server.address().port}/x`;
  await fetch(base);
  const T = Date.now();
  await Promise.all(Array.from({ length: 500 }, () => fetch(base).then((r) => r.json())));
  console.log('plain express total', Date.now() - T);
  server.close(); upstream.close();
})();
