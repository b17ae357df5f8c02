'use strict';
// `scriptable-api serve` as a real child process: serves a folder, logs one line per request,
// refuses a taken port, and on SIGTERM finishes the request in flight before exiting.
const { spawn } = require('node:child_process');
const fs = require('node:fs');
const http = require('node:http');
const net = require('node:net');
const os = require('node:os');
const path = require('node:path');

const BIN = path.join(__dirname, '..', 'bin', 'scriptable-api.js');
const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'sapi-cli-'));
const children = new Set();
afterAll(() => {
  for (const c of children) if (c.exitCode === null) c.kill('SIGKILL');
  fs.rmSync(tmp, { recursive: true, force: true });
});

function write(rel, content) {
  const file = path.join(tmp, rel);
  fs.mkdirSync(path.dirname(file), { recursive: true });
  fs.writeFileSync(file, typeof content === 'string' ? content : JSON.stringify(content));
}
write('apps/demo/apis/hello.json', { path: 'hello', call: { script: 'main.js', function: 'hello' }, returnType: 'Text' });
write('apps/demo/apis/slow.json', { path: 'slow', call: { script: 'main.js', function: 'slow' }, returnType: 'JSON' });
write('apps/demo/apis/broken.json', { path: 'broken', call: { script: 'main.js', function: 'broken' }, returnType: 'JSON' });
write('apps/demo/scripts/main.js', `
export function broken(ctx) { console.log('broken: about to fail'); const x = null; return x.field }
export function hello(ctx) { return 'hello ' + (ctx.query.name || 'world') }
// waits on the test's upstream: the request is in flight until the test lets the upstream answer
export function slow(ctx) { return { upstream: platform.http.request({ url: ctx.query.upstream }).json() } }
`);
write('config.json', { outbound: { allowPrivateNetworks: true }, scriptTimeoutMs: 20000, workers: 1 });

/** Runs the CLI; resolves `ready` with the URL it prints; collects its output. */
function cli(args) {
  const child = spawn(process.execPath, [BIN, ...args], { stdio: ['ignore', 'pipe', 'pipe'] });
  children.add(child);
  const out = { stdout: '', stderr: '' };
  child.stdout.on('data', (d) => (out.stdout += d));
  child.stderr.on('data', (d) => (out.stderr += d));
  const exited = new Promise((resolve) => child.once('exit', (code, signal) => resolve({ code, signal })));
  const ready = new Promise((resolve, reject) => {
    child.stdout.on('data', () => {
      const m = /on (http:\/\/127\.0\.0\.1:\d+\S*)/.exec(out.stdout);
      if (m) resolve(m[1]);
    });
    exited.then(({ code }) => reject(new Error(`exited with ${code}: ${out.stderr}`)));
  });
  ready.catch(() => undefined);
  return { child, out, ready, exited };
}

function get(url) {
  return new Promise((resolve, reject) => {
    http
      .get(url, (res) => {
        let body = '';
        res.on('data', (d) => (body += d));
        res.on('end', () => resolve({ status: res.statusCode, headers: res.headers, body }));
      })
      .on('error', reject);
  });
}

/** Waits for `pattern` in the child's output (an event, not a sleep). */
function waitFor(run, stream, pattern, ms = 15000) {
  return new Promise((resolve, reject) => {
    const check = () => {
      if (pattern.test(run.out[stream])) {
        clearTimeout(timer);
        run.child[stream].off('data', check);
        resolve();
      }
    };
    const timer = setTimeout(() => reject(new Error(`no ${pattern} in ${stream}: ${run.out[stream]}`)), ms);
    run.child[stream].on('data', check);
    check();
  });
}

test('serves a folder: an index at the mount point, the APIs, one log line per request', async () => {
  const run = cli(['serve', path.join(tmp, 'apps'), '--port', '0', '--mount', '/api', '--config', path.join(tmp, 'config.json')]);
  const url = await run.ready;
  expect(url).toMatch(/^http:\/\/127\.0\.0\.1:\d+\/api$/);
  const index = await get(url);
  expect(index.status).toBe(200);
  expect(JSON.parse(index.body)).toEqual({
    service: 'scriptable-api',
    apps: [{ appId: 'demo', apis: [
      { path: 'broken', url: `${url}/demo/broken`, methods: null, returnType: 'JSON' },
      { path: 'hello', url: `${url}/demo/hello`, methods: null, returnType: 'Text' },
      { path: 'slow', url: `${url}/demo/slow`, methods: null, returnType: 'JSON' },
    ] }],
  });
  const hello = await get(`${url}/demo/hello?name=cli`);
  expect(hello.body).toBe('hello cli');
  await waitFor(run, 'stdout', new RegExp(`GET /api/demo/hello\\?name=cli 200 [\\d.]+ms ${hello.headers['x-request-id']}`));
  run.child.kill('SIGINT');
  expect(await run.exited).toEqual({ code: 0, signal: null });
});

test("the log keeps each line's fields: a console line names its request, a failure line the script's frames", async () => {
  const run = cli(['serve', path.join(tmp, 'apps'), '--port', '0', '--config', path.join(tmp, 'config.json')]);
  const url = await run.ready;
  const failed = await get(`${url}/demo/broken`);
  const id = failed.headers['x-request-id'];
  await waitFor(run, 'stdout', /broken: about to fail/);
  await waitFor(run, 'stderr', new RegExp(`${id}[^\\n]*`));
  // (calls of many requests interleave: a console line without its request id cannot be told apart)
  const said = run.out.stdout.split('\n').find((l) => l.includes('broken: about to fail'));
  expect(said).toContain(`"requestId":"${id}"`);
  expect(said).toContain('"script":"main.js"');
  const line = run.out.stderr.split('\n').find((l) => l.includes(id));
  expect(line).toContain('"errorName":"TypeError"');
  expect(line).toMatch(/"stack":"at broken \(main\.js:2:\d+\)"/);
  run.child.kill('SIGTERM');
  expect((await run.exited).code).toBe(0);
});

test('a failed call is logged with its place, and /metrics counts it', async () => {
  const run = cli(['serve', path.join(tmp, 'apps'), '--port', '0', '--mount', '/api', '--config', path.join(tmp, 'config.json')]);
  const url = await run.ready;
  const failed = await get(`${url}/demo/broken`);
  expect(failed.status).toBe(500);
  const id = failed.headers['x-request-id'];
  // one structured line for the failure: request id, app, API path, code and the script's line
  await waitFor(run, 'stderr', new RegExp(`${id}[^\\n]*`));
  const line = run.out.stderr.split('\n').find((l) => l.includes(id));
  expect(line).toMatch(/demo/);
  expect(line).toMatch(/broken/);
  expect(line).toMatch(/270000/);
  expect(line).toMatch(/main\.js:2:/);
  const origin = new URL(url).origin;
  const metrics = await get(`${origin}/metrics`);
  expect(metrics.status).toBe(200);
  expect(metrics.headers['content-type']).toMatch(/text\/plain/);
  expect(metrics.body).toMatch(/scriptable_api_requests_total\{[^}]*app="demo"[^}]*status="500"[^}]*\} 1/);
  run.child.kill('SIGTERM');
  expect(await run.exited).toEqual({ code: 0, signal: null });
});

test('SIGTERM while a request is in flight: it finishes, then the process exits 0', async () => {
  let release;
  let onArrival;
  const arrived = new Promise((resolve) => (onArrival = resolve));
  const upstream = http.createServer((req, res) => {
    release = () => res.end(JSON.stringify({ released: true }));
    onArrival();
  });
  await new Promise((r) => upstream.listen(0, '127.0.0.1', r));
  upstream.url = `http://127.0.0.1:${upstream.address().port}/`;

  const run = cli(['serve', path.join(tmp, 'apps'), '--port', '0', '--config', path.join(tmp, 'config.json')]);
  const url = await run.ready;
  const pending = get(`${url}/demo/slow?upstream=${encodeURIComponent(upstream.url)}`);
  await arrived; // the API's script is now waiting on the upstream: the request is in flight
  run.child.kill('SIGTERM');
  await waitFor(run, 'stdout', /SIGTERM: no new connections/);
  // the port no longer accepts connections
  await expect(get(`${url}/demo/hello`)).rejects.toThrow(/ECONNREFUSED/);
  release();
  const res = await pending;
  expect(res.status).toBe(200);
  expect(JSON.parse(res.body)).toEqual({ upstream: { released: true } });
  expect(await run.exited).toEqual({ code: 0, signal: null });
  expect(run.out.stdout).toMatch(/stopped/);
  upstream.close();
});

test('SIGTERM with a script still running after shutdownTimeoutMs: its connection closes, the script stops, the log line says the server closed it, the process exits 0', async () => {
  let onArrival;
  const arrived = new Promise((resolve) => (onArrival = resolve));
  const upstream = http.createServer(() => onArrival()); // never answers
  await new Promise((r) => upstream.listen(0, '127.0.0.1', r));
  upstream.url = `http://127.0.0.1:${upstream.address().port}/`;
  // the script's own limits (and the upstream's) are far past the shutdown limit
  write('config-shutdown.json', { outbound: { allowPrivateNetworks: true, timeoutMs: 120000 }, scriptTimeoutMs: 120000, shutdownTimeoutMs: 500, workers: 1 });

  try {
    const run = cli(['serve', path.join(tmp, 'apps'), '--port', '0', '--config', path.join(tmp, 'config-shutdown.json')]);
    const url = await run.ready;
    const pending = get(`${url}/demo/slow?upstream=${encodeURIComponent(upstream.url)}`).then(() => 'answered', (e) => e.code);
    await arrived;
    run.child.kill('SIGTERM');
    const exited = await Promise.race([run.exited, new Promise((r) => setTimeout(() => r('still running after 15 s'), 15000).unref())]);
    expect(exited).toEqual({ code: 0, signal: null });
    expect(await pending).toBe('ECONNRESET');
    expect(run.out.stderr + run.out.stdout).toMatch(/1 request\(s\) still open after 500 ms: closing their connections and stopping their scripts/);
    // (the server cut it, not its client)
    expect(run.out.stdout).toMatch(/GET \/web0\/api\/demo\/slow\?upstream=\S+ - \(closed at shutdown\) [\d.]+ms /);
    expect(run.out.stdout).not.toMatch(/client closed/);
  } finally {
    upstream.closeAllConnections();
    upstream.close();
  }
});

test('a second signal while the requests in flight finish exits at once, with exit code 130', async () => {
  let onArrival;
  const arrived = new Promise((resolve) => (onArrival = resolve));
  const upstream = http.createServer(() => onArrival()); // never answers: the request stays in flight
  await new Promise((r) => upstream.listen(0, '127.0.0.1', r));
  try {
    const run = cli(['serve', path.join(tmp, 'apps'), '--port', '0', '--config', path.join(tmp, 'config.json')]);
    const url = await run.ready;
    const pending = get(`${url}/demo/slow?upstream=${encodeURIComponent(`http://127.0.0.1:${upstream.address().port}/`)}`).catch((e) => e.code);
    await arrived;
    run.child.kill('SIGTERM');
    await waitFor(run, 'stdout', /SIGTERM: no new connections/);
    run.child.kill('SIGINT');
    const exited = await Promise.race([run.exited, new Promise((r) => setTimeout(() => r('still running after 15 s'), 15000).unref())]);
    expect(exited).toEqual({ code: 130, signal: null });
    expect(run.out.stderr).toMatch(/SIGINT again: exiting now/);
    await pending;
  } finally {
    upstream.closeAllConnections();
    upstream.close();
  }
});

describe('a signal while the server starts (or as it prints its line: a supervisor waiting for that line)', () => {
  // a config module that waits for the test (a line on its stdin) before the server starts
  write('conf/waits.js', `module.exports = async () => {
  process.stdout.write('loading the config\\n');
  await new Promise((resolve) => process.stdin.once('data', resolve));
  process.stdin.pause();
  return { port: 0, workers: 1 };
};`);
  function starting() {
    const child = spawn(process.execPath, [BIN, 'serve', path.join(tmp, 'apps'), '--config', path.join(tmp, 'conf/waits.js')], { stdio: ['pipe', 'pipe', 'pipe'] });
    children.add(child);
    const run = { child, out: { stdout: '', stderr: '' } };
    child.stdout.on('data', (d) => (run.out.stdout += d));
    child.stderr.on('data', (d) => (run.out.stderr += d));
    run.exited = new Promise((resolve) => child.once('exit', (code, signal) => resolve({ code, signal })));
    return run;
  }

  test('stops it cleanly once it has started: exit 0, not death by the signal', async () => {
    const run = starting();
    await waitFor(run, 'stdout', /loading the config/);
    run.child.kill('SIGTERM');
    run.child.stdin.end('go\n');
    // (before, the handlers were installed only after the line was printed: Node.js's default ended the process)
    expect(await run.exited).toEqual({ code: 0, signal: null });
    expect(run.out.stdout).toMatch(/serving 1 app\(s\)[^]*SIGTERM: no new connections[^]*stopped/);
  });

  test('a second one exits at once, with exit code 130', async () => {
    const run = starting();
    await waitFor(run, 'stdout', /loading the config/);
    run.child.kill('SIGTERM');
    run.child.kill('SIGINT');
    expect(await run.exited).toEqual({ code: 130, signal: null });
    // (two signals pending together may be handled in either order)
    expect(run.out.stderr).toMatch(/(SIGINT|SIGTERM) again: exiting now/);
  });
});

test('a port in use: a clear message and exit code 1', async () => {
  const blocker = http.createServer();
  await new Promise((r) => blocker.listen(0, '127.0.0.1', r));
  try {
    const run = cli(['serve', path.join(tmp, 'apps'), '--port', String(blocker.address().port)]);
    expect(await run.exited).toEqual({ code: 1, signal: null });
    expect(run.out.stderr).toBe(`scriptable-api: port ${blocker.address().port} on 127.0.0.1 is already in use: stop the other server or choose another port (--port)\n`);
  } finally {
    blocker.close();
  }
});

test('a bad command line exits 2 with the usage; a bad option in the config file exits 1 naming it', async () => {
  const bad = cli(['serve']);
  expect(await bad.exited).toEqual({ code: 2, signal: null });
  expect(bad.out.stderr).toMatch(/serve needs the folder of apps[\s\S]*Usage: scriptable-api serve <root>/);
  const port = cli(['serve', tmp, '--port', 'x']);
  expect((await port.exited).code).toBe(2);
  expect(port.out.stderr).toMatch(/--port must be an integer from 0 to 65535, got 'x'/);
  write('typo.json', { scriptTimeoutMS: 5 });
  const typo = cli(['serve', path.join(tmp, 'apps'), '--port', '0', '--config', path.join(tmp, 'typo.json')]);
  expect((await typo.exited).code).toBe(1);
  expect(typo.out.stderr).toMatch(/invalid scriptTimeoutMS: is not an option \(did you mean 'scriptTimeoutMs'\?\)/);
  const redis = cli(['serve', path.join(tmp, 'apps'), '--port', '0', '--redis-url', 'http://cache:6379']);
  expect((await redis.exited).code).toBe(1);
  expect(redis.out.stderr).toMatch(/invalid --redis-url: must use redis:\/\/ or rediss:\/\/, got http:\/\//);
  const help = cli(['--help']);
  expect((await help.exited).code).toBe(0);
  expect(help.out.stdout).toMatch(/--script-timeout-ms/);
});

test('an apps folder that is missing or is a file: exit 1 naming it, nothing served', async () => {
  const missing = cli(['serve', path.join(tmp, 'no-such-apps'), '--port', '0']);
  expect(await missing.exited).toEqual({ code: 1, signal: null });
  expect(missing.out.stderr).toBe(`scriptable-api: the apps folder ${path.join(tmp, 'no-such-apps')} does not exist\n`);
  // (`serve config.json` for `serve --config config.json`: served no apps, with a warning)
  const file = cli(['serve', path.join(tmp, 'config.json'), '--port', '0']);
  expect(await file.exited).toEqual({ code: 1, signal: null });
  expect(file.out.stderr).toBe(`scriptable-api: the apps folder ${path.join(tmp, 'config.json')} is not a folder\n`);
  expect(file.out.stdout).not.toMatch(/serving/);
});

test('a config file: relative paths from its folder, flags win, the folder may come from it', async () => {
  const { parseCli } = require('../dist/cjs/cli/args.js');
  const { resolveConfig } = require('../dist/cjs/cli/config.js');
  write('conf/site.json', { root: '../apps', sandboxDir: 'data', port: 4000, mount: '/api/', outbound: { allowHosts: ['x.test'] } });
  const fromFile = await resolveConfig(parseCli(['serve', '--config', path.join(tmp, 'conf/site.json')]));
  expect(fromFile).toMatchObject({ root: path.join(tmp, 'apps'), port: 4000, mount: '/api', host: '127.0.0.1', index: true, router: { sandboxDir: path.join(tmp, 'conf/data'), outbound: { allowHosts: ['x.test'] } } });
  const flags = await resolveConfig(parseCli(['serve', 'elsewhere', '--config', path.join(tmp, 'conf/site.json'), '--port', '0', '--no-index', '--engine', 'vm2']), tmp);
  expect(flags).toMatchObject({ root: path.join(tmp, 'elsewhere'), port: 0, index: false, router: { engine: 'vm2' } });
  write('conf/bad.json', { mount: 'api' });
  await expect(resolveConfig(parseCli(['serve', tmp, '--config', path.join(tmp, 'conf/bad.json')]))).rejects.toThrow("mount must start with '/', got \"api\"");
});

test("a config file's upload.tmpDir, a path like the others, is taken from the file's folder", async () => {
  const { parseCli } = require('../dist/cjs/cli/args.js');
  const { resolveConfig } = require('../dist/cjs/cli/config.js');
  write('conf/uploads.json', { root: '../apps', upload: { tmpDir: 'uploads-tmp', fileSize: '5mb' } });
  const rel = await resolveConfig(parseCli(['serve', '--config', path.join(tmp, 'conf/uploads.json')]), path.join(tmp, 'apps'));
  expect(rel.router.upload).toEqual({ tmpDir: path.join(tmp, 'conf/uploads-tmp'), fileSize: '5mb' });
  const abs = path.join(tmp, 'abs-uploads');
  write('conf/uploads-abs.json', { root: '../apps', upload: { tmpDir: abs } });
  expect((await resolveConfig(parseCli(['serve', '--config', path.join(tmp, 'conf/uploads-abs.json')]))).router.upload).toEqual({ tmpDir: abs });
});

test("a config file's unknown key is refused naming the option meant, the server's own keys included", async () => {
  const { parseCli } = require('../dist/cjs/cli/args.js');
  const { resolveConfig } = require('../dist/cjs/cli/config.js');
  const refused = async (content, message) => {
    write('conf/keys.json', content);
    await expect(resolveConfig(parseCli(['serve', tmp, '--config', path.join(tmp, 'conf/keys.json')]))).rejects.toThrow(message);
  };
  await refused({ shutdownTimeoutMS: 5000 }, "invalid shutdownTimeoutMS: is not an option (did you mean 'shutdownTimeoutMs'?)");
  await refused({ redisURL: 'redis://r:6379' }, "invalid redisURL: is not an option (did you mean 'redisUrl'?)");
  await refused({ scriptTimeoutMS: 500 }, "invalid scriptTimeoutMS: is not an option (did you mean 'scriptTimeoutMs'?)");
  await refused({ prot: 8080 }, /invalid prot: is not an option; the options are root, previewRoot, port, .*shutdownTimeoutMs, requestTimeoutMs and the createApiRouter options/);
  // (the command makes the registry, a DirectoryRegistry of root: one in the file was dropped without a word)
  await refused({ registry: {} }, 'invalid registry: is not an option of a config file: the apps folder (root) is the registry');
  await refused({ requestTimeoutMs: -1 }, 'requestTimeoutMs must be an integer of ms from 0 to 2147483647, got -1');
  await refused({ requestTimeoutMs: '10m' }, 'requestTimeoutMs must be an integer of ms from 0 to 2147483647, got "10m"');
  write('conf/keys-ok.json', { shutdownTimeoutMs: 5000, redisUrl: 'redis://r:6379', scriptTimeoutMs: 500, quiet: true });
  expect(await resolveConfig(parseCli(['serve', tmp, '--config', path.join(tmp, 'conf/keys-ok.json')]))).toMatchObject({ shutdownTimeoutMs: 5000, requestTimeoutMs: 300000, router: { scriptTimeoutMs: 500 } });
  write('conf/keys-ok.json', { requestTimeoutMs: 0 });
  expect(await resolveConfig(parseCli(['serve', tmp, '--config', path.join(tmp, 'conf/keys-ok.json')]))).toMatchObject({ requestTimeoutMs: 0, router: {} });
});

test('sandboxDir or storageDir inside the apps folder (or holding it) is refused: scripts would rewrite the apps\' own files', async () => {
  const { parseCli } = require('../dist/cjs/cli/args.js');
  const { resolveConfig } = require('../dist/cjs/cli/config.js');
  const apps = path.join(tmp, 'apart-apps');
  const resolve = (flags) => resolveConfig(parseCli(['serve', apps, ...flags]));
  await expect(resolve(['--sandbox-dir', apps])).rejects.toThrow(`sandboxDir (${apps}) and root (${apps}) must be apart, neither inside the other`);
  await expect(resolve(['--storage-dir', path.join(apps, 'shop', 'files')])).rejects.toThrow(`storageDir (${path.join(apps, 'shop', 'files')}) and root (${apps}) must be apart`);
  // (the apps folder inside the sandboxes: an app named 'apart-apps' would write into every app)
  await expect(resolve(['--sandbox-dir', tmp])).rejects.toThrow(`sandboxDir (${tmp}) and root (${apps}) must be apart`);
  await expect(resolve(['--sandbox-dir', path.join(tmp, 'apart-sandbox'), '--storage-dir', path.join(tmp, 'apart-apps-storage')])).resolves.toMatchObject({ root: apps });
});

test('a JSON config file saved with a byte order mark is read (as an app\'s definitions are), not refused as invalid JSON', async () => {
  const { parseCli } = require('../dist/cjs/cli/args.js');
  const { resolveConfig } = require('../dist/cjs/cli/config.js');
  write('conf/bom.json', '\ufeff' + JSON.stringify({ port: 0, scriptTimeoutMs: 700 }));
  expect(await resolveConfig(parseCli(['serve', tmp, '--config', path.join(tmp, 'conf/bom.json')]))).toMatchObject({ port: 0, router: { scriptTimeoutMs: 700 } });
});

test('a JavaScript config file that fails to load: exit 1 with a message naming the file', async () => {
  write('conf/syntax.js', 'module.exports = { port: 0, ');
  const run = cli(['serve', path.join(tmp, 'apps'), '--config', path.join(tmp, 'conf/syntax.js')]);
  expect((await run.exited).code).toBe(1);
  expect(run.out.stderr).toMatch(/^scriptable-api: the config file \S*conf\/syntax\.js could not be loaded \(SyntaxError: Unexpected end of input\)\n$/);
  const { parseCli } = require('../dist/cjs/cli/args.js');
  const { resolveConfig } = require('../dist/cjs/cli/config.js');
  write('conf/throws.js', 'throw new Error("no SECRET in the environment")');
  await expect(resolveConfig(parseCli(['serve', tmp, '--config', path.join(tmp, 'conf/throws.js')]))).rejects.toThrow(
    /the config file \S*conf\/throws\.js could not be loaded \(Error: no SECRET in the environment\)/,
  );
  write('conf/async.js', 'module.exports = async () => { throw new Error("vault unreachable") }');
  await expect(resolveConfig(parseCli(['serve', tmp, '--config', path.join(tmp, 'conf/async.js')]))).rejects.toThrow(
    /the config file \S*conf\/async\.js could not be loaded \(Error: vault unreachable\)/,
  );
});

test('an ES module config file with top-level await is loaded (a project of "type": "module" awaiting its secrets)', async () => {
  write('esm/package.json', { type: 'module' });
  write('esm/serve.config.js', `
const accounts = await Promise.resolve({ getAccountByToken: (token) => (token === 'ok' ? { id: 'u1' } : null) });
export default { accounts, port: 0, quiet: true, workers: 1 };
`);
  write('esm/named.mjs', 'export const port = 0;\nexport const quiet = true;\nexport const workers = 1;\n');
  for (const file of ['esm/serve.config.js', 'esm/named.mjs']) {
    const run = cli(['serve', path.join(tmp, 'apps'), '--config', path.join(tmp, file)]);
    try {
      const url = await run.ready;
      expect((await get(`${url}/demo/hello?name=esm`)).body).toBe('hello esm');
    } finally {
      run.child.kill('SIGTERM');
      await run.exited;
    }
  }
  // a syntax error in an ES module is still named with the file
  write('esm/broken.js', 'export default { port: 0, ');
  const broken = cli(['serve', path.join(tmp, 'apps'), '--config', path.join(tmp, 'esm/broken.js')]);
  expect((await broken.exited).code).toBe(1);
  expect(broken.out.stderr).toMatch(/^scriptable-api: the config file \S*esm\/broken\.js could not be loaded \(SyntaxError: /);
});

test('server keys of a config file of the wrong type are refused, naming the key', async () => {
  const { parseCli } = require('../dist/cjs/cli/args.js');
  const { resolveConfig } = require('../dist/cjs/cli/config.js');
  const cases = [
    [{ index: 'false' }, /index must be true or false, got "false"/],
    [{ quiet: 'no' }, /quiet must be true or false, got "no"/],
    [{ host: {} }, /host must be a string, got \{\}/],
    [{ redisUrl: 6379 }, /redisUrl must be a string, got 6379/],
    [{ previewRoot: 5 }, /previewRoot must be a string, got 5/],
    [{ mount: ['/api'] }, /mount must be a string, got \["\/api"\]/],
  ];
  for (const [i, [content, message]] of cases.entries()) {
    write(`conf/types-${i}.json`, content);
    await expect(resolveConfig(parseCli(['serve', tmp, '--config', path.join(tmp, `conf/types-${i}.json`)]))).rejects.toThrow(message);
  }
  write('conf/types-ok.json', { index: false, quiet: true, host: '0.0.0.0', redisUrl: 'redis://r:6379' });
  expect(await resolveConfig(parseCli(['serve', tmp, '--config', path.join(tmp, 'conf/types-ok.json')]))).toMatchObject({ index: false, quiet: true, host: '0.0.0.0', redisUrl: 'redis://r:6379' });
});

test("a config file's redisUrl beside its own rateLimit.store is refused naming both (the store the url makes replaced the file's store without a word); --redis-url wins over it, as flags do", async () => {
  const { parseCli } = require('../dist/cjs/cli/args.js');
  const { resolveConfig } = require('../dist/cjs/cli/config.js');
  const store = `{ reserve: async () => ({ admitted: true, waitMs: 0 }) }`;
  write('conf/redis-both.js', `module.exports = { redisUrl: 'redis://r:6379', rateLimit: { store: ${store}, maxWaiting: 5 } };`);
  await expect(resolveConfig(parseCli(['serve', tmp, '--config', path.join(tmp, 'conf/redis-both.js')]))).rejects.toThrow(/redisUrl.*rateLimit\.store/);
  write('conf/redis-store.js', `module.exports = { rateLimit: { store: ${store} } };`);
  const flag = await resolveConfig(parseCli(['serve', tmp, '--redis-url', 'redis://r:6379', '--config', path.join(tmp, 'conf/redis-store.js')]));
  expect(flag.redisUrl).toBe('redis://r:6379');
  const fileOnly = await resolveConfig(parseCli(['serve', tmp, '--config', path.join(tmp, 'conf/redis-store.js')]));
  expect(typeof fileOnly.router.rateLimit.store.reserve).toBe('function');
});

test("--storage-dir wins over a config file's storage, as flags do (both went to the router: exit 1, 'give either storage or storageDir')", async () => {
  const { parseCli } = require('../dist/cjs/cli/args.js');
  const { resolveConfig } = require('../dist/cjs/cli/config.js');
  const storage = `{ put: async () => ({ size: 0 }), get: async () => null, stat: async () => null, delete: async () => {} }`;
  write('conf/storage.js', `module.exports = { storage: ${storage} };`);
  const flag = await resolveConfig(parseCli(['serve', path.join(tmp, 'apps'), '--storage-dir', path.join(tmp, 'flag-store'), '--config', path.join(tmp, 'conf/storage.js')]));
  expect(flag.router.storageDir).toBe(path.join(tmp, 'flag-store'));
  expect(flag.router).not.toHaveProperty('storage');
  const { createApiRouter, MemoryRegistry } = require('..');
  const router = createApiRouter({ ...flag.router, registry: new MemoryRegistry(), logger: false, workers: 1, metrics: false });
  await router.close();
  const fileOnly = await resolveConfig(parseCli(['serve', tmp, '--config', path.join(tmp, 'conf/storage.js')]));
  expect(typeof fileOnly.router.storage.put).toBe('function');
  expect(fileOnly.router.storageDir).toBeUndefined();
});

test('--preview-root without a preview option in the config file: exit 1 saying what is missing', async () => {
  write('prev/demo/apis/hello.json', { path: 'hello', call: { script: 'main.js', function: 'hello' }, returnType: 'Text' });
  const run = cli(['serve', path.join(tmp, 'apps'), '--port', '0', '--preview-root', path.join(tmp, 'prev')]);
  expect((await run.exited).code).toBe(1);
  expect(run.out.stderr).toMatch(/^scriptable-api: --preview-root \(previewRoot\) serves nothing without `preview: \{ authorize\(req\) \}` in a --config file/);
  const { parseCli } = require('../dist/cjs/cli/args.js');
  const { resolveConfig } = require('../dist/cjs/cli/config.js');
  write('conf/preview.js', `module.exports = { previewRoot: '../prev', preview: { authorize: (req) => req.get('x-staff') === 'yes' } }`);
  const ok = await resolveConfig(parseCli(['serve', path.join(tmp, 'apps'), '--config', path.join(tmp, 'conf/preview.js')]));
  expect(ok.previewRoot).toBe(path.join(tmp, 'prev'));
  expect(typeof ok.router.preview.authorize).toBe('function');
});

test('a request whose client leaves before the answer is logged without a status (none was sent)', async () => {
  let onArrival;
  const arrived = new Promise((resolve) => (onArrival = resolve));
  const upstream = http.createServer(() => onArrival()); // never answers
  await new Promise((r) => upstream.listen(0, '127.0.0.1', r));
  try {
    const run = cli(['serve', path.join(tmp, 'apps'), '--port', '0', '--config', path.join(tmp, 'config.json')]);
    const url = await run.ready;
    const req = http.get(`${url}/demo/slow?upstream=${encodeURIComponent(`http://127.0.0.1:${upstream.address().port}/`)}`);
    req.on('error', () => undefined);
    await arrived;
    req.destroy();
    await waitFor(run, 'stdout', /GET \/web0\/api\/demo\/slow\S* .*\(client closed\)/);
    const line = run.out.stdout.split('\n').find((l) => l.includes('(client closed)'));
    expect(line).toMatch(/ - \(client closed\) [\d.]+ms [0-9a-f-]{36}$/);
    run.child.kill('SIGKILL');
    await run.exited;
  } finally {
    upstream.closeAllConnections();
    upstream.close();
  }
});

test("a credential in the query string (the spec's ?token=) is not written to the request log: its value is [REDACTED], the other parameters are kept", async () => {
  const run = cli(['serve', path.join(tmp, 'apps'), '--port', '0']);
  const base = await run.ready;
  const query = 'name=cli&token=s3cr3t-1&access_token=s3cr3t-2&api_key=s3cr3t-3&X-Amz-Signature=s3cr3t-4&pass%77ord=s3cr3t-5&page=2';
  const hello = await get(`${base}/demo/hello?${query}`);
  expect(hello.body).toBe('hello cli');
  const id = hello.headers['x-request-id'];
  await waitFor(run, 'stdout', new RegExp(id));
  const line = run.out.stdout.split('\n').find((l) => l.includes(id));
  expect(line).toContain(
    'GET /web0/api/demo/hello?name=cli&token=[REDACTED]&access_token=[REDACTED]&api_key=[REDACTED]&X-Amz-Signature=[REDACTED]&pass%77ord=[REDACTED]&page=2 200 ',
  );
  expect(`${run.out.stdout}${run.out.stderr}`).not.toContain('s3cr3t');
  run.child.kill('SIGTERM');
  expect((await run.exited).code).toBe(0);
});

test('the user name and password of a target sent in absolute form (GET http://user:pass@host/...) are not written to the request log', async () => {
  const run = cli(['serve', path.join(tmp, 'apps'), '--port', '0']);
  const base = new URL(await run.ready);
  const head = await new Promise((resolve, reject) => {
    const socket = net.connect(Number(base.port), base.hostname, () => {
      socket.write(`GET http://admin:hun@ter2@${base.host}${base.pathname}/demo/hello?name=cli&token=s3cr3t-1 HTTP/1.1\r\nHost: ${base.host}\r\nConnection: close\r\n\r\n`);
    });
    let data = '';
    socket.on('data', (c) => (data += c));
    socket.on('end', () => resolve(data));
    socket.on('error', reject);
  });
  expect(head).toMatch(/^HTTP\/1\.1 200 /);
  const id = /x-request-id: (\S+)/i.exec(head)[1];
  await waitFor(run, 'stdout', new RegExp(id));
  const line = run.out.stdout.split('\n').find((l) => l.includes(id));
  expect(line).toContain(`GET http://[REDACTED]@${base.host}${base.pathname}/demo/hello?name=cli&token=[REDACTED] 200 `);
  expect(`${run.out.stdout}${run.out.stderr}`).not.toMatch(/hun@ter2|ter2|s3cr3t/);
  run.child.kill('SIGTERM');
  expect((await run.exited).code).toBe(0);
});

test('a request cannot forge a line of the log: line breaks in logged values are escaped', async () => {
  const run = cli(['serve', path.join(tmp, 'apps'), '--port', '0']);
  const base = await run.ready;
  const forged = '2026-01-01T00:00:00.000Z GET /admin 200 1.0ms forged';
  const res = await get(`${base}/x%0A${encodeURIComponent(forged)}%0A/y`);
  expect(res.status).toBe(404);
  await waitFor(run, 'stdout', /GET \/web0\/api\/x%0A\S+ 404 /); // the request's own line comes after its failure line
  expect(run.out.stdout.split('\n')).not.toContain(forged);
  expect(run.out.stdout).toContain(`No API 'y' in app 'x\\n${forged}\\n'`);
  run.child.kill('SIGTERM');
  expect((await run.exited).code).toBe(0);
});

test("a path outside the mount point and the server's routes (or a `*` target) gets the JSON 404 error body, not Express's HTML page", async () => {
  const net = require('node:net');
  const run = cli(['serve', path.join(tmp, 'apps'), '--port', '0', '--mount', '/api']);
  const base = await run.ready;
  const origin = new URL(base).origin;
  for (const p of ['/other', '/apix/demo/hello', '/metrics/x', '/%zz']) {
    const res = await get(`${origin}${p}`);
    expect([p, res.status, res.headers['content-type']]).toEqual([p, 404, 'application/json;charset=UTF-8']);
    expect(JSON.parse(res.body)).toEqual({ requestId: res.headers['x-request-id'], message: expect.stringContaining('/api'), code: 270100 });
  }
  const star = await new Promise((resolve, reject) => {
    const sock = net.connect(Number(new URL(base).port), '127.0.0.1', () => sock.write('OPTIONS * HTTP/1.1\r\nHost: h\r\nConnection: close\r\n\r\n'));
    let text = '';
    sock.on('data', (d) => (text += d));
    sock.on('end', () => resolve(text));
    sock.on('error', reject);
  });
  expect(star).toMatch(/^HTTP\/1\.1 404 /);
  expect(JSON.parse(star.slice(star.indexOf('\r\n\r\n') + 4))).toMatchObject({ code: 270100 });
  // (the index and the APIs still answer)
  expect((await get(base)).status).toBe(200);
  expect((await get(`${base}/demo/hello`)).body).toBe('hello world');
  run.child.kill('SIGTERM');
  expect((await run.exited).code).toBe(0);
});

test('a mount that is not a plain path (Express would read it as a pattern) is refused, naming --mount / mount', async () => {
  const run = cli(['serve', path.join(tmp, 'apps'), '--port', '0', '--mount', '/api/*']);
  expect((await run.exited).code).toBe(2);
  expect(run.out.stderr).toContain("--mount must be a plain path of letters, digits, '-', '.', '_', '~' and '/' (such as /web0/api), got '/api/*'");
  const { parseCli } = require('../dist/cjs/cli/args.js');
  for (const mount of ['/api/:tenant', '/a(b)', '/a b', '/a?b', '/a{b}']) {
    expect(() => parseCli(['serve', tmp, '--mount', mount])).toThrow(`--mount must be a plain path of letters, digits, '-', '.', '_', '~' and '/' (such as /web0/api), got '${mount}'`);
  }
  const { resolveConfig } = require('../dist/cjs/cli/config.js');
  write('conf/mount.json', { mount: '/api/:tenant' });
  await expect(resolveConfig(parseCli(['serve', tmp, '--config', path.join(tmp, 'conf/mount.json')]))).rejects.toThrow(
    "mount must be a plain path of letters, digits, '-', '.', '_', '~' and '/' (such as /web0/api), got \"/api/:tenant\"",
  );
  for (const ok of ['/', '/web0/api', '/v1.2/my_api~x/', '//api']) {
    expect(parseCli(['serve', tmp, '--mount', ok]).mount).toBe(ok);
  }
});

test('an empty flag value (an unset variable in `--host "$HOST"`) is refused: --host "" would listen on every interface', async () => {
  const run = cli(['serve', path.join(tmp, 'apps'), '--port', '0', '--host', '']);
  expect((await run.exited).code).toBe(2);
  expect(run.out.stderr).toMatch(/^scriptable-api: --host needs a value, got ''/);
  const { parseCli } = require('../dist/cjs/cli/args.js');
  for (const flag of ['--host', '--mount', '--preview-root', '--sandbox-dir', '--storage-dir', '--redis-url', '--config', '--engine']) {
    expect(() => parseCli(['serve', tmp, flag, ''])).toThrow(`${flag} needs a value, got ''`);
  }
  expect(() => parseCli(['serve', ''])).toThrow("serve needs the folder of apps, got ''");
  const { resolveConfig } = require('../dist/cjs/cli/config.js');
  write('conf/host.json', { host: '' });
  await expect(resolveConfig(parseCli(['serve', tmp, '--config', path.join(tmp, 'conf/host.json')]))).rejects.toThrow('host must be an address such as 127.0.0.1 or 0.0.0.0, got ""');
  for (const key of ['root', 'previewRoot', 'sandboxDir', 'storageDir']) {
    write(`conf/empty-${key}.json`, { [key]: '' });
    await expect(resolveConfig(parseCli(['serve', tmp, '--config', path.join(tmp, `conf/empty-${key}.json`)]))).rejects.toThrow(`${key} must be a folder path, got ""`);
  }
  // (an empty redisUrl, as --redis-url '', would leave the rate limits in this process without a word)
  write('conf/empty-redisUrl.json', { redisUrl: '' });
  await expect(resolveConfig(parseCli(['serve', tmp, '--config', path.join(tmp, 'conf/empty-redisUrl.json')]))).rejects.toThrow("redisUrl must be a Redis URL such as 'redis://host:6379', got \"\"");
});

test("behind a reverse proxy, --trust-proxy sets Express's `trust proxy`: scripts see the client's address and each client gets its own {ip} rate-limit bucket", async () => {
  write('apps/proxied/apis/who.json', { path: 'who', call: { script: 'main.js', function: 'who' }, returnType: 'JSON', rateLimit: { requestsPerSecond: 0.001, timeoutMs: 0 } });
  write('apps/proxied/scripts/main.js', `export function who(ctx) { const r = ctx.request;
    return { addr: r.getRemoteAddr(), scheme: r.getScheme(), url: r.getRequestURL() } }`);
  // (the proxy on 127.0.0.1 adds the client's address; one hop is trusted)
  const via = (url, client) =>
    new Promise((resolve, reject) => {
      http.get(`${url}/proxied/who`, { headers: { 'X-Forwarded-For': `198.51.100.7, ${client}`, 'X-Forwarded-Proto': 'https', 'X-Forwarded-Host': 'api.example.com' } }, (res) => {
        let body = '';
        res.on('data', (d) => (body += d));
        res.on('end', () => resolve({ status: res.statusCode, body: JSON.parse(body) }));
      }).on('error', reject);
    });
  const run = cli(['serve', path.join(tmp, 'apps'), '--port', '0', '--quiet', '--trust-proxy', '1', '--config', path.join(tmp, 'config.json')]);
  const url = await run.ready;
  try {
    const a = await via(url, '203.0.113.1');
    expect(a).toEqual({ status: 200, body: { addr: '203.0.113.1', scheme: 'https', url: 'https://api.example.com/web0/api/proxied/who' } });
    // (another client behind the same proxy: not the first one's bucket, nor the proxy's)
    expect((await via(url, '203.0.113.2')).status).toBe(200);
    expect((await via(url, '203.0.113.1')).status).toBe(429);
  } finally {
    run.child.kill('SIGTERM');
    await run.exited;
  }
});

test('--trust-proxy and trustProxy take what Express takes (hops, true/false, addresses, subnets and names; a function in a module); anything else is refused naming them', async () => {
  const { parseCli } = require('../dist/cjs/cli/args.js');
  const { resolveConfig } = require('../dist/cjs/cli/config.js');
  const flag = (value) => parseCli(['serve', tmp, '--trust-proxy', value]).trustProxy;
  expect(flag('2')).toBe(2);
  expect(flag('true')).toBe(true);
  expect(flag('false')).toBe(false);
  expect(flag('loopback, 10.0.0.0/8')).toBe('loopback, 10.0.0.0/8');
  expect(() => flag('proxy.internal')).toThrow(/^--trust-proxy must be a number of hops, true, false or a comma-separated list of addresses, subnets and loopback\/linklocal\/uniquelocal, got 'proxy.internal' \(invalid IP address: proxy.internal\)/);
  expect(() => flag('10.0.0.0/99')).toThrow(/--trust-proxy must be .* got '10.0.0.0\/99'/);
  const fromFile = async (content) => {
    write('conf/trust.json', content);
    return (await resolveConfig(parseCli(['serve', tmp, '--config', path.join(tmp, 'conf/trust.json')]))).trustProxy;
  };
  expect(await fromFile({ trustProxy: ['loopback', '10.0.0.1'] })).toEqual(['loopback', '10.0.0.1']);
  expect(await fromFile({ trustProxy: 1 })).toBe(1);
  expect(await fromFile({})).toBeUndefined();
  await expect(fromFile({ trustProxy: 'nginx' })).rejects.toThrow(/^trustProxy must be a number of hops, true, false or .* got "nginx" \(invalid IP address: nginx\)/);
  await expect(fromFile({ trustProxy: [10] })).rejects.toThrow(/^trustProxy must be .* got \[10\]/);
  await expect(fromFile({ trustProxy: -1 })).rejects.toThrow(/^trustProxy must be .* got -1/);
  await expect(fromFile({ trustProxy: {} })).rejects.toThrow(/^trustProxy must be .* got \{\}/);
  // (the flag wins over the file)
  write('conf/trust-both.json', { trustProxy: 'loopback' });
  expect((await resolveConfig(parseCli(['serve', tmp, '--trust-proxy', '1', '--config', path.join(tmp, 'conf/trust-both.json')]))).trustProxy).toBe(1);
  write('conf/trust-fn.js', 'module.exports = { trustProxy: (ip) => ip === "127.0.0.1" }');
  expect(typeof (await resolveConfig(parseCli(['serve', tmp, '--config', path.join(tmp, 'conf/trust-fn.js')]))).trustProxy).toBe('function');
});

test("with --trust-proxy, the index's URLs name the host and scheme the client asked for, as scripts' getRequestURL() does", async () => {
  const run = cli(['serve', path.join(tmp, 'apps'), '--port', '0', '--quiet', '--trust-proxy', 'loopback', '--config', path.join(tmp, 'config.json')]);
  const url = await run.ready;
  const index = (headers) =>
    new Promise((resolve, reject) => {
      http.get(url, { headers }, (res) => {
        let body = '';
        res.on('data', (d) => (body += d));
        res.on('end', () => resolve(JSON.parse(body).apps.find((a) => a.appId === 'demo').apis.find((a) => a.path === 'hello').url));
      }).on('error', reject);
    });
  try {
    // (a proxy that passes its own Host and names the client's in X-Forwarded-Host)
    expect(await index({ 'X-Forwarded-Proto': 'https', 'X-Forwarded-Host': 'api.example.com' })).toBe('https://api.example.com/web0/api/demo/hello');
    expect(await index({ 'X-Forwarded-Proto': 'https', 'X-Forwarded-Host': 'api.example.com:8443, inner' })).toBe('https://api.example.com:8443/web0/api/demo/hello');
    // (one that keeps the client's Host)
    expect(await index({ Host: 'api.example.com', 'X-Forwarded-Proto': 'https' })).toBe('https://api.example.com/web0/api/demo/hello');
    expect(await index({})).toBe(`${url}/demo/hello`);
  } finally {
    run.child.kill('SIGTERM');
    await run.exited;
  }
});

test('a File download prints no warning: the stream pipeline\'s listeners on the response are not taken for a leak (MaxListenersExceededWarning on stderr)', async () => {
  write('apps-files/docs/apis/get.json', { path: 'get', call: { script: 'main.js', function: 'get' }, returnType: 'File' });
  write('apps-files/docs/scripts/main.js', "export function get(ctx) { return { path: 'report.txt' } }");
  write('files-sandbox/docs/report.txt', 'the report');
  const run = cli(['serve', path.join(tmp, 'apps-files'), '--port', '0', '--sandbox-dir', path.join(tmp, 'files-sandbox')]);
  const url = await run.ready;
  for (let i = 0; i < 2; i++) {
    const res = await get(`${url}/docs/get`);
    expect(res.status).toBe(200);
    expect(res.body).toBe('the report');
  }
  await waitFor(run, 'stdout', /GET \/web0\/api\/docs\/get 200[\s\S]*GET \/web0\/api\/docs\/get 200/);
  run.child.kill('SIGTERM');
  expect(await run.exited).toEqual({ code: 0, signal: null });
  expect(run.out.stderr).not.toMatch(/MaxListenersExceededWarning/);
  expect(run.out.stderr).toBe('');
});

test('the reader of its output going away (`serve … | head`, a log shipper restarting: EPIPE) loses the log lines, not the server: requests go on being answered and SIGTERM still stops it cleanly', async () => {
  const run = cli(['serve', path.join(tmp, 'apps'), '--port', '0']);
  const url = await run.ready;
  run.child.stdout.destroy(); // (the pipe's reading end closes: the next line logged fails with EPIPE)
  for (let i = 0; i < 3; i++) {
    const res = await get(`${url}/demo/hello?name=${i}`);
    expect(res.status).toBe(200);
    expect(res.body).toBe(`hello ${i}`);
  }
  expect(run.child.exitCode).toBe(null);
  run.child.kill('SIGTERM');
  expect(await run.exited).toEqual({ code: 0, signal: null });
  expect(run.out.stderr).toBe('');
});

test('--redis-url without ioredis installed: exit 1 naming --redis-url and the package to install (not rateLimit.store, an option the command line has not given)', async () => {
  // (makes `require('ioredis')` fail as it does when the package is not installed)
  write('hide-ioredis.js', `
    const Module = require('node:module');
    const resolve = Module._resolveFilename;
    Module._resolveFilename = function (request, ...rest) {
      if (request === 'ioredis') throw Object.assign(new Error("Cannot find module 'ioredis'"), { code: 'MODULE_NOT_FOUND' });
      return resolve.call(this, request, ...rest);
    };`);
  const child = spawn(process.execPath, ['--require', path.join(tmp, 'hide-ioredis.js'), BIN, 'serve', path.join(tmp, 'apps'), '--port', '0', '--redis-url', 'redis://127.0.0.1:6379'], { stdio: ['ignore', 'pipe', 'pipe'] });
  children.add(child);
  let stdout = '';
  let stderr = '';
  child.stdout.on('data', (d) => (stdout += d));
  child.stderr.on('data', (d) => (stderr += d));
  const code = await new Promise((resolve) => child.once('close', (c) => resolve(c)));
  expect(code).toBe(1);
  expect(stdout).toBe('');
  expect(stderr).toBe("scriptable-api: invalid --redis-url: RedisRateLimitStore (created from a url) needs the optional package 'ioredis': install it with `npm install ioredis`\n");
});

test('an async logger whose write fails (a log transport down: a rejected promise) loses that line, not the process: the failed call is answered and the server goes on', async () => {
  write('async-logger.js', `
    const line = (m) => void process.stdout.write('app-log ' + m + '\\n');
    const down = async (m) => { line(m); throw new Error('log transport is down'); };
    module.exports = { logger: { debug: line, info: down, warn: down, error: down } };`);
  const run = cli(['serve', path.join(tmp, 'apps'), '--port', '0', '--config', path.join(tmp, 'async-logger.js')]);
  const url = await run.ready;
  const failed = await get(`${url}/demo/broken`);
  expect(failed.status).toBe(500);
  expect(JSON.parse(failed.body)).toMatchObject({ code: 270000 });
  await waitFor(run, 'stdout', /app-log request \S+ demo\/broken failed in call/);
  const unknown = await get(`${url}/demo/nope`);
  expect(unknown.status).toBe(404);
  const hello = await get(`${url}/demo/hello`);
  expect(hello.status).toBe(200);
  expect(run.child.exitCode).toBe(null);
  run.child.kill('SIGTERM');
  expect(await run.exited).toEqual({ code: 0, signal: null });
  expect(run.out.stderr).not.toMatch(/log transport is down/);
});
