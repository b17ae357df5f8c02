'use strict';
// Starts a throw-away redis-server (the Debian package) on a free loopback port for tests.
//
//   const { startRedis, redisServerPath, requireRedisOrSkip } = require('../helpers/redis');
//   const redis = await startRedis();   // { url, port, stop(), restart() }
//
// When redis-server is not on PATH the suites fail with the command that installs it
// (`describeRedis`): a missing server never passes for a green run.
const { spawn } = require('node:child_process');
const fs = require('node:fs');
const path = require('node:path');
const net = require('node:net');

let cachedPath;
/** Absolute path of redis-server on PATH, or null. */
function redisServerPath() {
  if (cachedPath !== undefined) return cachedPath;
  cachedPath = null;
  for (const dir of (process.env.PATH || '').split(path.delimiter)) {
    if (!dir) continue;
    const candidate = path.join(dir, 'redis-server');
    try {
      fs.accessSync(candidate, fs.constants.X_OK);
      cachedPath = candidate;
      break;
    } catch {
      // not here
    }
  }
  return cachedPath;
}

/** A free TCP port on 127.0.0.1 (listen on port 0, read it, close). */
function freePort() {
  return new Promise((resolve, reject) => {
    const srv = net.createServer();
    srv.unref();
    srv.on('error', reject);
    srv.listen(0, '127.0.0.1', () => {
      const { port } = srv.address();
      srv.close(() => resolve(port));
    });
  });
}

/** Resolves when the server answers PING with +PONG, rejects after `timeoutMs`. */
async function waitForPing(port, timeoutMs = 10000) {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const ok = await new Promise((resolve) => {
      const sock = net.connect({ port, host: '127.0.0.1' });
      let buf = '';
      const done = (v) => {
        sock.destroy();
        resolve(v);
      };
      sock.setTimeout(500, () => done(false));
      sock.on('error', () => done(false));
      sock.on('connect', () => sock.write('PING\r\n'));
      sock.on('data', (d) => {
        buf += d.toString();
        if (buf.includes('\r\n')) done(buf.startsWith('+PONG'));
      });
    });
    if (ok) return;
    if (Date.now() > deadline) throw new Error(`redis-server on port ${port} did not answer PING within ${timeoutMs} ms`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

function spawnServer(bin, port) {
  const child = spawn(
    bin,
    ['--port', String(port), '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no', '--daemonize', 'no', '--loglevel', 'warning'],
    { stdio: ['ignore', 'ignore', 'pipe'] },
  );
  let stderr = '';
  child.stderr.on('data', (d) => {
    stderr += d.toString();
  });
  // Never outlive this process (a crashed or killed test run would otherwise leave it running).
  const killOnExit = () => child.kill('SIGKILL');
  process.once('exit', killOnExit);
  child.exited = new Promise((resolve) =>
    child.once('exit', (code) => {
      process.removeListener('exit', killOnExit);
      resolve(code);
    }),
  );
  child.stderrText = () => stderr;
  return child;
}

async function stopServer(child) {
  if (!child || child.exitCode !== null || child.signalCode !== null) return;
  child.kill('SIGTERM');
  const timer = setTimeout(() => child.kill('SIGKILL'), 3000);
  await child.exited;
  clearTimeout(timer);
}

/**
 * Spawns redis-server on a free loopback port without persistence and waits until it answers.
 * Returns { url, port, stop(), restart() }; restart() starts it again on the same port (empty).
 */
async function startRedis() {
  const bin = redisServerPath();
  if (!bin) {
    throw new Error('redis-server is not on PATH: install it (Debian: apt-get install -y redis-server) to run the Redis tests');
  }
  const port = await freePort();
  let child;
  const start = async () => {
    child = spawnServer(bin, port);
    try {
      await Promise.race([
        waitForPing(port),
        child.exited.then((code) => {
          throw new Error(`redis-server exited with ${code}: ${child.stderrText()}`);
        }),
      ]);
    } catch (err) {
      await stopServer(child);
      throw err;
    }
  };
  await start();
  return {
    port,
    url: `redis://127.0.0.1:${port}`,
    async stop() {
      await stopServer(child);
    },
    async restart() {
      await stopServer(child);
      await start();
    },
  };
}

/**
 * `describe` for suites that need redis-server: runs them when it is installed; otherwise the
 * suite fails, saying how to install it (`bash .ci/run` does).
 */
function describeRedis(name, fn) {
  if (redisServerPath()) return describe(name, fn);
  return describe(name, () => {
    test('redis-server is installed', () => {
      throw new Error('redis-server is not on PATH: install it (apt-get install -y redis-server) or run `bash .ci/run`');
    });
  });
}

module.exports = { startRedis, redisServerPath, describeRedis, freePort, waitForPing };
