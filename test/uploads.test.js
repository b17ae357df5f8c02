'use strict';
// Multipart uploads end to end: parts streamed to temporary files, the `upload` limits (413) and
// malformed bodies (400) before any script runs, Part.save / saveStorage / saveAttachment (called
// synchronously and with await), and the temporary files gone when the request ends, however it ends.
const fs = require('node:fs');
const http = require('node:http');
const os = require('node:os');
const path = require('node:path');
const crypto = require('node:crypto');
const request = require('supertest');
const { createApiRouter, ConfigError, MemoryRegistry } = require('..');
const { oneApi } = require('./helpers/app');

const root = fs.mkdtempSync(path.join(os.tmpdir(), 'sapi-uploads-'));
const routers = [];
const servers = [];
afterAll(async () => {
  for (const s of servers) {
    s.closeAllConnections?.();
    await new Promise((r) => s.close(r));
  }
  await Promise.all(routers.map((r) => r.close()));
  fs.rmSync(root, { recursive: true, force: true });
});

let seq = 0;
/** A router with its own sandbox, storage and upload temp folder; `ran` counts script runs. */
function setup(source, routerOpts = {}, def = {}) {
  const dir = path.join(root, `r${++seq}`);
  const dirs = { sandboxDir: path.join(dir, 'sandbox'), storageDir: path.join(dir, 'storage'), tmpDir: path.join(dir, 'tmp') };
  fs.mkdirSync(dirs.tmpDir, { recursive: true });
  const lines = [];
  const logger = { info: (m) => lines.push(m), warn: (m) => lines.push(m), error: (m) => lines.push(m) };
  const { upload, ...rest } = routerOpts;
  const x = oneApi(source, { methods: ['POST'], ...def }, { sandboxDir: dirs.sandboxDir, storageDir: dirs.storageDir, logger, upload: { tmpDir: dirs.tmpDir, ...upload }, ...rest });
  routers.push(x.router);
  return { ...x, ...dirs, lines, ran: () => lines.filter((l) => l.endsWith(' ran')).length };
}

function listen(app) {
  const server = app.listen(0, '127.0.0.1');
  servers.push(server);
  return new Promise((r) => server.once('listening', () => r(server.address().port)));
}

/** Resolves once `dir` holds no entry (polled: removal follows the response's close). */
async function emptied(dir, ms = 10_000) {
  const until = Date.now() + ms;
  for (;;) {
    const left = fs.readdirSync(dir);
    if (left.length === 0) return;
    if (Date.now() > until) throw new Error(`${dir} still holds ${left.join(', ')}`);
    await new Promise((r) => setTimeout(r, 25));
  }
}

const sha = (buf) => crypto.createHash('sha256').update(buf).digest('hex');
const BOUNDARY = 'sapiTestBoundary7d3';
const head = (name, file, type = 'application/octet-stream') =>
  `--${BOUNDARY}\r\nContent-Disposition: form-data; name="${name}"${file ? `; filename="${file}"` : ''}\r\n${file ? `Content-Type: ${type}\r\n` : ''}\r\n`;

/** A raw POST: `write(req)` writes the body; resolves with status and parsed JSON, or the client error. */
/** Calls `then` once the server has made a temporary file for the upload `req` sends (polled; the poll stops when `req` closes). */
function whenUploadFileMade(tmpDir, req, then) {
  const check = setInterval(() => {
    const dirs = fs.readdirSync(tmpDir);
    if (dirs.length > 0 && fs.readdirSync(path.join(tmpDir, dirs[0])).length > 0) {
      clearInterval(check);
      then();
    }
  }, 10);
  req.once('close', () => clearInterval(check));
}

function rawPost(port, headers, write) {
  return new Promise((resolve) => {
    const req = http.request({ port, host: '127.0.0.1', path: '/web0/api/app1/p', method: 'POST', headers }, (res) => {
      let text = '';
      res.on('data', (d) => (text += d));
      res.on('end', () => resolve({ status: res.statusCode, body: text ? JSON.parse(text) : null }));
    });
    req.on('error', (error) => resolve({ error }));
    write(req);
  });
}

describe('parts', () => {
  test('a large file streams to disk; save and saveStorage store it, called synchronously and with await', async () => {
    const x = setup(`export async function fn(ctx) {
      console.log('ran');
      const [big, small] = ctx.getParts();
      const a = big.save('in/' + big.submittedFileName);
      const b = await small.saveStorage('shared/deep/' + small.submittedFileName);
      return { a, b, note: ctx.request.getParameter('note'), notes: ctx.request.getParameterValues('note'), parts: ctx.getParts().map((p) => [p.name, p.size, p.contentType, p.submittedFileName]) };
    }`);
    const big = crypto.randomBytes(24 * 1024 * 1024);
    const res = await request(x.app)
      .post('/web0/api/app1/p')
      .field('note', 'first')
      .field('note', 'ünïcode')
      .attach('big', big, { filename: 'big.bin', contentType: 'application/x-big' })
      .attach('small', Buffer.from('hello'), { filename: '报告 2026.txt', contentType: 'text/plain' });
    expect(res.status).toBe(200);
    expect(res.body).toEqual({
      a: { path: 'in/big.bin', size: big.length },
      b: { path: 'shared/deep/报告 2026.txt', size: 5 },
      note: 'first',
      notes: ['first', 'ünïcode'],
      parts: [
        ['big', big.length, 'application/x-big', 'big.bin'],
        ['small', 5, 'text/plain', '报告 2026.txt'],
      ],
    });
    expect(sha(fs.readFileSync(path.join(x.sandboxDir, 'app1', 'in', 'big.bin')))).toBe(sha(big));
    expect(fs.readFileSync(path.join(x.storageDir, 'app1', 'shared', 'deep', '报告 2026.txt'), 'utf8')).toBe('hello');
    await emptied(x.tmpDir);
  });

  test('a bodyLimit far below the file does not bound it (bodyLimit is for other bodies)', async () => {
    const x = setup(`export function fn(ctx) { return ctx.getParts()[0].size }`, { bodyLimit: 100 });
    const res = await request(x.app).post('/web0/api/app1/p').attach('f', Buffer.alloc(100_000, 1), 'f.bin');
    expect(res.body).toBe(100_000);
  });

  test('a part without a file name, and an empty file field of a browser form', async () => {
    const x = setup(`export function fn(ctx) { return ctx.getParts().map((p) => [p.name, p.submittedFileName, p.size, p.contentType]) }`);
    const port = await listen(x.app);
    const raw =
      `--${BOUNDARY}\r\nContent-Disposition: form-data; name="blob"\r\nContent-Type: application/octet-stream\r\n\r\nabc\r\n` +
      `--${BOUNDARY}\r\nContent-Disposition: form-data; name="empty"; filename=""\r\nContent-Type: application/octet-stream\r\n\r\n\r\n` +
      `--${BOUNDARY}--\r\n`;
    const res = await rawPost(port, { 'content-type': `multipart/form-data; boundary=${BOUNDARY}` }, (req) => req.end(raw));
    expect(res.body).toEqual([
      ['blob', null, 3, 'application/octet-stream'],
      ['empty', null, 0, 'application/octet-stream'],
    ]);
  });

  test('paths that leave the sandbox are refused; saving needs a configured area', async () => {
    const x = setup(`export function fn(ctx) {
      const p = ctx.getParts()[0];
      const tryIt = (f) => { try { f(); return 'saved'; } catch (e) { return e.code; } };
      return [tryIt(() => p.save('../escape.txt')), tryIt(() => p.saveStorage('/abs.txt')), tryIt(() => p.save('ok/x.txt'))];
    }`);
    const res = await request(x.app).post('/web0/api/app1/p').attach('f', Buffer.from('x'), 'x.txt');
    expect(res.body).toEqual([270302, 270302, 'saved']);
    expect(fs.existsSync(path.join(x.sandboxDir, 'escape.txt'))).toBe(false);

    const bare = oneApi(`export function fn(ctx) { try { ctx.getParts()[0].saveStorage('a.txt') } catch (e) { return e.code } }`, {}, {});
    routers.push(bare.router);
    const none = await request(bare.app).post('/web0/api/app1/p').attach('f', Buffer.from('x'), 'x.txt');
    expect(none.body).toBe(270303);
  });

  test('a save the router has no area for names the option to set (the sandbox and shared storage are two)', async () => {
    const up = http.createServer((req, res) => res.end('body'));
    await new Promise((r) => up.listen(0, '127.0.0.1', r));
    servers.push(up);
    const bare = oneApi(
      `export function fn(ctx) {
        const p = ctx.getParts()[0];
        const tryIt = (f) => { try { f(); return 'saved'; } catch (e) { return e.code + ' ' + e.message; } };
        return {
          save: tryIt(() => p.save('a.txt')),
          saveStorage: tryIt(() => p.saveStorage('a.txt')),
          saveBodyAsFile: tryIt(() => platform.http.request({ url: ctx.query.url }).saveBodyAsFile('a.txt')),
        };
      }`,
      { methods: ['POST'] },
      { outbound: { allowPrivateNetworks: true } },
    );
    routers.push(bare.router);
    const res = await request(bare.app).post('/web0/api/app1/p').query({ url: `http://127.0.0.1:${up.address().port}/` }).attach('f', Buffer.from('x'), 'x.txt');
    expect(res.body).toEqual({
      save: "270303 part.save needs the router option `sandboxDir` (the apps' local sandboxes)",
      saveStorage: '270303 part.saveStorage needs shared storage (the router option `storage` or `storageDir`)',
      saveBodyAsFile: "270303 saveBodyAsFile needs the router option `sandboxDir` (the apps' local sandboxes)",
    });
  });
});

describe.each(['quickjs', 'vm2'])('a part saved again where it already is (%s)', (engine) => {
  test('leaves no temporary file beside it (a rename between two links to one file does nothing)', async () => {
    // sandbox and storage in one folder (allowed): save and saveStorage write the same file
    const shared = path.join(root, `shared-${engine}`);
    const y = setup(`export function fn(ctx) { const p = ctx.getParts()[0]; return [p.save('in/c.bin'), p.save('in/c.bin'), p.saveStorage('in/c.bin')] }`, { engine, sandboxDir: shared, storageDir: shared });
    const res = await request(y.app).post('/web0/api/app1/p').attach('f', Buffer.from('hello'), 'f.bin');
    expect(res.body).toEqual(Array(3).fill({ path: 'in/c.bin', size: 5 }));
    expect(fs.readdirSync(path.join(shared, 'app1', 'in'))).toEqual(['c.bin']);
    expect(fs.readFileSync(path.join(shared, 'app1', 'in', 'c.bin'), 'utf8')).toBe('hello');
    await emptied(y.tmpDir);
    await y.router.close(); // (its worker goes now: the tests after it start their own)
  });
});

/** A local server every request of which downloads the text `downloaded`; resolves with its port. */
async function downloadServer() {
  const body = http.createServer((_req, res) => res.end('downloaded'));
  servers.push(body);
  return new Promise((r) => body.listen(0, '127.0.0.1', () => r(body.address().port)));
}

test('any file name the file system holds saves (part.save, saveStorage, saveBodyAsFile); a longer one is a 400 error in the script', async () => {
  const bodyPort = await downloadServer();
  const x = setup(
    `export function fn(ctx) {
      const p = ctx.getParts()[0];
      const long = 'n'.repeat(250), tooLong = 'n'.repeat(256);
      const tryIt = (f) => { try { return f().size } catch (e) { return e.code } };
      const http = () => platform.http.request({ url: 'http://127.0.0.1:${bodyPort}/' });
      return [tryIt(() => p.save('a/' + long)), tryIt(() => p.saveStorage('a/' + long)), tryIt(() => http().saveBodyAsFile('b/' + long)),
        tryIt(() => p.save('a/' + tooLong)), tryIt(() => p.saveStorage('a/' + tooLong)), tryIt(() => http().saveBodyAsFile('b/' + tooLong))];
    }`,
    { outbound: { allowPrivateNetworks: true } },
  );
  const res = await request(x.app).post('/web0/api/app1/p').attach('f', Buffer.from('uploaded'), 'f.txt');
  expect(res.body).toEqual([8, 8, 10, 270302, 270302, 270302]);
  expect(fs.readFileSync(path.join(x.sandboxDir, 'app1', 'a', 'n'.repeat(250)), 'utf8')).toBe('uploaded');
  expect(fs.readFileSync(path.join(x.storageDir, 'app1', 'a', 'n'.repeat(250)), 'utf8')).toBe('uploaded');
  expect(fs.readFileSync(path.join(x.sandboxDir, 'app1', 'b', 'n'.repeat(250)), 'utf8')).toBe('downloaded');
});

test('a save onto a folder is a 400 error in the script, for part.save and saveBodyAsFile alike', async () => {
  const bodyPort = await downloadServer();
  const x = setup(
    `export function fn(ctx) {
      const p = ctx.getParts()[0];
      p.save('dir/inside.txt');
      const tryIt = (f) => { try { return f().size } catch (e) { return e.code + ' ' + e.message } };
      return [tryIt(() => p.save('dir')), tryIt(() => platform.http.request({ url: 'http://127.0.0.1:${bodyPort}/' }).saveBodyAsFile('dir'))];
    }`,
    { outbound: { allowPrivateNetworks: true } },
  );
  const res = await request(x.app).post('/web0/api/app1/p').attach('f', Buffer.from('uploaded'), 'f.txt');
  expect(res.body).toEqual(['270302 the path "dir" names a directory', '270302 the path "dir" names a directory']);
  expect(fs.readdirSync(path.join(x.sandboxDir, 'app1', 'dir'))).toEqual(['inside.txt']);
});

describe('saveAttachment', () => {
  test('without an attachments service: stored in storage under attachments/<table>/<field>/, a TableAttachment back', async () => {
    const x = setup(`export async function fn(ctx) {
      const p = ctx.getParts()[0];
      const a = p.saveAttachment('orders', 'files');
      const b = await p.saveAttachment('orders', 'files');
      let bad; try { p.saveAttachment('../x', 'f') } catch (e) { bad = e.code }
      return { a, b, bad };
    }`);
    const before = Date.now();
    const res = await request(x.app).post('/web0/api/app1/p').attach('doc', Buffer.from('%PDF-1.4 test'), { filename: 'q1 report.pdf', contentType: 'application/pdf' });
    expect(res.status).toBe(200);
    const { a, b, bad } = res.body;
    expect(bad).toBe(270302);
    expect(a).toEqual({
      id: expect.stringMatching(/^[0-9a-f-]{36}$/),
      name: 'q1 report.pdf',
      size: 13,
      contentType: 'application/pdf',
      tableId: 'orders',
      fieldId: 'files',
      path: `attachments/orders/files/${a.id}/q1 report.pdf`,
      createTime: expect.any(Number),
    });
    expect(a.createTime).toBeGreaterThanOrEqual(before);
    expect(b.id).not.toBe(a.id);
    expect(fs.readFileSync(path.join(x.storageDir, 'app1', a.path), 'utf8')).toBe('%PDF-1.4 test');
  });

  test('with an attachments service: it gets the temp file as path, stream and data', async () => {
    const seen = [];
    const attachments = {
      async save(appId, tableId, fieldId, file) {
        const streamed = await new Promise((resolve, reject) => {
          const chunks = [];
          file.stream().on('data', (c) => chunks.push(c)).on('end', () => resolve(Buffer.concat(chunks).toString())).on('error', reject);
        });
        seen.push({ appId, tableId, fieldId, name: file.fileName, field: file.fieldName, size: file.size, type: file.contentType, onDisk: fs.readFileSync(file.path, 'utf8'), streamed, data: file.data.toString() });
        return { id: 'att-1' };
      },
    };
    const x = setup(`export function fn(ctx) { return ctx.getParts()[0].saveAttachment('t1', 'f1') }`, { attachments });
    const res = await request(x.app).post('/web0/api/app1/p').attach('up', Buffer.from('bytes!'), { filename: 'a.txt', contentType: 'text/plain' });
    expect(res.body).toEqual({ id: 'att-1' });
    expect(seen).toEqual([{ appId: 'app1', tableId: 't1', fieldId: 'f1', name: 'a.txt', field: 'up', size: 6, type: 'text/plain', onDisk: 'bytes!', streamed: 'bytes!', data: 'bytes!' }]);
  });

  test("the attachments service's own failure is logged; the script gets HOST_ERROR without its details", async () => {
    const logged = [];
    const logger = { error: (m) => logged.push(m), warn() {}, info() {} };
    const attachments = { save: async () => { throw new Error('connect ECONNREFUSED 10.0.3.7:5432 (postgres://svc:pw@db)'); } };
    const x = setup(`export function fn(ctx) {
      try { ctx.getParts()[0].saveAttachment('t1', 'f1') } catch (e) { return { code: e.code, message: e.message } }
    }`, { attachments, logger });
    const res = await request(x.app).post('/web0/api/app1/p').attach('up', Buffer.from('bytes!'), { filename: 'a.txt', contentType: 'text/plain' });
    expect(res.body).toEqual({ code: 270602, message: 'The file could not be stored' });
    expect(logged.join('\n')).toMatch(/part\.saveAttachment failed in storage: Error: connect ECONNREFUSED 10\.0\.3\.7/);
  });

  test.each([
    ['an object with no prototype', () => Object.assign(Object.create(null), { reason: 'quota' }), /failed in storage: \[Object: null prototype\] \{ reason: 'quota' \}/],
    ['a string', () => 'quota exceeded', /failed in storage: quota exceeded/],
  ])("the attachments service throwing %s: logged as it is; the script gets HOST_ERROR", async (_label, thrown, line) => {
    const logged = [];
    const logger = { error: (m) => logged.push(m), warn() {}, info() {} };
    const attachments = { save: async () => { throw thrown(); } };
    const x = setup(`export function fn(ctx) {
      try { ctx.getParts()[0].saveAttachment('t1', 'f1') } catch (e) { return { code: e.code, message: e.message } }
    }`, { attachments, logger });
    const res = await request(x.app).post('/web0/api/app1/p').attach('up', Buffer.from('bytes!'), { filename: 'a.txt', contentType: 'text/plain' });
    expect(res.body).toEqual({ code: 270602, message: 'The file could not be stored' });
    expect(logged.join('\n')).toMatch(line);
  });
});

describe('limits: 413 naming the limit, before any script runs', () => {
  const cases = [
    ['fileSize', { fileSize: 1000 }, (r) => r.attach('f', Buffer.alloc(1001), 'f.bin'), /upload\.fileSize \(1000 bytes\)/],
    ['files', { files: 2 }, (r) => r.attach('a', Buffer.from('a'), 'a').attach('b', Buffer.from('b'), 'b').attach('c', Buffer.from('c'), 'c'), /upload\.files \(2\)/],
    ['fields', { fields: 2 }, (r) => r.field('a', '1').field('b', '2').field('c', '3'), /upload\.fields \(2\)/],
    ['fieldSize', { fieldSize: '1kb' }, (r) => r.field('big', 'x'.repeat(1025)), /'big' is larger than upload\.fieldSize \(1024 bytes\)/],
  ];
  test.each(cases)('%s', async (_name, upload, build, message) => {
    const x = setup(`export function fn(ctx) { console.log('ran'); return 1 }`, { upload });
    const res = await build(request(x.app).post('/web0/api/app1/p'));
    expect(res.status).toBe(413);
    expect(res.body).toEqual({ requestId: res.headers['x-request-id'], code: 270110, message: expect.stringMatching(message) });
    expect(x.ran()).toBe(0);
    await emptied(x.tmpDir);
    // at the limit is fine
    const ok = await request(x.app).post('/web0/api/app1/p').attach('f', Buffer.alloc(10), 'f.bin');
    expect(ok.status).toBe(200);
    expect(x.ran()).toBe(1);
  });

  test('the form fields together are bounded by bodyLimit (they are held in memory)', async () => {
    const x = setup(`export function fn(ctx) { console.log('ran'); return 1 }`, { bodyLimit: 2000 });
    let r = request(x.app).post('/web0/api/app1/p');
    for (let i = 0; i < 3; i++) r = r.field(`f${i}`, 'x'.repeat(900));
    const res = await r;
    expect(res.status).toBe(413);
    expect(res.body).toMatchObject({ code: 270110, message: 'The form fields together are larger than bodyLimit (2000 bytes)' });
    expect(x.ran()).toBe(0);
    const ok = await request(x.app).post('/web0/api/app1/p').field('a', 'x'.repeat(900)).attach('f', Buffer.alloc(5000), 'f.bin');
    expect(ok.status).toBe(200);
  });

  test('a chunked upload (no Content-Length) over fileSize is cut off with a 413', async () => {
    const x = setup(`export function fn(ctx) { console.log('ran'); return 1 }`, { upload: { fileSize: 4096 } });
    const port = await listen(x.app);
    const res = await rawPost(port, { 'content-type': `multipart/form-data; boundary=${BOUNDARY}`, 'transfer-encoding': 'chunked' }, (req) => {
      req.write(head('f', 'f.bin'));
      for (let i = 0; i < 8; i++) req.write(Buffer.alloc(1024, 7));
      req.end(`\r\n--${BOUNDARY}--\r\n`);
    });
    expect(res.status).toBe(413);
    expect(res.body.code).toBe(270110);
    expect(x.ran()).toBe(0);
    await emptied(x.tmpDir);
  });
});

describe('a limit or error right after a file: its temporary file is closed and removed', () => {
  /** The descriptors this process holds open under `dir`. */
  const openIn = (dir) =>
    fs.readdirSync('/proc/self/fd').filter((fd) => {
      try {
        return fs.readlinkSync(`/proc/self/fd/${fd}`).startsWith(dir + path.sep);
      } catch {
        return false; // (closed meanwhile)
      }
    });
  // the file's last bytes are still buffered in its part when the next part's header fails the
  // upload (busboy has ended the file's stream, the temp file has not been written to the end)
  const file = Buffer.alloc(512 * 1024, 5);
  test.each([
    ['upload.files', { upload: { files: 1 } }, head('g', 'g.bin') + 'x', 413],
    ['upload.fields', { upload: { fields: 0 } }, head('a') + '1', 413],
    ['a part without a name', {}, `--${BOUNDARY}\r\nContent-Disposition: form-data\r\n\r\nx`, 400],
  ])('%s', async (_name, routerOpts, next, status) => {
    const x = setup(`export function fn(ctx) { console.log('ran'); return 1 }`, routerOpts);
    const port = await listen(x.app);
    for (let i = 0; i < 3; i++) {
      const body = Buffer.concat([Buffer.from(head('f', 'f.bin')), file, Buffer.from(`\r\n${next}\r\n--${BOUNDARY}--\r\n`)]);
      const res = await rawPost(port, { 'content-type': `multipart/form-data; boundary=${BOUNDARY}`, 'content-length': body.length }, (req) => req.end(body));
      expect(res.status).toBe(status);
    }
    expect(x.ran()).toBe(0);
    await emptied(x.tmpDir);
    expect(openIn(x.tmpDir)).toEqual([]);
  });
});

describe('malformed multipart: 400 before any script runs', () => {
  test.each([
    ['no boundary', { 'content-type': 'multipart/form-data' }, 'x'],
    ['truncated body', { 'content-type': `multipart/form-data; boundary=${BOUNDARY}` }, `${head('f', 'f.bin')}some bytes but no closing boundary`],
    ['bad part header', { 'content-type': `multipart/form-data; boundary=${BOUNDARY}` }, `--${BOUNDARY}\r\nContent-Disposition form-data broken\r\n\r\nx\r\n--${BOUNDARY}--\r\n`],
    // (RFC 7578: every part has a name)
    ['a field without a name', { 'content-type': `multipart/form-data; boundary=${BOUNDARY}` }, `--${BOUNDARY}\r\nContent-Disposition: form-data\r\n\r\nx\r\n--${BOUNDARY}--\r\n`],
    ['a file without a name', { 'content-type': `multipart/form-data; boundary=${BOUNDARY}` }, `--${BOUNDARY}\r\nContent-Disposition: form-data; filename="f.bin"\r\n\r\nx\r\n--${BOUNDARY}--\r\n`],
  ])('%s', async (_name, headers, body) => {
    const x = setup(`export function fn(ctx) { console.log('ran'); return ctx.getParts().length }`);
    const port = await listen(x.app);
    const res = await rawPost(port, headers, (req) => req.end(body));
    expect(res.status).toBe(400);
    expect(res.body).toMatchObject({ code: 270103, message: expect.stringMatching(/^Malformed multipart body: /) });
    expect(x.ran()).toBe(0);
    await emptied(x.tmpDir);
  });
});

describe('a form field part that declares its charset', () => {
  const field = (charset, bytes) => Buffer.concat([
    Buffer.from(`--${BOUNDARY}\r\nContent-Disposition: form-data; name="note"\r\nContent-Type: text/plain; charset=${charset}\r\n\r\n`),
    bytes,
    Buffer.from(`\r\n${head('f', 'f.bin')}data\r\n--${BOUNDARY}--\r\n`),
  ]);

  test('in a charset the multipart parser decodes: the value as text', async () => {
    const x = setup(`export function fn(ctx) { return ctx.request.getParameter('note') }`);
    const port = await listen(x.app);
    const body = field('ISO-8859-1', Buffer.from([0x63, 0x61, 0x66, 0xe9]));
    const res = await rawPost(port, { 'content-type': `multipart/form-data; boundary=${BOUNDARY}`, 'content-length': body.length }, (req) => req.end(body));
    expect([res.status, res.body]).toEqual([200, 'café']);
    await emptied(x.tmpDir);
  });

  test.each(['gbk', 'x-unknown'])("in one it does not (%s): 415 UNSUPPORTED_CHARSET before any script runs (the parser gave no value and the host process ended on an uncaught TypeError)", async (charset) => {
    const x = setup(`export function fn(ctx) { console.log('ran'); return ctx.request.getParameter('note') }`);
    const port = await listen(x.app);
    const body = field(charset, Buffer.from([0xc4, 0xe3]));
    const res = await rawPost(port, { 'content-type': `multipart/form-data; boundary=${BOUNDARY}`, 'content-length': body.length }, (req) => req.end(body));
    expect(res.status).toBe(415);
    expect(res.body).toMatchObject({ code: 270104, message: "Form field 'note' declares a charset the multipart parser cannot decode" });
    expect(x.ran()).toBe(0);
    await emptied(x.tmpDir);
  });
});

describe('temporary files are removed when the request ends', () => {
  test('after success', async () => {
    const x = setup(`export function fn(ctx) { return ctx.getParts().length }`);
    const res = await request(x.app).post('/web0/api/app1/p').attach('a', Buffer.alloc(5000), 'a').attach('b', Buffer.alloc(10), 'b');
    expect(res.body).toBe(2);
    await emptied(x.tmpDir);
  });

  test('after the script throws', async () => {
    const x = setup(`export function fn(ctx) { ctx.getParts()[0].save('kept.bin'); throw new Error('boom') }`);
    const res = await request(x.app).post('/web0/api/app1/p').attach('a', Buffer.alloc(5000, 3), 'a');
    expect(res.status).toBe(500);
    await emptied(x.tmpDir);
    // (what the script saved stays: it is the app's file now)
    expect(fs.statSync(path.join(x.sandboxDir, 'app1', 'kept.bin')).size).toBe(5000);
  });

  test('after a timeout', async () => {
    const x = setup(`export function fn(ctx) { ctx.getParts(); while (true) {} }`, { scriptTimeoutMs: 500 });
    const res = await request(x.app).post('/web0/api/app1/p').attach('a', Buffer.alloc(5000), 'a');
    expect(res.body.code).toBe(270200);
    await emptied(x.tmpDir);
  });

  test('after the client goes away mid-upload', async () => {
    const x = setup(`export function fn(ctx) { console.log('ran'); return 1 }`);
    const port = await listen(x.app);
    const res = await rawPost(port, { 'content-type': `multipart/form-data; boundary=${BOUNDARY}`, 'transfer-encoding': 'chunked' }, (req) => {
      req.write(head('f', 'f.bin'));
      req.write(Buffer.alloc(256 * 1024, 1));
      // once the server made the temp file, hang up (answered before that: the test fails, the poll stops)
      whenUploadFileMade(x.tmpDir, req, () => req.destroy());
    });
    expect(res.error).toBeDefined();
    await emptied(x.tmpDir);
    expect(x.ran()).toBe(0);
  });

  /** Posts one file part and goes away once the script has started. */
  const postThenLeave = (x, port) =>
    rawPost(port, { 'content-type': `multipart/form-data; boundary=${BOUNDARY}` }, (req) => {
      req.end(`${head('f', 'f.bin')}${'z'.repeat(5000)}\r\n--${BOUNDARY}--\r\n`);
      const check = setInterval(() => {
        if (x.ran() > 0) {
          clearInterval(check);
          req.destroy();
        }
      }, 10);
      req.once('close', () => clearInterval(check)); // (answered before the script ran: the test fails, the poll stops)
    });

  test('after the client goes away while the script runs', async () => {
    const x = setup(`export function fn(ctx) { console.log('ran'); const t = Date.now(); while (Date.now() - t < 1500) {} return 1 }`);
    const port = await listen(x.app);
    const res = await postThenLeave(x, port);
    expect(res.error).toBeDefined();
    await emptied(x.tmpDir);
  });

  test.each([
    ['shared storage', undefined],
    ['an attachments service', { save: async (_a, _t, _f, file) => ({ size: file.data.length }) }],
  ])('a part saved after the client left (its temporary file gone) fails in the script; the host lives (attachments in %s)', async (_name, attachments) => {
    // the script waits on a local server that answers once the temporary files are gone
    const gate = http.createServer(async (_req, res) => {
      await emptied(x.tmpDir);
      res.end('gone');
    });
    servers.push(gate);
    const gatePort = await new Promise((r) => gate.listen(0, '127.0.0.1', () => r(gate.address().port)));
    const results = [];
    const x = setup(
      `export async function fn(ctx) {
        console.log('ran');
        platform.http.request({ url: 'http://127.0.0.1:${gatePort}/' });
        const p = ctx.getParts()[0];
        for (const f of [() => p.save('late.bin'), () => p.saveStorage('late.bin'), () => p.saveAttachment('t', 'f')]) {
          try { f(); console.log('result saved'); } catch (e) { console.log('result ' + e.code); }
        }
        console.log('done');
      }`,
      { outbound: { allowPrivateNetworks: true }, scriptTimeoutMs: 20_000, attachments },
    );
    const uncaught = [];
    const onUncaught = (e) => uncaught.push(e);
    process.prependListener('uncaughtException', onUncaught);
    try {
      const port = await listen(x.app);
      const res = await postThenLeave(x, port);
      expect(res.error).toBeDefined();
      for (let i = 0; i < 400 && !x.lines.some((l) => l.endsWith(' done')); i++) await new Promise((r) => setTimeout(r, 25));
      await new Promise((r) => setTimeout(r, 200)); // (a stray 'error' event comes on a later tick)
      for (const l of x.lines) if (/ result /.test(l)) results.push(l.replace(/.* result /, ''));
    } finally {
      process.removeListener('uncaughtException', onUncaught);
    }
    expect(uncaught.map((e) => e.message)).toEqual([]);
    expect(results).toEqual(['270301', '270301', '270301']);
  });
});

describe('router.close() leaves no temporary folder behind', () => {
  // (a process exits once close() resolves, as the command line's server does: a folder removed later never is)
  test('close({ force: true }) during an upload: the upload ends with 503 SHUTTING_DOWN and its folder is gone when close() resolves', async () => {
    const x = setup(`export function fn(ctx) { console.log('ran'); return 1 }`);
    const port = await listen(x.app);
    let hasFile;
    const fileMade = new Promise((resolve) => (hasFile = resolve));
    const answer = rawPost(port, { 'content-type': `multipart/form-data; boundary=${BOUNDARY}`, 'transfer-encoding': 'chunked' }, (req) => {
      req.write(head('f', 'f.bin'));
      req.write(Buffer.alloc(256 * 1024, 1));
      // the client goes on sending (or stalls) for as long as the server lets it: its response never closes by itself
      whenUploadFileMade(x.tmpDir, req, hasFile);
    });
    await fileMade;
    await x.router.close({ force: true });
    expect(fs.readdirSync(x.tmpDir)).toEqual([]);
    const res = await answer;
    expect([res.status, res.body?.code]).toEqual([503, 270208]);
    expect(x.ran()).toBe(0);
  });
});

describe('a client gone before its body is read', () => {
  test.each([
    ['multipart', `multipart/form-data; boundary=${BOUNDARY}`, `${head('f', 'f.bin')}hello\r\n--${BOUNDARY}--\r\n`],
    ['text', 'text/plain', 'hello'],
  ])('%s: the request ends (router.close() resolves), no temporary file is left', async (_name, type, body) => {
    // a registry that answers only once the client has gone
    const { makeApp } = require('./helpers/app');
    const mem = new MemoryRegistry({ apps: { app1: { scripts: { 'main.js': `export function fn(ctx) { return ctx.getParts().length }` }, apis: [{ path: 'p', call: { script: 'main.js', function: 'fn' }, returnType: 'JSON' }] } } });
    let release;
    const gate = new Promise((r) => (release = r));
    const registry = { getApi: async (...a) => (await gate, mem.getApi(...a)), getScript: (...a) => mem.getScript(...a) };
    const tmpDir = fs.mkdtempSync(path.join(root, 'gone-'));
    const { app, router } = makeApp({ registry, router: { upload: { tmpDir } } });
    const port = await listen(app);
    const server = servers[servers.length - 1];
    server.once('request', (req) => {
      req.once('close', () => setImmediate(release));
      setTimeout(() => client.destroy(), 50); // (the whole body sent, then gone)
    });
    const client = http.request({ port, host: '127.0.0.1', path: '/web0/api/app1/p', method: 'POST', headers: { 'content-type': type, 'content-length': Buffer.byteLength(body) } });
    client.on('error', () => undefined);
    client.end(body);
    await gate;
    const closed = await Promise.race([router.close().then(() => 'closed'), new Promise((r) => setTimeout(() => r('still waiting for the request'), 10_000).unref())]);
    expect(closed).toBe('closed');
    await emptied(tmpDir);
  });
});

describe('the upload option', () => {
  const registry = new MemoryRegistry();
  const make = (o) => () => createApiRouter({ registry, workers: 1, ...o });
  test.each([
    [{ upload: 5 }, 'upload'],
    [{ upload: { fileSize: 'huge' } }, 'upload.fileSize'],
    [{ upload: { fileSize: 0 } }, 'upload.fileSize'],
    [{ upload: { files: 1.5 } }, 'upload.files'],
    [{ upload: { fields: -1 } }, 'upload.fields'],
    [{ upload: { fieldSize: '' } }, 'upload.fieldSize'],
    [{ upload: { tmpDir: '' } }, 'upload.tmpDir'],
    [{ upload: { fileSzie: 10 } }, 'upload.fileSzie'],
    [{ storage: {} }, 'storage'],
    [{ storage: { put() {}, get() {}, stat() {}, delete() {} }, storageDir: '/tmp/x' }, 'storage'],
    // file roots one inside another: an app named like the folder between would reach every app's files
    [{ sandboxDir: '/srv/data', storageDir: '/srv/data/shared' }, 'storageDir'],
    [{ sandboxDir: '/srv/data/sandbox/', storageDir: '/srv/data' }, 'sandboxDir'],
    [{ sandboxDir: '/srv/data', upload: { tmpDir: '/srv/data/uploads' } }, 'upload.tmpDir'],
    [{ storageDir: '/srv/data', upload: { tmpDir: '/srv/data' } }, 'upload.tmpDir'],
    [{ storageDir: path.dirname(os.tmpdir()) }, 'upload.tmpDir'],
  ])('%j is a ConfigError naming %s', (o, field) => {
    let err;
    try {
      make(o)();
    } catch (e) {
      err = e;
    }
    expect(err).toBeInstanceOf(ConfigError);
    expect(err.field).toBe(field);
  });

  test.each([
    [{ sandboxDir: '/srv/data', storageDir: '/srv/data' }],
    [{ sandboxDir: '/srv/data/sandbox', storageDir: '/srv/data/storage', upload: { tmpDir: '/srv/data/tmp' } }],
    [{ sandboxDir: '/srv/data', storageDir: '/srv/data2', upload: { tmpDir: '/srv/data3' } }],
    [{ sandboxDir: path.join(os.tmpdir(), 'sandbox') }],
  ])('file roots apart (or the same) are accepted: %j', async (o) => {
    await make(o)().close();
  });

  test('a tmpDir that does not exist yet is created on the first upload, as sandboxDir is', async () => {
    const tmpDir = path.join(root, `later-${++seq}`, 'uploads');
    const x = setup(`export function fn(ctx) { return ctx.getParts()[0].save('f.bin') }`, { upload: { tmpDir } });
    const res = await request(x.app).post('/web0/api/app1/p').attach('f', Buffer.from('abc'), 'f.bin');
    expect([res.status, res.body]).toEqual([200, { path: 'f.bin', size: 3 }]);
    await emptied(tmpDir);
  });

  test('sizes as strings and zero counts are accepted', async () => {
    const r = make({ upload: { fileSize: '2mb', fieldSize: 100, files: 0, fields: 0 } })();
    await r.close();
  });
});
