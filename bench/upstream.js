'use strict';
/**
 * The upstream of the I/O configurations, in its own process (started by bench/run.js):
 * answers every request with `{"ok":true}` after a delay (default 100 ms).
 *
 *   node bench/upstream.js [--delay MS]
 *
 * Started with an IPC channel it reports `{ type: 'listening', port }` and answers
 * `{ type: 'stats' }` with its CPU time (`cpu`, µs), so bench/run.js can tell its load apart
 * from other processes on the machine.
 */
const http = require('node:http');

const i = process.argv.indexOf('--delay');
const delay = i > 0 ? Number(process.argv[i + 1]) : 100;
const BODY = '{"ok":true}';

const server = http.createServer((req, res) => {
  req.resume();
  setTimeout(() => {
    res.writeHead(200, { 'content-type': 'application/json', 'content-length': BODY.length });
    res.end(BODY);
  }, delay);
});
server.keepAliveTimeout = 60_000;
server.maxRequestsPerSocket = 0;
server.listen(0, '127.0.0.1', () => {
  const { port } = server.address();
  if (process.send) process.send({ type: 'listening', port });
  else console.log(`upstream on http://127.0.0.1:${port}/ (${delay} ms)`);
});

process.on('message', (msg) => {
  if (msg?.type === 'stats') {
    const cpu = process.cpuUsage();
    process.send({ type: 'stats', cpu: cpu.user + cpu.system });
  }
});
process.on('disconnect', () => process.exit(0));
