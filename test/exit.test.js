'use strict';
// Idle means unreferenced: a process that mounted the router, served a request and closed its
// HTTP server exits by itself, without router.close() (workers, ports and timers hold the event
// loop only while a call is in flight or in line).
const { spawn } = require('node:child_process');
const path = require('node:path');

test.each(['quickjs', 'vm2'])('%s: a process that served one request and closed its server exits on its own', async (engine) => {
  const child = spawn(process.execPath, [path.join(__dirname, 'helpers', 'serve-once.js'), engine], { stdio: ['ignore', 'pipe', 'pipe'] });
  let out = '';
  let err = '';
  child.stdout.on('data', (d) => (out += d));
  child.stderr.on('data', (d) => (err += d));
  const killer = setTimeout(() => child.kill('SIGKILL'), 20_000);
  const [code, signal] = await new Promise((resolve) => child.on('exit', (c, s) => resolve([c, s])));
  clearTimeout(killer);
  expect({ code, signal, out, err }).toEqual({ code: 0, signal: null, out: '200 {"hello":"ada"}\n', err: '' });
}, 30_000);
