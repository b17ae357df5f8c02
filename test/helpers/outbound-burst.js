'use strict';
// Run by test/outbound-connections.test.js in a child process (Node prints its own warnings on
// the process's stderr): one call makes 32 outbound requests at once; prints the call's answer.
const http = require('node:http');
const { makeApp } = require('./app');

const up = http.createServer((req, res) => setTimeout(() => res.end('{"ok":true}'), 50));
up.listen(0, '127.0.0.1', async () => {
  const script = `export async function fn(ctx) {
    const rs = await Promise.all(Array.from({ length: 32 }, async () => platform.http.request(ctx.query.url)));
    return rs.filter((r) => r.json().ok).length;
  }`;
  const { app, router } = makeApp({
    apps: { app1: { scripts: { 'main.js': script }, apis: [{ path: 'p', call: { script: 'main.js', function: 'fn' }, returnType: 'JSON' }] } },
    router: { outbound: { allowPrivateNetworks: true } },
  });
  const server = app.listen(0, '127.0.0.1', () => {
    const url = encodeURIComponent(`http://127.0.0.1:${up.address().port}/`);
    http.get({ host: '127.0.0.1', port: server.address().port, path: `/web0/api/app1/p?url=${url}`, agent: false }, (res) => {
      let body = '';
      res.setEncoding('utf8');
      res.on('data', (d) => (body += d));
      res.on('end', async () => {
        process.stdout.write(`${res.statusCode} ${body}\n`);
        server.close();
        up.close();
        await router.close();
      });
    });
  });
});
