'use strict';
// DirectoryRegistry over real folders: files validated one by one (a bad one disables only
// itself, reported with the file and the field), edits live through fs.watch, preview root, close().
const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');
const request = require('supertest');
const { DirectoryRegistry } = require('..');
const { makeApp } = require('./helpers/app');

const roots = [];
const closers = [];
afterAll(async () => {
  for (const c of closers) await c();
  for (const r of roots) fs.rmSync(r, { recursive: true, force: true });
});

function tree(files) {
  const root = fs.mkdtempSync(path.join(os.tmpdir(), 'sapi-dir-'));
  roots.push(root);
  write(root, files);
  return root;
}
function write(root, files) {
  for (const [rel, content] of Object.entries(files)) {
    const file = path.join(root, rel);
    fs.mkdirSync(path.dirname(file), { recursive: true });
    fs.writeFileSync(file, typeof content === 'string' ? content : JSON.stringify(content, null, 2));
  }
}
function logs() {
  const lines = [];
  const logger = { info: (m) => lines.push(['info', m]), warn: (m) => lines.push(['warn', m]), error: (m) => lines.push(['error', m]) };
  return { lines, logger, text: (level) => lines.filter(([l]) => !level || l === level).map(([, m]) => m).join('\n') };
}
function open(options) {
  const registry = new DirectoryRegistry({ debounceMs: 30, ...options });
  closers.push(() => registry.close());
  return registry;
}
/** Waits until `check()` holds: woken by each reload event (and every 250 ms), up to a generous deadline. */
async function eventually(registry, check, ms = 15000) {
  const deadline = Date.now() + ms;
  while (!(await check())) {
    const left = deadline - Date.now();
    if (left <= 0) throw new Error('the change did not go live in time');
    await new Promise((resolve) => {
      const done = () => {
        clearTimeout(timer);
        registry.off('reload', done);
        resolve();
      };
      const timer = setTimeout(done, Math.min(left, 250));
      registry.on('reload', done);
    });
  }
}

const api = (p, extra = {}) => ({ path: p, call: { script: 'main.js', function: 'hello' }, returnType: 'JSON', ...extra });

describe('loading', () => {
  const root = tree({
    'shop/apis/hello.json': api('hello'),
    // (saved with a byte order mark, as some editors save UTF-8)
    'shop/apis/bom.json': '\ufeff' + JSON.stringify(api('bom')),
    'shop/apis/nested.json': api('deep/one', { call: { script: 'lib/util.ts', function: 'one' } }),
    'shop/apis/auto.json': api('auto', { call: { automation: 'double' } }),
    'shop/apis/bad-rate.json': api('bad', { rateLimit: { requestsPerSecond: -1 } }),
    'shop/apis/bad-json.json': '{ "path": "broken", ',
    'shop/apis/unknown-key.json': { ...api('typo'), method: ['GET'] },
    'shop/apis/uses-confirm.json': api('confirm', { call: { automation: 'approve' } }),
    'shop/apis/notes.txt': 'not a definition',
    'shop/scripts/main.js': 'export function hello(ctx) { return { hello: ctx.appId } }',
    'shop/scripts/lib/util.ts': 'export function one(ctx): number { return 1 }',
    'shop/automations/double.json': { id: 'double', steps: [{ type: 'return', value: "int(ctx.query.n) * 2" }] },
    'shop/automations/approve.json': { id: 'approve', steps: [{ id: 'ask', type: 'confirm' }] },
    'other/apis/hello.json': api('hello'),
    'other/scripts/main.js': 'export function hello(ctx) { return "other" }',
  });
  const log = logs();
  const registry = open({ root, logger: log.logger, watch: false });
  const { app, router } = makeApp({ registry });
  afterAll(() => router.close());

  test('apps, APIs, scripts (named by their path below scripts/) and automations are served', async () => {
    expect(registry.listApps()).toEqual(['other', 'shop']);
    expect((await request(app).get('/web0/api/shop/hello')).body).toEqual({ hello: 'shop' });
    expect((await request(app).get('/web0/api/shop/bom')).body).toEqual({ hello: 'shop' });
    expect((await request(app).get('/web0/api/shop/deep/one')).body).toBe(1);
    expect((await request(app).get('/web0/api/shop/auto?n=21')).body).toBe(42);
    expect((await request(app).get('/web0/api/other/hello')).body).toBe('other');
    expect(registry.getScript('shop', 'lib/util.ts')).toMatch(/export function one/);
  });

  test('a bad file disables only itself, reported with the file name and the field', async () => {
    const errors = log.text('error');
    expect(errors).toContain("scriptable-api: shop/apis/bad-rate.json: invalid api 'bad'.rateLimit.requestsPerSecond: must be a number >= 0 (0 = no limit), got -1; the API is disabled until the file is fixed");
    expect(errors).toMatch(/shop\/apis\/bad-json\.json: is not valid JSON/);
    expect(errors).toContain("shop/apis/unknown-key.json: invalid api 'typo'.method: is not a field (did you mean 'methods'?)");
    expect(errors).toContain("shop/automations/approve.json: invalid automation 'approve' step 'ask': 'confirm' is an interactive step");
    expect(log.text('warn')).toContain("shop/apis/uses-confirm.json: refers to the automation 'approve', which is not in shop/automations/ (or is disabled)");
    for (const p of ['bad', 'broken', 'typo']) expect((await request(app).get(`/web0/api/shop/${p}`)).status).toBe(404);
    expect((await request(app).get('/web0/api/shop/confirm')).body).toMatchObject({ code: 270603 });
    expect((await request(app).get('/web0/api/shop/hello')).status).toBe(200);
    expect(registry.problems().filter((p) => p.level === 'error').map((p) => p.file).sort()).toEqual([
      'shop/apis/bad-json.json',
      'shop/apis/bad-rate.json',
      'shop/apis/unknown-key.json',
      'shop/automations/approve.json',
    ]);
  });

  test('definitions are frozen: what was validated is what runs', () => {
    expect(Object.isFrozen(registry.getApi('shop', 'hello').call)).toBe(true);
  });
});

test('an automation file holding JSON that is not an object is reported as such, not with a JavaScript internal', () => {
  const root = tree({ 'shop/automations/a.json': 'null', 'shop/automations/b.json': '"steps"', 'shop/automations/c.json': '42' });
  const registry = open({ root, logger: false, watch: false });
  // (before: 'Invalid value used as weak map key')
  expect(registry.problems().map((p) => `${p.file}: ${p.message}`)).toEqual(
    ['a', 'b', 'c'].map((f) => `shop/automations/${f}.json: invalid automation: must be an object { id, steps }; the automation is disabled until the file is fixed`),
  );
});

test('a file saved as UTF-16 is refused naming its encoding; one with bytes that are not UTF-8 (Latin-1) is read with a warning saying so', () => {
  const utf16 = (text) => Buffer.concat([Buffer.from([0xff, 0xfe]), Buffer.from(text, 'utf16le')]);
  const root = tree({});
  for (const [rel, bytes] of Object.entries({
    'shop/apis/u16.json': utf16(JSON.stringify(api('u16'))),
    'shop/scripts/main.js': 'export function hello() { return 1 }',
    'shop/scripts/u16.js': utf16('export function hello() { return 1 }'),
    'shop/scripts/latin1.js': Buffer.from('export function hello() { return "café" }', 'latin1'),
  })) {
    fs.mkdirSync(path.dirname(path.join(root, rel)), { recursive: true });
    fs.writeFileSync(path.join(root, rel), bytes);
  }
  const registry = open({ root, logger: false, watch: false });
  // (before: a JSON error full of NULs for the definition; nothing at all for the scripts, the
  // UTF-16 one failing each call with 'unexpected character', the Latin-1 one answering 'caf\ufffd')
  expect(registry.problems().map((p) => `${p.level} ${p.file}: ${p.message}`).sort()).toEqual([
    'error shop/apis/u16.json: is UTF-16 text (little-endian, by its byte order mark): save it as UTF-8; the API is disabled until the file is fixed',
    'error shop/scripts/u16.js: could not be read: is UTF-16 text (little-endian, by its byte order mark): save it as UTF-8',
    "warning shop/scripts/latin1.js: is not UTF-8 text: it is read with U+FFFD ('\ufffd') in place of each byte that is not (save it as UTF-8)",
  ]);
  expect(registry.getScript('shop', 'latin1.js')).toContain('caf\ufffd');
  expect(registry.getScript('shop', 'main.js')).toContain('hello');
});

test('a file over 5 MiB is not read: it is reported, and an API naming it loads with a warning (README)', () => {
  const root = tree({
    'big/apis/x.json': { path: 'x', call: { script: 'big.js', function: 'f' }, returnType: 'JSON' },
    'big/scripts/big.js': 'export function f() { return 1; }\n' + ' '.repeat(5 * 1024 * 1024),
    'big/scripts/small.js': 'export function f() { return 1; }\n',
  });
  const registry = open({ root, logger: false, watch: false });
  expect(registry.getScript('big', 'big.js')).toBeUndefined();
  expect(registry.getScript('big', 'small.js')).toMatch(/export function f/);
  expect(registry.problems()).toEqual([
    { level: 'error', file: 'big/scripts/big.js', message: 'could not be read: is larger than 5242880 bytes' },
    { level: 'warning', file: 'big/apis/x.json', message: "refers to the script 'big.js', which is not in big/scripts/" },
  ]);
});

describe('watching', () => {
  const root = tree({
    'shop/apis/hello.json': api('hello'),
    'shop/scripts/main.js': 'export function hello() { return "v1" }',
  });
  const log = logs();
  const registry = open({ root, logger: log.logger });
  const { app, router } = makeApp({ registry });
  afterAll(() => router.close());
  const get = async (p) => request(app).get(`/web0/api/${p}`);

  test('an edited script is live on a later request', async () => {
    expect((await get('shop/hello')).body).toBe('v1');
    fs.writeFileSync(path.join(root, 'shop/scripts/main.js'), 'export function hello() { return "v2" }');
    await eventually(registry, async () => (await get('shop/hello')).body === 'v2');
    expect(log.text('info')).toMatch(/reloaded app 'shop': 1 APIs, 1 scripts, 0 automations/);
  });

  test('an editor-style save (temp file, rename) and a new API with its script go live together', async () => {
    write(root, { 'shop/scripts/.tmp-extra.js': 'export function hello() { return "extra" }' });
    fs.renameSync(path.join(root, 'shop/scripts/.tmp-extra.js'), path.join(root, 'shop/scripts/extra.js'));
    write(root, { 'shop/apis/extra.json': api('extra', { call: { script: 'extra.js', function: 'hello' } }) });
    await eventually(registry, async () => (await get('shop/extra')).status === 200);
    expect((await get('shop/extra')).body).toBe('extra');
  });

  test('breaking a file disables it; fixing it brings it back; the app’s other APIs keep working', async () => {
    fs.writeFileSync(path.join(root, 'shop/apis/extra.json'), JSON.stringify(api('extra', { returnType: 'XML' })));
    await eventually(registry, async () => (await get('shop/extra')).status === 404);
    expect(log.text('error')).toMatch(/shop\/apis\/extra\.json: invalid api 'extra'\.returnType: must be one of JSON, Text, File, Redirect; got "XML"/);
    expect((await get('shop/hello')).body).toBe('v2');
    fs.writeFileSync(path.join(root, 'shop/apis/extra.json'), JSON.stringify(api('extra')));
    await eventually(registry, async () => (await get('shop/extra')).status === 200);
  });

  test('a new app folder is picked up; a removed one is gone', async () => {
    write(root, { 'news/scripts/main.js': 'export function hello() { return "news" }', 'news/apis/hello.json': api('hello') });
    await eventually(registry, async () => (await get('news/hello')).body === 'news');
    fs.rmSync(path.join(root, 'news'), { recursive: true });
    await eventually(registry, async () => (await get('news/hello')).status === 404);
    expect(registry.listApps()).toEqual(['shop']);
  });

  test('close() stops watching (a second registry on the same folder sees the edit; the closed one does not)', async () => {
    const closed = open({ root, logger: false });
    const witness = open({ root, logger: false });
    await closed.close();
    let reloadsOfClosed = 0;
    closed.on('reload', () => reloadsOfClosed++);
    fs.writeFileSync(path.join(root, 'shop/scripts/main.js'), 'export function hello() { return "v3" }');
    await eventually(witness, () => witness.getScript('shop', 'main.js').includes('v3'));
    expect(reloadsOfClosed).toBe(0);
    expect(closed.getScript('shop', 'main.js')).toContain('v2');
  });
});

test('a logger that throws or rejects (a transport that is down) loses its lines: the registry still reloads, and the process lives', async () => {
  const root = tree({
    'shop/apis/hello.json': api('hello'),
    'shop/scripts/main.js': 'export function hello() { return "v1" }',
  });
  let calls = 0;
  const down = (mode) => () => {
    calls++;
    if (mode === 'throw') throw new Error('log transport down');
    return Promise.reject(new Error('log transport down'));
  };
  const registry = open({ root, logger: { info: down('throw'), warn: down('reject'), error: down('reject') } });
  // a reload logs at info (throws); a file that refers to a script that is not there, a warning (rejects)
  fs.writeFileSync(path.join(root, 'shop/scripts/main.js'), 'export function hello() { return "v2" }');
  await eventually(registry, () => registry.getScript('shop', 'main.js').includes('v2'));
  write(root, { 'shop/apis/other.json': api('other', { call: { script: 'missing.js', function: 'f' } }) });
  await eventually(registry, () => registry.getApi('shop', 'other') !== undefined);
  await eventually(registry, () => calls >= 3);
  // (a rejection nobody handled would have ended the process by the next turn)
  await new Promise((r) => setImmediate(r));
  expect(registry.problems()).toEqual([expect.objectContaining({ level: 'warning', file: 'shop/apis/other.json' })]);
});

describe('a change while the registry reads (another process writing: a deploy, an editor)', () => {
  /** Calls `then()` right after the registry reads `file` (once): a write landing between the read and the watch. */
  function afterReading(file, then) {
    const real = fs.readFileSync;
    let done = false;
    return jest.spyOn(fs, 'readFileSync').mockImplementation(function (p, ...rest) {
      const out = real.call(fs, p, ...rest);
      if (!done && String(p) === file) {
        done = true;
        then();
      }
      return out;
    });
  }

  test('an edit landing just after its app was read at startup is picked up, not served stale for good', async () => {
    const root = tree({ 'shop/apis/hello.json': api('hello'), 'shop/scripts/main.js': 'export function hello() { return "v1" }' });
    const file = path.join(root, 'shop/scripts/main.js');
    const spy = afterReading(file, () => fs.writeFileSync(file, 'export function hello() { return "v2" }'));
    let registry;
    try {
      registry = open({ root, logger: false });
    } finally {
      spy.mockRestore();
    }
    // (before, the app was read, then watched: the edit in between was seen by neither)
    await eventually(registry, () => registry.getScript('shop', 'main.js').includes('v2'));
  });

  test("a file landing in a new app's folder just after it was read is picked up", async () => {
    const root = tree({ 'shop/apis/hello.json': api('hello') });
    const registry = open({ root, logger: false });
    const first = path.join(root, 'late/apis/a.json');
    const spy = afterReading(first, () => write(root, { 'late/apis/b.json': api('b') }));
    try {
      write(root, { 'late/apis/a.json': api('a') });
      await eventually(registry, () => registry.listApis('late').length > 0);
    } finally {
      spy.mockRestore();
    }
    await eventually(registry, () => registry.listApis('late').length === 2);
    expect(registry.listApis('late').map((d) => d.path).sort()).toEqual(['a', 'b']);
  });
});

describe('a process out of file descriptors for a moment (EMFILE: a busy server at its ulimit -n)', () => {
  const emfile = (p) => Object.assign(new Error(`EMFILE: too many open files, scandir '${p}'`), { code: 'EMFILE' });
  /** `fs[name]` fails with EMFILE for paths `match` takes, while `fn` runs. */
  function outOfDescriptors(name, match, fn) {
    const real = fs[name];
    const spy = jest.spyOn(fs, name).mockImplementation(function (p, ...rest) {
      if (match(String(p))) throw emfile(p);
      return real.call(fs, p, ...rest);
    });
    try {
      return fn();
    } finally {
      spy.mockRestore();
    }
  }

  test("an app read again then keeps its APIs and scripts (not taken for an app with none), says so, and is read again soon", async () => {
    const root = tree({ 'shop/apis/hello.json': api('hello'), 'shop/apis/list.json': api('list'), 'shop/scripts/main.js': 'export function hello() { return 1 }' });
    const log = logs();
    const registry = open({ root, logger: log.logger, watch: false });
    const reloads = [];
    registry.on('reload', (r) => reloads.push(r));
    outOfDescriptors('readdirSync', (p) => p.startsWith(path.join(root, 'shop')), () => registry.reload('shop'));
    // (before, the folders that could not be listed counted as empty: 'reloaded app shop: 0 APIs, 0 scripts')
    expect(registry.listApis('shop').map((d) => d.path).sort()).toEqual(['hello', 'list']);
    expect(registry.getScript('shop', 'main.js')).toContain('hello');
    expect(log.text('error')).toMatch(/app 'shop' cannot be read now \(EMFILE: too many open files.*\): it is served as it was; read again in 1 s/);
    outOfDescriptors('readFileSync', (p) => p.startsWith(path.join(root, 'shop')), () => registry.reload('shop'));
    expect(registry.getScript('shop', 'main.js')).toContain('hello');
    expect(registry.problems()).toEqual([]);
    expect(reloads).toEqual([]);
    // read again once it can be, without a change on disk to trigger it
    await eventually(registry, () => reloads.length > 0);
    expect(reloads[0]).toMatchObject({ appId: 'shop', present: true, problems: [] });
  });

  test('the apps folder listed then keeps every app', () => {
    const root = tree({ 'shop/apis/hello.json': api('hello'), 'news/apis/hello.json': api('hello') });
    const log = logs();
    const registry = open({ root, logger: log.logger, watch: false });
    outOfDescriptors('readdirSync', (p) => p === root, () => registry.reload());
    expect(registry.listApps()).toEqual(['news', 'shop']);
    expect(log.text('error')).toMatch(/the apps folder .* cannot be read now \(EMFILE.*\): its apps are served as they were/);
  });
});

describe('preview root', () => {
  const root = tree({ 'shop/apis/hello.json': api('hello'), 'shop/scripts/main.js': 'export function hello() { return "published" }' });
  const previewRoot = tree({ 'shop/apis/hello.json': api('hello'), 'shop/scripts/main.js': 'export function hello() { return "preview" }', 'shop/apis/new.json': api('new') });

  test("stage 'preview' reads previewRoot; without one, the preview stage has nothing", () => {
    const both = open({ root, previewRoot, logger: false, watch: false });
    expect(both.getScript('shop', 'main.js')).toContain('published');
    expect(both.getScript('shop', 'main.js', 'published')).toContain('published');
    expect(both.getScript('shop', 'main.js', 'preview')).toContain('preview');
    expect(both.getApi('shop', 'new')).toBeUndefined();
    expect(both.getApi('shop', 'new', 'preview')).toMatchObject({ path: 'new' });
    const only = open({ root, logger: false, watch: false });
    expect(only.getApi('shop', 'hello', 'preview')).toBeUndefined();
    expect(only.listApps('preview')).toEqual([]);
  });
});

test('options are checked', () => {
  expect(() => new DirectoryRegistry({})).toThrow(/invalid root/);
  expect(() => new DirectoryRegistry({ root: '/x', debounceMs: -1 })).toThrow(/invalid debounceMs/);
  expect(() => new DirectoryRegistry({ root: '/x', debounceMs: 2 ** 31 })).toThrow(/invalid debounceMs: must be a number of ms from 0 to/);
  // (null is a value, checked as others are: it is not left out)
  expect(() => new DirectoryRegistry({ root: '/x', debounceMs: null })).toThrow(/invalid debounceMs: must be a number of ms from 0 to .*, got null/);
});

test('an unknown option, a watch that is not a boolean and a logger without its methods are refused, naming them', () => {
  expect(() => new DirectoryRegistry({ root: '/x', previewroot: '/y' })).toThrow("invalid previewroot: is not an option (did you mean 'previewRoot'?)");
  expect(() => new DirectoryRegistry({ root: '/x', previewDir: '/y' })).toThrow("invalid previewDir: is not an option (did you mean 'previewRoot'?)");
  expect(() => new DirectoryRegistry({ root: '/x', recursive: true })).toThrow('invalid recursive: is not an option; the options are root, previewRoot, logger, debounceMs, watch');
  expect(() => new DirectoryRegistry({ root: '/x', debounce: 50 })).toThrow("invalid debounce: is not an option (did you mean 'debounceMs'?)");
  expect(() => new DirectoryRegistry({ root: '/x', watch: 'no' })).toThrow('invalid watch: must be true or false, got "no"');
  expect(() => new DirectoryRegistry({ root: '/x', logger: {} })).toThrow('invalid logger: must have info, warn and error methods (or be false)');
  const ok = new DirectoryRegistry({ root: '/nonexistent-sapi', previewRoot: '/nonexistent-sapi-2', watch: false, debounceMs: 0, logger: false });
  return ok.close();
});

describe('watching an app folder made again', () => {
  const root = tree({ 'shop/apis/hello.json': api('hello'), 'shop/scripts/main.js': 'export function hello() { return "v1" }' });
  const registry = open({ root, logger: logs().logger });
  const { app, router } = makeApp({ registry });
  afterAll(() => router.close());
  const get = async (p) => request(app).get(`/web0/api/${p}`);

  test('an app folder deleted and made again (as a deploy does) is watched again', async () => {
    fs.rmSync(path.join(root, 'shop'), { recursive: true, force: true });
    write(root, { 'shop/apis/hello.json': api('hello'), 'shop/scripts/main.js': 'export function hello() { return "redeployed" }' });
    await eventually(registry, async () => (await get('shop/hello')).body === 'redeployed');
    // a change after that reaches the registry too (the new folders, maybe on the inodes of the old ones, are watched)
    fs.writeFileSync(path.join(root, 'shop/scripts/main.js'), 'export function hello() { return "edited after" }');
    await eventually(registry, async () => (await get('shop/hello')).body === 'edited after');
  });
});

describe('the apps folder replaced', () => {
  const root = tree({ 'shop/apis/hello.json': api('hello'), 'shop/scripts/main.js': 'export function hello() { return "v1" }' });
  roots.push(`${root}.old`);
  const registry = open({ root, logger: false });
  const script = () => registry.getScript('shop', 'main.js') ?? '';

  test('the apps folder removed and made again, or renamed away with another moved in (as deploys do), is read and watched again', async () => {
    fs.rmSync(root, { recursive: true });
    write(root, { 'shop/apis/hello.json': api('hello'), 'shop/scripts/main.js': 'export function hello() { return "v2" }' });
    await eventually(registry, () => script().includes('v2'));
    fs.renameSync(root, `${root}.old`);
    write(root, { 'shop/apis/hello.json': api('hello'), 'shop/scripts/main.js': 'export function hello() { return "v3" }' });
    await eventually(registry, () => script().includes('v3'));
    // the new folder is the one watched: an edit in it is live, one in the folder moved away is not
    fs.writeFileSync(path.join(root, 'shop/scripts/main.js'), 'export function hello() { return "v4" }');
    await eventually(registry, () => script().includes('v4'));
    expect(registry.listApps()).toEqual(['shop']);
  });
});

test('an apps folder that cannot be looked into any more (a link to it now leads to a file) is read as holding no apps, without a throw', () => {
  // (the watcher reads it again from a timer: a throw there ended the process)
  const base = tree({ 'rel/shop/apis/hello.json': api('hello'), 'rel/shop/scripts/main.js': 'export function hello() { return 1 }' });
  const root = path.join(base, 'apps');
  fs.symlinkSync(path.join(base, 'rel'), root);
  const registry = open({ root, logger: false, watch: false });
  expect(registry.listApps()).toEqual(['shop']);
  fs.rmSync(path.join(base, 'rel'), { recursive: true });
  fs.writeFileSync(path.join(base, 'rel'), 'a file');
  expect(() => registry.reload('shop')).not.toThrow();
  expect(() => registry.reload()).not.toThrow();
  expect(registry.listApps()).toEqual([]);
});

/** Writes release folder `name` under `base`: `apps` apps, each with API hello and a main.js answering `version`. */
function writeRelease(base, name, version, apps) {
  const files = {};
  for (let i = 0; i < apps; i++) {
    files[`${name}/app${i}/apis/hello.json`] = api('hello');
    files[`${name}/app${i}/scripts/main.js`] = `export function hello() { return "${version}" }`;
  }
  write(base, files);
}

test('a release swapped in under the apps folder (a link moved) is read a slice of apps at a time, the event loop turning between slices', async () => {
  // (thousands of apps read in one go blocked every request for seconds)
  const base = tree({});
  writeRelease(base, 'r1', 'v1', 300);
  writeRelease(base, 'r2', 'v2', 300);
  const live = path.join(base, 'live');
  fs.symlinkSync(path.join(base, 'r1'), live);
  const registry = open({ root: live, logger: false });
  expect(registry.getScript('app299', 'main.js')).toContain('v1');
  let turns = 0;
  let ticking = true;
  const tick = () => {
    turns++;
    if (ticking) setImmediate(tick);
  };
  setImmediate(tick);
  const seen = new Set();
  const onReload = () => seen.add(turns);
  registry.on('reload', onReload);
  try {
    fs.symlinkSync(path.join(base, 'r2'), `${live}.next`);
    fs.renameSync(`${live}.next`, live);
    await eventually(registry, () => registry.listApps().every((id) => registry.getScript(id, 'main.js').includes('v2')));
  } finally {
    ticking = false;
    registry.off('reload', onReload);
  }
  expect(seen.size).toBeGreaterThanOrEqual(3);
  // the new release is the one watched
  fs.writeFileSync(path.join(base, 'r2/app150/scripts/main.js'), 'export function hello() { return "v3" }');
  await eventually(registry, () => registry.getScript('app150', 'main.js').includes('v3'));
});

test("close() or reload() from a 'reload' listener in the middle of a release being read stops that pass: nothing read or reported after close()", async () => {
  const base = tree({});
  for (const v of ['1', '2', '3']) writeRelease(base, `r${v}`, `v${v}`, 200);
  const live = path.join(base, 'live');
  fs.symlinkSync(path.join(base, 'r1'), live);
  const swap = (to) => {
    fs.symlinkSync(path.join(base, to), `${live}.next`);
    fs.renameSync(`${live}.next`, live);
  };
  const turns = (n) => new Promise((resolve) => {
    const step = () => (n-- > 0 ? setImmediate(step) : resolve());
    step();
  });

  // reload() (every app, at once) from a listener: the pass under way is not carried on besides
  const a = open({ root: live, logger: false });
  const loads = new Map();
  let reloadedAll = false;
  a.on('reload', (r) => {
    loads.set(r.appId, (loads.get(r.appId) ?? 0) + 1);
    if (!reloadedAll) {
      reloadedAll = true;
      a.reload();
    }
  });
  swap('r2');
  await eventually(a, () => reloadedAll);
  await turns(50);
  await a.close();
  expect(a.listApps().every((id) => a.getScript(id, 'main.js').includes('v2'))).toBe(true);
  // (each app read once by reload(); the one the pass had read before it, twice)
  expect([...loads.values()].reduce((x, y) => x + y, 0)).toBe(201);

  // close() from a listener: no app read, no event after it, nothing left scheduled
  const b = open({ root: live, logger: false });
  let closed = false;
  let after = 0;
  b.on('reload', () => {
    if (closed) return after++;
    closed = true;
    b.close();
  });
  swap('r3');
  await eventually(b, () => closed);
  await turns(50);
  expect(after).toBe(0);
  // (seen from inside: the pass's timers are unref'd, so process.getActiveResourcesInfo() does not list them)
  expect(b.published.pass).toBeUndefined();
  expect(b.published.watch.watchers.size).toBe(0);
});

describe('links out of an app', () => {
  test('a linked file in apis/, scripts/ or automations/ is not read, and is reported as a problem naming it', () => {
    const root = tree({
      'shared/orders.json': api('orders'),
      'shared/util.js': 'export function hello() { return "shared" }',
      'shared/auto.json': { id: 'a', steps: [] },
      'shop/apis/hello.json': api('hello'),
      'shop/scripts/main.js': 'export function hello() { return "hi" }',
    });
    fs.symlinkSync(path.join(root, 'shared', 'orders.json'), path.join(root, 'shop', 'apis', 'orders.json'));
    fs.symlinkSync(path.join(root, 'shared', 'util.js'), path.join(root, 'shop', 'scripts', 'util.js'));
    fs.mkdirSync(path.join(root, 'shop', 'automations'));
    fs.symlinkSync(path.join(root, 'shared', 'auto.json'), path.join(root, 'shop', 'automations', 'auto.json'));
    const log = logs();
    const registry = open({ root, logger: log.logger, watch: false });
    expect(registry.listApis('shop').map((d) => d.path)).toEqual(['hello']);
    expect(registry.getScript('shop', 'util.js')).toBeUndefined();
    expect(registry.getAutomation('shop', 'a')).toBeUndefined();
    const problems = registry.problems().map((p) => `${p.level} ${p.file}: ${p.message}`);
    for (const file of ['shop/apis/orders.json', 'shop/scripts/util.js', 'shop/automations/auto.json']) {
      expect(problems).toContain(`warning ${file}: is a link: not read (an app reads only its own files)`);
    }
    expect(log.text('warn')).toContain('shop/apis/orders.json: is a link: not read');
  });

  test("a linked scripts/ folder or app folder is not read: no app serves another's files, at startup or after a change", async () => {
    const root = tree({
      'secret/apis/hello.json': api('hello'),
      'secret/scripts/main.js': 'export function hello() { return "secret" }',
      'evil/apis/hello.json': api('hello'),
    });
    fs.symlinkSync(path.join(root, 'secret', 'scripts'), path.join(root, 'evil', 'scripts'));
    fs.symlinkSync(path.join(root, 'secret'), path.join(root, 'alias'));
    const log = logs();
    const registry = open({ root, logger: log.logger });
    expect(registry.getScript('evil', 'main.js')).toBeUndefined();
    expect(registry.listApps()).toEqual(['evil', 'secret']);
    expect(log.text('warn')).toContain('evil/scripts: is not a folder of the app (a link?): not read');
    // (the linked app folder is said to be left out, as the README has it; before, not a word)
    expect(log.text('warn')).toContain('alias: is a link: not read (an app reads only its own files)');
    // a link made while watching, and a plain file: not apps either
    fs.symlinkSync(path.join(root, 'secret'), path.join(root, 'alias2'));
    fs.writeFileSync(path.join(root, 'notes.txt'), 'x');
    await eventually(registry, () => log.text('warn').includes('alias2: is a link: not read'));
    registry.reload();
    write(root, { 'other/apis/hello.json': api('hello') }); // (a real change, to wait for)
    await eventually(registry, () => registry.listApps().includes('other'));
    expect(registry.listApps()).toEqual(['evil', 'other', 'secret']);
  });

  test('a linked folder below scripts/ is not read, and is reported as a problem naming it', () => {
    const root = tree({ 'shared/lib/util.js': 'export function hello() { return "shared" }', 'shop/scripts/main.js': 'export function hello() { return "hi" }' });
    fs.symlinkSync(path.join(root, 'shared', 'lib'), path.join(root, 'shop', 'scripts', 'lib'));
    const registry = open({ root, logger: false, watch: false });
    expect(registry.getScript('shop', 'lib/util.js')).toBeUndefined();
    expect(registry.problems()).toEqual([{ level: 'warning', file: 'shop/scripts/lib', message: 'is a link: not read (an app reads only its own files)' }]);
  });

  test('a linked scripts/ or apis/ folder is not watched either: the tree it points to is not walked', () => {
    // (a scripts/ linked to / was walked 16 folders deep: one watcher per folder, seconds per reload)
    const outside = tree({ 'a/b/c/d/x.js': 'export const x = 1', 'e/f/y.js': 'export const y = 1', 'g/h.json': '{}' });
    const root = tree({ 'linked/apis/hello.json': api('hello') });
    fs.mkdirSync(path.join(root, 'other'));
    fs.symlinkSync(outside, path.join(root, 'linked', 'scripts'));
    fs.symlinkSync(path.join(outside, 'g'), path.join(root, 'other', 'apis'));
    const watched = [];
    const real = fs.watch;
    const spy = jest.spyOn(fs, 'watch').mockImplementation((dir, ...rest) => {
      watched.push(String(dir));
      return real.call(fs, dir, ...rest);
    });
    try {
      open({ root, logger: false });
    } finally {
      spy.mockRestore();
    }
    expect(watched.sort()).toEqual([root, path.join(root, 'linked'), path.join(root, 'linked', 'apis'), path.join(root, 'other')].sort());
  });
});

describe('many apps', () => {
  const files = {};
  for (let i = 0; i < 300; i++) {
    files[`app${i}/apis/hello.json`] = api('hello');
    files[`app${i}/scripts/main.js`] = `export function hello() { return "app${i}" }`;
  }
  const root = tree(files);
  const registry = open({ root, logger: false });

  test("reloading one app reads and watches only that app's folders, not every app's (a stall per change with thousands)", async () => {
    // the file system calls one reload makes: a few for its own folders, whatever the number of apps
    const calls = { n: 0 };
    const spies = ['statSync', 'lstatSync', 'readdirSync', 'existsSync', 'watch'].map((m) => {
      const real = fs[m];
      return jest.spyOn(fs, m).mockImplementation((...args) => {
        calls.n++;
        return real.apply(fs, args);
      });
    });
    try {
      registry.reload('app7');
    } finally {
      for (const s of spies) s.mockRestore();
    }
    expect(calls.n).toBeLessThan(60);
    // and the watching still works: for that app, a new folder of it, and the others
    write(root, { 'app7/scripts/lib/util.js': 'export const x = 1' });
    await eventually(registry, () => registry.getScript('app7', 'lib/util.js') !== undefined);
    fs.writeFileSync(path.join(root, 'app7/scripts/lib/util.js'), 'export const x = 2');
    await eventually(registry, () => registry.getScript('app7', 'lib/util.js').includes('2'));
    fs.writeFileSync(path.join(root, 'app250/scripts/main.js'), 'export function hello() { return "edited" }');
    await eventually(registry, () => registry.getScript('app250', 'main.js').includes('edited'));
  });

  test("reloading one app goes through that app's watchers only, not every app's (a deploy reloading each of thousands of apps was quadratic)", () => {
    // (the registry's watchers, seen from inside: how many a reload of one app goes through)
    const watchers = registry.published.watch.watchers;
    expect(watchers.size).toBeGreaterThan(900);
    let visited = 0;
    watchers[Symbol.iterator] = function* () {
      for (const entry of Map.prototype.entries.call(this)) {
        visited++;
        yield entry;
      }
    };
    try {
      registry.reload('app42');
      registry.reload('app43');
    } finally {
      delete watchers[Symbol.iterator];
    }
    expect(visited).toBeLessThan(20);
    expect(registry.getScript('app42', 'main.js')).toContain('app42');
  });

  test('a file in the root that cannot be an app (.DS_Store, a dot file) reloads no app', async () => {
    const reloaded = [];
    const onReload = (r) => reloaded.push(r.appId);
    registry.on('reload', onReload);
    try {
      fs.writeFileSync(path.join(root, '.DS_Store'), 'x');
      // (an edit after it, as the witness: its reload comes after any the dot file would cause)
      fs.writeFileSync(path.join(root, 'app3/scripts/main.js'), 'export function hello() { return "witness" }');
      await eventually(registry, () => registry.getScript('app3', 'main.js').includes('witness'));
    } finally {
      registry.off('reload', onReload);
    }
    expect(new Set(reloaded)).toEqual(new Set(['app3']));
  });
});

test("a file in the root that is no app folder (deploy.lock, README.md) reports no app 'removed'; an app removed is reported once", async () => {
  const root = tree({ 'shop/apis/hello.json': api('hello'), 'shop/scripts/main.js': 'export function hello() { return "v1" }', 'old/apis/hello.json': api('hello') });
  const log = logs();
  const registry = open({ root, logger: log.logger });
  const reloaded = [];
  registry.on('reload', (r) => reloaded.push(`${r.appId}:${r.present}`));
  fs.writeFileSync(path.join(root, 'deploy.lock'), 'x');
  fs.writeFileSync(path.join(root, 'README.md'), 'x');
  // (an edit after them, as the witness: its reload comes after any the files would cause)
  fs.writeFileSync(path.join(root, 'shop/scripts/main.js'), 'export function hello() { return "witness" }');
  await eventually(registry, () => registry.getScript('shop', 'main.js').includes('witness'));
  expect(reloaded).toEqual(['shop:true']);
  expect(log.text()).not.toMatch(/removed/);
  // an app removed: one event, one line, however often it is read again (a watcher, reload(), a pass)
  fs.rmSync(path.join(root, 'old'), { recursive: true });
  await eventually(registry, () => !registry.listApps().includes('old'));
  registry.reload('old');
  registry.reload('never-was');
  expect(reloaded.filter((r) => r !== 'shop:true')).toEqual(['old:false']);
  expect(log.text('info').match(/removed/g)).toHaveLength(1);
});

test('reload() refuses an app id that is not a string and a stage that is neither published nor preview, naming them (a typo reloaded the published apps)', () => {
  const root = tree({ 'shop/apis/hello.json': api('hello'), 'shop/scripts/main.js': 'export function hello() { return "v1" }' });
  const previewRoot = tree({ 'shop/apis/hello.json': api('hello'), 'shop/scripts/main.js': 'export function hello() { return "p1" }' });
  const registry = open({ root, previewRoot, logger: false, watch: false });
  const reloaded = [];
  registry.on('reload', (r) => reloaded.push(r));
  expect(() => registry.reload(5)).toThrow(expect.objectContaining({ name: 'ConfigError', field: 'appId' }));
  expect(() => registry.reload({})).toThrow(/invalid appId: must be an app id \(a string\)/);
  expect(() => registry.reload('shop', 'previw')).toThrow(expect.objectContaining({ name: 'ConfigError', field: 'stage', message: expect.stringMatching(/'published' or 'preview', got "previw"/) }));
  expect(reloaded).toEqual([]);
  // (what is given right reloads)
  registry.reload('shop', 'preview');
  registry.reload(undefined, 'published');
  registry.reload();
  expect(reloaded.map((r) => r.stage)).toEqual(['preview', 'published', 'published']);
});

test("listApps(), listApis() and problems() refuse a stage that is neither published nor preview (they answered for the published apps)", () => {
  const root = tree({ 'shop/apis/hello.json': api('hello'), 'shop/scripts/main.js': 'export function hello() { return "v1" }' });
  const previewRoot = tree({ 'draft/apis/hello.json': api('hello'), 'draft/scripts/main.js': 'export function hello() { return "p1" }' });
  const registry = open({ root, previewRoot, logger: false, watch: false });
  for (const stage of ['previw', { stage: 'preview' }, null]) {
    const refused = expect.objectContaining({ name: 'ConfigError', field: 'stage', message: expect.stringMatching(/must be 'published' or 'preview', got/) });
    expect(() => registry.listApps(stage)).toThrow(refused);
    expect(() => registry.listApis('draft', stage)).toThrow(refused);
    expect(() => registry.problems(stage)).toThrow(refused);
  }
  expect(registry.listApps('preview')).toEqual(['draft']);
  expect(registry.listApps()).toEqual(['shop']);
  expect(registry.listApis('draft', 'preview').map((d) => d.path)).toEqual(['hello']);
  expect(registry.problems('published')).toEqual([]);
});

describe('the system limit of file watchers', () => {
  // fs.watch as it fails on Linux once fs.inotify.max_user_watches is reached
  const limitReached = (dir) => Object.assign(new Error(`ENOSPC: System limit for number of file watchers reached, watch '${dir}'`), { code: 'ENOSPC', errno: -28, syscall: 'watch' });
  afterEach(() => {
    jest.restoreAllMocks();
    jest.useRealTimers();
  });

  test('reaching it is one clear error (not a line per folder), and the apps left unwatched are watched once the limit allows', async () => {
    const files = {};
    for (let i = 0; i < 20; i++) {
      files[`app${i}/apis/hello.json`] = api('hello');
      files[`app${i}/scripts/main.js`] = `export function hello() { return "app${i}" }`;
    }
    const root = tree(files);
    // (only the retry's interval is faked: the debounce and the waits below are real)
    jest.useFakeTimers({ doNotFake: ['Date', 'hrtime', 'nextTick', 'performance', 'queueMicrotask', 'setImmediate', 'clearImmediate', 'setTimeout', 'clearTimeout'] });
    const realWatch = fs.watch;
    let allowed = 16; // the root and 5 apps (3 folders each)
    let tries = 0;
    jest.spyOn(fs, 'watch').mockImplementation((dir, ...rest) => {
      tries++;
      if (allowed <= 0) throw limitReached(dir);
      allowed--;
      return realWatch.call(fs, dir, ...rest);
    });
    const log = logs();
    const registry = open({ root, logger: log.logger });
    // every app is served; the limit is reported once, with what it means and the remedy
    expect(registry.listApps()).toHaveLength(20);
    const errors = log.lines.filter(([l, m]) => l !== 'info' && /watch/.test(m));
    expect(errors).toHaveLength(1);
    expect(errors[0][0]).toBe('error');
    expect(errors[0][1]).toMatch(/45 folders of 15 apps/);
    expect(errors[0][1]).toMatch(/app13, app14, app15/); // (the apps in order: app0, app1, app10, app11 and app12 are watched)
    expect(errors[0][1]).toMatch(/fs\.inotify\.max_user_watches/);
    expect(errors[0][1]).toMatch(/not picked up/);

    // an app that is watched still follows its edits
    fs.writeFileSync(path.join(root, 'app1/scripts/main.js'), 'export function hello() { return "edited 1" }');
    await eventually(registry, () => registry.getScript('app1', 'main.js').includes('edited 1'));

    // an edit to an unwatched app while the limit holds; then the limit is raised
    fs.writeFileSync(path.join(root, 'app5/scripts/main.js'), 'export function hello() { return "edited 5" }');
    tries = 0;
    jest.advanceTimersByTime(60_000);
    expect(log.lines.filter(([l, m]) => l !== 'info' && /watch/.test(m))).toHaveLength(1); // (not again on each retry)
    expect(tries).toBeLessThan(20); // (a retry still refused stops at its first folder, not one try per folder)
    expect(registry.getScript('app5', 'main.js')).not.toContain('edited 5');
    allowed = Infinity;
    jest.advanceTimersByTime(60_000);
    // the app is read again (what changed while it was not watched) and watched from then on
    await eventually(registry, () => registry.getScript('app5', 'main.js').includes('edited 5'));
    expect(log.text('info')).toMatch(/every app folder is watched again/);
    fs.writeFileSync(path.join(root, 'app19/scripts/main.js'), 'export function hello() { return "edited 19" }');
    await eventually(registry, () => registry.getScript('app19', 'main.js').includes('edited 19'));
  });
});

// (last: the overflow makes every registry of the process read its apps again)
test("more changes at once than the system's queue of file events holds: every app is read again, none left stale", async () => {
  // (Linux drops the events past fs.inotify.max_queued_events, and Node.js does not say so: with
  // the thread busy during a deploy, the changes of the apps whose events were dropped were never read)
  let queued = 16384;
  try {
    queued = Number(fs.readFileSync('/proc/sys/fs/inotify/max_queued_events', 'utf8')) || queued;
  } catch {}
  const root = tree({
    'app0/apis/hello.json': api('hello'),
    'app0/scripts/main.js': 'export function hello() { return "v1" }',
    'app1/apis/hello.json': api('hello'),
    'app1/scripts/main.js': 'export function hello() { return "v1" }',
  });
  const log = logs();
  const registry = open({ root, logger: log.logger });
  // (the thread busy writing: the events wait in the queue, more of them than it holds)
  const notes = path.join(root, 'app0');
  for (let i = 0; i < Math.ceil(queued / 2) + 1000; i++) fs.writeFileSync(path.join(notes, `note${i}.txt`), 'x');
  fs.writeFileSync(path.join(root, 'app1/scripts/main.js'), 'export function hello() { return "deployed" }');
  await eventually(registry, () => registry.getScript('app1', 'main.js').includes('deployed'));
  if (queued <= 65536) expect(log.text('warn')).toMatch(/file events at once[\s\S]*every app is read again/);
});
