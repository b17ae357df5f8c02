'use strict';
/**
 * The load generators bench/run.js drives a server with, behind one shape:
 *
 *   load(name, { url, connections, duration, rate, expect, timeout, rotate }) -> Promise<{
 *     reqPerSec, total, p50, p99,       // p50 / p99 in ms
 *     errors, non2xx, mismatches,       // socket errors + timeouts; non-2xx answers; 200s with another body
 *     cpuMs,                            // the load generator's own CPU time during the run
 *   }>
 *
 * `timeout` (s) is how long one request may take before it counts as an error. `rotate`
 * ({ prefix, count, suffix }) spreads the requests over `count` paths `<prefix><n><suffix>` in
 * turn, on the origin of `url`.
 *
 * - `wrk` (the default when it is installed and no fixed rate is asked for): the C load
 *   generator, from the Debian package (`apt-get install wrk`). One thread, so it leaves most of a
 *   core to the server. It counts non-2xx answers but does not read bodies, so run.js checks one
 *   response before and one after each run. No fixed rate. Its CPU time is read with the shell's
 *   `times` after it exits. Rotation uses bench/rotate.lua.
 * - `autocannon`: runs in this process, checks every body (`expect`), supports a fixed rate. It
 *   is JavaScript, so it takes a good share of a core at these rates.
 */
const { spawn, spawnSync } = require('node:child_process');
const path = require('node:path');

const LOADERS = ['autocannon', 'wrk'];

/** Throws with the fix when the loader cannot run here. */
function checkLoader(name, { rate } = {}) {
  if (!LOADERS.includes(name)) throw new Error(`unknown --loader ${name} (${LOADERS.join(', ')})`);
  if (name === 'wrk') {
    const r = spawnSync('wrk', ['--version'], { encoding: 'utf8' });
    if (r.error) throw new Error('--loader wrk: wrk is not installed (Debian: apt-get install wrk)');
    if (rate) throw new Error('--loader wrk cannot drive a fixed --rate (use the default loader, autocannon)');
  }
}

function hasWrk() {
  return !spawnSync('wrk', ['--version'], { encoding: 'utf8' }).error;
}

/** wrk when it is installed and no fixed rate is asked for, else autocannon, with a note saying why. */
function defaultLoader({ rate } = {}) {
  if (rate) return 'autocannon';
  if (hasWrk()) return 'wrk';
  console.log('Note: wrk is not installed (Debian: apt-get install wrk), so autocannon drives the load; its CPU competes with the server on the same cores.');
  return 'autocannon';
}

function load(name, opts) {
  return name === 'wrk' ? wrk(opts) : cannon(opts);
}

function cannon({ url, connections, duration, rate, expect, timeout = 30, rotate }) {
  const autocannon = require('autocannon');
  const me0 = process.cpuUsage();
  return new Promise((resolve, reject) => {
    const opts = { url, connections, duration, timeout, ...(rate ? { overallRate: rate } : {}) };
    // (autocannon checks `expectBody` only without `requests`: rotated bodies are checked here)
    let rotatedMismatches = 0;
    const check = (status, body) => {
      if (status === 200 && body !== expect) rotatedMismatches++;
    };
    if (rotate) opts.requests = Array.from({ length: rotate.count }, (_, n) => ({ path: `${rotate.prefix}${n}${rotate.suffix}`, onResponse: check }));
    else opts.expectBody = expect;
    autocannon(opts, (err, r) => {
      if (err) return reject(err);
      const me = process.cpuUsage(me0);
      resolve({
        reqPerSec: r.requests.average,
        total: r.requests.total,
        p50: r.latency.p50,
        p99: r.latency.p99,
        errors: r.errors + r.timeouts,
        non2xx: r.non2xx,
        mismatches: rotate ? rotatedMismatches : r.mismatches,
        cpuMs: (me.user + me.system) / 1000,
      });
    });
  });
}

/** A wrk duration such as `812.00us`, `3.21ms` or `1.02s`, in ms. */
function wrkMs(text) {
  const m = /^([\d.]+)(us|ms|s|m)$/.exec(text);
  if (!m) return NaN;
  return Number(m[1]) * { us: 0.001, ms: 1, s: 1000, m: 60000 }[m[2]];
}

/** The numbers in wrk's `--latency` report, and the children's CPU line printed by `times`. */
function parseWrk(out, duration) {
  const num = (re) => {
    const m = re.exec(out);
    return m ? Number(m[1]) : 0;
  };
  const total = num(/^\s*(\d+) requests in /m);
  const sock = /Socket errors: connect (\d+), read (\d+), write (\d+), timeout (\d+)/.exec(out);
  // `times` prints this shell's user/sys times, then its children's: the last line is wrk's
  const times = [...out.matchAll(/^(\d+)m([\d.]+)s (\d+)m([\d.]+)s$/gm)].at(-1);
  const rps = num(/^Requests\/sec:\s+([\d.]+)/m);
  return {
    reqPerSec: rps || total / duration,
    total,
    p50: wrkMs(/^\s+50%\s+(\S+)/m.exec(out)?.[1] ?? ''),
    p99: wrkMs(/^\s+99%\s+(\S+)/m.exec(out)?.[1] ?? ''),
    errors: sock ? sock.slice(1).reduce((s, x) => s + Number(x), 0) : 0,
    non2xx: num(/Non-2xx or 3xx responses:\s+(\d+)/),
    mismatches: 0,
    cpuMs: times ? (Number(times[1]) * 60 + Number(times[2]) + Number(times[3]) * 60 + Number(times[4])) * 1000 : NaN,
  };
}

function wrk({ url, connections, duration, timeout = 30, rotate }) {
  const args = ['-t1', `-c${connections}`, `-d${duration}s`, `--timeout`, `${timeout}s`, '--latency'];
  if (rotate) args.push('-s', path.join(__dirname, 'rotate.lua'), new URL(url).origin, '--', rotate.prefix, String(rotate.count), rotate.suffix);
  else args.push(url);
  return new Promise((resolve, reject) => {
    const child = spawn('bash', ['-c', 'wrk "$@" || exit $?; times', 'wrk', ...args], { stdio: ['ignore', 'pipe', 'pipe'] });
    let out = '';
    child.stdout.on('data', (d) => (out += d));
    child.stderr.on('data', (d) => (out += d));
    child.on('error', reject);
    child.on('close', (code) => {
      if (code !== 0) return reject(new Error(`wrk exited with ${code}:\n${out}`));
      if (!/ requests in /.test(out)) return reject(new Error(`wrk: no report:\n${out}`));
      const r = parseWrk(out, duration);
      resolve(r);
    });
  });
}

module.exports = { LOADERS, checkLoader, defaultLoader, load, parseWrk };
