'use strict';
// Run by test/exit.test.js in a child process: an app with the router serves one request, closes
// its HTTP server, and does nothing more (no router.close()). The process must then exit by itself.
const http = require('node:http');
const express = require('express');
const { createApiRouter, MemoryRegistry } = require('../..');

const engine = process.argv[2] ?? 'quickjs';
const registry = new MemoryRegistry({
  apps: {
    app1: {
      scripts: { 'main.js': 'export function fn(ctx) { return { hello: ctx.query.name } }' },
      apis: [{ path: 'hello', call: { script: 'main.js', function: 'fn' }, returnType: 'JSON' }],
    },
  },
});
const app = express();
app.use('/api', createApiRouter({ registry, engine }));
const server = app.listen(0, '127.0.0.1', () => {
  http.get({ host: '127.0.0.1', port: server.address().port, path: '/api/app1/hello?name=ada', agent: false }, (res) => {
    let body = '';
    res.setEncoding('utf8');
    res.on('data', (d) => (body += d));
    res.on('end', () => {
      process.stdout.write(`${res.statusCode} ${body}\n`);
      server.close();
    });
  });
});
