'use strict';
// S3FileStorage against a real S3-compatible server on a loopback port (s3rver): put, get, stat,
// delete, ranges, a 50 MB streamed upload, missing keys; then uploads and File responses through
// the router with `storage: new S3FileStorage(...)`; and the error when the SDK is not installed.
const crypto = require('node:crypto');
const path = require('node:path');
const { Readable } = require('node:stream');
const { execFileSync } = require('node:child_process');
const request = require('supertest');
const { S3FileStorage } = require('..');
const { oneApi } = require('./helpers/app');
const { startS3 } = require('./helpers/s3');

let s3;
let storage;

/** This process's open descriptors on `file` (/proc/self/fd). */
function descriptorsOn(file) {
  const fs = require('node:fs');
  return fs.readdirSync('/proc/self/fd').filter((fd) => {
    try {
      return fs.readlinkSync(`/proc/self/fd/${fd}`) === file;
    } catch {
      return false;
    }
  });
}

beforeAll(async () => {
  s3 = await startS3();
  storage = s3.storage({ prefix: 'files' });
});
afterAll(() => s3?.stop());

const text = async (stream) => {
  const chunks = [];
  for await (const c of stream) chunks.push(c);
  return Buffer.concat(chunks);
};

describe('S3FileStorage', () => {
  test('put, stat, get, delete', async () => {
    const put = await storage.put('app1', 'docs/a.txt', Readable.from([Buffer.from('hello '), Buffer.from('s3')]), { contentType: 'text/plain' });
    expect(put).toEqual({ size: 8, etag: expect.stringMatching(/^"[0-9a-f]+"$/) });
    const info = await storage.stat('app1', 'docs/a.txt');
    expect(info).toEqual({ size: 8, etag: put.etag, modified: expect.any(Date), contentType: 'text/plain' });
    expect(Math.abs(info.modified.getTime() - Date.now())).toBeLessThan(60_000);
    const got = await storage.get('app1', 'docs/a.txt');
    expect({ ...got, stream: undefined }).toEqual({ ...info, stream: undefined });
    expect((await text(got.stream)).toString()).toBe('hello s3');
    expect(storage.keyOf('app1', 'docs/a.txt')).toBe('files/app1/docs/a.txt');
    await storage.delete('app1', 'docs/a.txt');
    expect(await storage.stat('app1', 'docs/a.txt')).toBeNull();
  });

  test('apps do not see each other', async () => {
    await storage.put('app1', 'same.txt', Readable.from([Buffer.from('one')]), {});
    await storage.put('app2', 'same.txt', Readable.from([Buffer.from('two')]), {});
    expect((await text((await storage.get('app1', 'same.txt')).stream)).toString()).toBe('one');
    expect((await text((await storage.get('app2', 'same.txt')).stream)).toString()).toBe('two');
  });

  test('range reads', async () => {
    await storage.put('app1', 'r.bin', Readable.from([Buffer.from('0123456789')]), {});
    const got = await storage.get('app1', 'r.bin', { range: { start: 2, end: 5 } });
    expect(got.size).toBe(10);
    expect((await text(got.stream)).toString()).toBe('2345');
    const tail = await storage.get('app1', 'r.bin', { range: { start: 9, end: 9 } });
    expect((await text(tail.stream)).toString()).toBe('9');
  });

  test('a service that ignores Range (answers 200 with the whole object): get fails, never passing the whole file off as the range', async () => {
    const bytes = crypto.randomBytes(200_000);
    await storage.put('app1', 'norange.bin', Readable.from([bytes]), {});
    // the real client and server, with the Range header lost on the way (a proxy, a service that ignores it)
    const real = storage.client;
    const client = {
      send(cmd, opts) {
        if (cmd.constructor.name === 'GetObjectCommand') delete cmd.input.Range;
        return real.send(cmd, opts);
      },
    };
    const s = new S3FileStorage({ bucket: s3.bucket, prefix: 'files', client });
    await expect(s.get('app1', 'norange.bin', { range: { start: 65536, end: 131071 } })).rejects.toThrow(/range/i);
    // (without a range, the whole object is what was asked for)
    expect(Buffer.compare(await text((await s.get('app1', 'norange.bin')).stream), bytes)).toBe(0);

    // through the router: a JSON 500 before any header, never a 206 holding other bytes
    const x = oneApi(`export function fn(ctx) { return { storagePath: 'norange.bin' } }`, { returnType: 'File' }, { storage: s }, {});
    try {
      const res = await request(x.app).get('/web0/api/app1/p').set('Range', 'bytes=65536-131071');
      expect([res.status, res.body.code]).toEqual([500, 270602]);
    } finally {
      await x.router.close();
    }
  });

  test('downloads held open by clients that do not read (paused videos) leave the storage usable', async () => {
    await storage.put('app1', 'held.bin', Readable.from([crypto.randomBytes(1024 * 1024)]), {});
    // each open download holds its connection to S3 until its client reads it to the end
    const held = [];
    const open = async () => {
      for (let i = 0; i < 60; i++) held.push(await storage.get('app1', 'held.bin'));
      return storage.stat('app1', 'held.bin');
    };
    try {
      const timeout = new Promise((_r, reject) => setTimeout(() => reject(new Error(`no connection for call ${held.length + 1}`)), 10_000).unref());
      const info = await Promise.race([open(), timeout]);
      expect(info.size).toBe(1024 * 1024);
    } finally {
      for (const got of held) got.stream.destroy();
    }
  }, 30_000);

  test('a HEAD answer without Content-Length: stat fails, never a size of 0 (an empty download of a full file)', async () => {
    await storage.put('app1', 'nolength.bin', Readable.from([Buffer.alloc(5000, 1)]), {});
    // the real client and server, with the length lost on the way (a proxy that drops it from HEAD answers)
    const real = storage.client;
    const client = {
      async send(cmd, opts) {
        const out = await real.send(cmd, opts);
        if (cmd.constructor.name === 'HeadObjectCommand') delete out.ContentLength;
        return out;
      },
    };
    const s = new S3FileStorage({ bucket: s3.bucket, prefix: 'files', client });
    await expect(s.stat('app1', 'nolength.bin')).rejects.toThrow(/Content-Length/);
    expect(await s.stat('app1', 'none.bin')).toBeNull();

    const x = oneApi(`export function fn(ctx) { return { storagePath: 'nolength.bin' } }`, { returnType: 'File' }, { storage: s }, {});
    try {
      const res = await request(x.app).get('/web0/api/app1/p');
      expect([res.status, res.body.code]).toEqual([500, 270602]);
    } finally {
      await x.router.close();
    }
  });

  test('a missing key: get and stat give null, delete resolves', async () => {
    expect(await storage.get('app1', 'nope/none.txt')).toBeNull();
    expect(await storage.stat('app1', 'nope/none.txt')).toBeNull();
    await expect(storage.delete('app1', 'nope/none.txt')).resolves.toBeUndefined();
  });

  test('a 50 MB upload streams in parts (a generated stream, never one buffer)', async () => {
    const size = 50 * 1024 * 1024;
    const chunk = 1024 * 1024;
    const hash = crypto.createHash('sha256');
    async function* gen() {
      for (let i = 0; i < size / chunk; i++) {
        const c = crypto.randomBytes(chunk);
        hash.update(c);
        yield c;
      }
    }
    const put = await storage.put('app1', 'big/50mb.bin', Readable.from(gen()), { contentType: 'application/octet-stream' });
    expect(put.size).toBe(size);
    const expected = hash.digest('hex');
    expect((await storage.stat('app1', 'big/50mb.bin')).size).toBe(size);
    const got = await storage.get('app1', 'big/50mb.bin');
    const h = crypto.createHash('sha256');
    for await (const c of got.stream) h.update(c);
    expect(h.digest('hex')).toBe(expected);
    const mid = await storage.get('app1', 'big/50mb.bin', { range: { start: 30 * 1024 * 1024, end: 30 * 1024 * 1024 + 99 } });
    expect((await text(mid.stream)).length).toBe(100);
  }, 120_000);

  test('a failing source stream fails the put and stores nothing', async () => {
    const bad = new Readable({
      read() {
        this.destroy(new Error('source broke'));
      },
    });
    await expect(storage.put('app1', 'broken.bin', bad, {})).rejects.toThrow('source broke');
    expect(await storage.stat('app1', 'broken.bin')).toBeNull();
  });

  test('options are checked', () => {
    expect(() => new S3FileStorage({})).toThrow(/needs a bucket/);
    expect(() => new S3FileStorage({ bucket: 'b', partSize: 1024 })).toThrow(/partSize/);
    expect(() => new S3FileStorage({ bucket: 'b', queueSize: 0 })).toThrow(/queueSize/);
    // (null is a value, checked as others are: it is not left out)
    expect(() => new S3FileStorage({ bucket: 'b', partSize: null })).toThrow(/partSize/);
    expect(() => new S3FileStorage({ bucket: 'b', queueSize: null })).toThrow(/queueSize/);
  });

  test('an option of the wrong type is refused at construction, naming it (not at the first request, nor spread into the client)', () => {
    const { ConfigError } = require('..');
    const bad = [
      ['prefix', 5],
      ['region', 5],
      ['endpoint', { url: 'http://127.0.0.1:9000' }],
      ['forcePathStyle', 'true'],
      ['credentials', 'AKIA...'],
      ['credentials', { accessKeyId: 'a' }],
      ['clientOptions', 'maxAttempts=3'],
      ['client', 'my-client'],
    ];
    for (const [field, value] of bad) {
      let error;
      try {
        new S3FileStorage({ bucket: 'b', [field]: value });
      } catch (e) {
        error = e;
      }
      expect(error).toBeInstanceOf(ConfigError);
      expect(error.field).toBe(field);
    }
    new S3FileStorage({ bucket: 'b', prefix: 'files', region: 'eu-west-1', endpoint: 'http://127.0.0.1:9000', forcePathStyle: true, credentials: { accessKeyId: 'a', secretAccessKey: 'b' }, clientOptions: { maxAttempts: 3 } });
  });

  test("a client of one's own beside the settings of a client the storage makes is refused, naming the setting (they were silently dropped)", () => {
    const { ConfigError } = require('..');
    const client = { send: async () => ({}) };
    const settings = { region: 'eu-west-1', endpoint: 'http://127.0.0.1:9000', forcePathStyle: true, credentials: { accessKeyId: 'a', secretAccessKey: 'b' }, clientOptions: { maxAttempts: 3 } };
    for (const [field, value] of Object.entries(settings)) {
      let error;
      try {
        new S3FileStorage({ bucket: 'b', client, [field]: value });
      } catch (e) {
        error = e;
      }
      expect(error).toBeInstanceOf(ConfigError);
      expect(error.field).toBe(field);
      expect(error.message).toMatch(/give either client \(with its own settings\) or the settings, not both/);
    }
    // (what the storage itself uses goes with a client too)
    new S3FileStorage({ bucket: 'b', client, prefix: 'files', partSize: 8 * 1024 * 1024, queueSize: 2 });
  });

  test('credentials may be a provider function (the SDK calls it), as S3FileStorageOptions types them', async () => {
    let asked = 0;
    const provided = s3.storage({ prefix: 'provided', credentials: async () => (asked++, { accessKeyId: 'S3RVER', secretAccessKey: 'S3RVER' }) });
    await provided.put('app1', 'p.txt', Readable.from([Buffer.from('by provider')]), {});
    expect((await text((await provided.get('app1', 'p.txt')).stream)).toString()).toBe('by provider');
    expect(asked).toBeGreaterThan(0);
  });
});

describe('through the router', () => {
  let x;
  beforeAll(() => {
    x = oneApi(
      `export function up(ctx) {
        const p = ctx.getParts()[0];
        return { saved: p.saveStorage('uploads/' + p.submittedFileName), att: p.saveAttachment('orders', 'scan') };
      }
      export function down(ctx) { return { storagePath: ctx.query.p, name: ctx.query.name, contentDisposition: 'inline' } }`,
      {},
      { storage },
      {},
    );
    x.registry.putApi('app1', { path: 'up', call: { script: 'main.js', function: 'up' }, returnType: 'JSON' });
    x.registry.putApi('app1', { path: 'down', call: { script: 'main.js', function: 'down' }, returnType: 'File' });
  });
  afterAll(() => x.router.close());

  test('saveStorage and saveAttachment store in the bucket; a File result reads it back with ranges and ETags', async () => {
    const body = crypto.randomBytes(300_000);
    const up = await request(x.app).post('/web0/api/app1/up').attach('f', body, { filename: 'scan.png', contentType: 'image/png' });
    expect(up.status).toBe(200);
    expect(up.body.saved).toEqual({ path: 'uploads/scan.png', size: body.length });
    expect(up.body.att).toMatchObject({ name: 'scan.png', size: body.length, contentType: 'image/png', tableId: 'orders', fieldId: 'scan' });
    expect((await storage.stat('app1', up.body.att.path)).size).toBe(body.length);

    const get = (p) => request(x.app).get('/web0/api/app1/down').query({ p, name: 'scan.png' }).buffer(true).parse((res, cb) => {
      const chunks = [];
      res.on('data', (c) => chunks.push(c));
      res.on('end', () => cb(null, Buffer.concat(chunks)));
    });
    const full = await get('uploads/scan.png');
    expect(full.status).toBe(200);
    expect(Buffer.compare(full.body, body)).toBe(0);
    expect(full.headers).toMatchObject({ 'content-type': 'image/png', 'content-length': String(body.length), 'content-disposition': 'inline; filename=scan.png' });
    const etag = full.headers.etag;
    expect(etag).toMatch(/^"[0-9a-f]+"$/);

    const part = await get('uploads/scan.png').set('Range', 'bytes=100-199');
    expect(part.status).toBe(206);
    expect(part.headers['content-range']).toBe(`bytes 100-199/${body.length}`);
    expect(Buffer.compare(part.body, body.subarray(100, 200))).toBe(0);
    // the S3 ETag is strong: If-Range and If-Match hold
    expect((await get('uploads/scan.png').set('Range', 'bytes=0-9').set('If-Range', etag)).status).toBe(206);
    expect((await get('uploads/scan.png').set('If-Match', etag)).status).toBe(200);
    expect((await get('uploads/scan.png').set('If-None-Match', etag)).status).toBe(304);
    expect((await get(up.body.att.path)).body.length).toBe(body.length);

    const missing = await get('uploads/none.png');
    expect(missing.status).toBe(404);
  });
});

test('without the AWS SDK installed, constructing S3FileStorage throws a ConfigError naming the packages to install', () => {
  // a child process in which @aws-sdk/* cannot be resolved
  const hide = `const M = require('module'); const orig = M._resolveFilename;
    M._resolveFilename = function (r, ...a) { if (r.startsWith('@aws-sdk/')) { const e = new Error("Cannot find module '" + r + "'"); e.code = 'MODULE_NOT_FOUND'; throw e; } return orig.call(this, r, ...a); };`;
  const out = execFileSync(process.execPath, ['-e', `${hide}
    const { S3FileStorage, createApiRouter } = require(${JSON.stringify(path.join(__dirname, '..'))});
    try { new S3FileStorage({ bucket: 'b' }); console.log('constructed'); } catch (e) { console.log(e.name, e.field, e.message); }`], { encoding: 'utf8' });
  expect(out.trim()).toBe('ConfigError storage scriptable-api: invalid storage: S3FileStorage needs the packages @aws-sdk/client-s3 and @aws-sdk/lib-storage (optional peer dependencies): npm install @aws-sdk/client-s3 @aws-sdk/lib-storage');
});

describe('S3FileStorage.put of a local file (an upload\'s temporary file)', () => {
  const fs = require('node:fs');
  const os = require('node:os');
  let dir;
  beforeAll(() => (dir = fs.mkdtempSync(path.join(os.tmpdir(), 'sapi-s3-local-'))));
  afterAll(() => fs.rmSync(dir, { recursive: true, force: true }));

  test.each([
    ['one part (PutObject)', 3 * 1024 * 1024],
    ['several parts read from the file, the last one short', 13 * 1024 * 1024 + 7],
  ])('%s', async (_name, size) => {
    const file = path.join(dir, `f${size}`);
    const bytes = crypto.randomBytes(size);
    fs.writeFileSync(file, bytes);
    const unread = Readable.from([Buffer.from('never read')]);
    const put = await storage.put('app1', `local/${size}.bin`, unread, { localPath: file, contentType: 'application/x-test' });
    expect(put).toEqual({ size, etag: expect.stringMatching(/^"/) });
    const info = await storage.stat('app1', `local/${size}.bin`);
    expect([info.size, info.contentType]).toEqual([size, 'application/x-test']);
    const back = await text((await storage.get('app1', `local/${size}.bin`)).stream);
    expect(Buffer.compare(back, bytes)).toBe(0);
  }, 60_000);

  test('a multipart upload whose part fails is aborted and stores nothing', async () => {
    const file = path.join(dir, 'fails');
    fs.writeFileSync(file, Buffer.alloc(12 * 1024 * 1024, 1));
    // the real client and server, with part 2's request failing on the way
    const real = storage.client;
    const sent = [];
    const client = {
      send(cmd) {
        const name = cmd.constructor.name;
        sent.push(name);
        const done = name === 'UploadPartCommand' && cmd.input.PartNumber === 2 ? Promise.reject(new Error('part 2 failed')) : real.send(cmd);
        if (name === 'UploadPartCommand') done.then(() => sent.push('part settled'), () => sent.push('part settled'));
        return done;
      },
    };
    const s = new S3FileStorage({ bucket: s3.bucket, client });
    await expect(s.put('app1', 'x.bin', Readable.from([]), { localPath: file })).rejects.toThrow('part 2 failed');
    expect(sent[0]).toBe('CreateMultipartUploadCommand');
    expect(sent).toContain('AbortMultipartUploadCommand');
    // (the abort comes once every part sent has settled: a part stored after it would stay)
    expect(sent.lastIndexOf('part settled')).toBeLessThan(sent.indexOf('AbortMultipartUploadCommand'));
    expect(sent.filter((x) => x === 'part settled')).toHaveLength(sent.filter((x) => x === 'UploadPartCommand').length);
    expect(sent).not.toContain('CompleteMultipartUploadCommand');
    expect(await storage.stat('app1', 'x.bin')).toBeNull();
  });

  test.each([
    ['one part (PutObject)', 1000],
    ['several parts', 12 * 1024 * 1024 + 3],
  ])('%s: a file removed while it goes up (its request ended) is still stored whole; the host lives', async (_name, size) => {
    const file = path.join(dir, `removed-${size}`);
    const bytes = crypto.randomBytes(size);
    fs.writeFileSync(file, bytes);
    // the real client and server; the file goes away once the first request is on its way
    const real = storage.client;
    const client = {
      send(cmd) {
        if (fs.existsSync(file)) fs.unlinkSync(file);
        return real.send(cmd);
      },
    };
    const s = new S3FileStorage({ bucket: s3.bucket, client, queueSize: 1 });
    const uncaught = [];
    const onUncaught = (e) => uncaught.push(e);
    process.prependListener('uncaughtException', onUncaught);
    try {
      const put = await s.put('app1', `removed/${size}.bin`, Readable.from([]), { localPath: file });
      expect(put.size).toBe(size);
      await new Promise((r) => setTimeout(r, 100)); // (a stray 'error' event comes on a later tick)
    } finally {
      process.removeListener('uncaughtException', onUncaught);
    }
    expect(uncaught.map((e) => e.message)).toEqual([]);
    const back = await text((await s.get('app1', `removed/${size}.bin`)).stream);
    expect(Buffer.compare(back, bytes)).toBe(0);
  }, 60_000);

  test('a one-part upload that fails leaves no descriptor open on its file', async () => {
    const file = path.join(dir, 'small-fails');
    fs.writeFileSync(file, Buffer.alloc(1000, 1));
    const client = { send: () => Promise.reject(new Error('no service')) };
    const s = new S3FileStorage({ bucket: s3.bucket, client });
    for (let i = 0; i < 5; i++) await expect(s.put('app1', 'y.bin', Readable.from([]), { localPath: file })).rejects.toThrow('no service');
    const openOnFile = () => descriptorsOn(file);
    // (a destroyed stream closes its descriptor once its open has completed: wait for that, not longer)
    for (const end = Date.now() + 3000; openOnFile().length > 0 && Date.now() < end; ) await new Promise((r) => setTimeout(r, 10));
    expect(openOnFile()).toEqual([]);
  });
});

describe('a storage that does not answer', () => {
  const http = require('node:http');
  const net = require('node:net');
  // an endpoint that takes connections and requests and never answers (a hung service)
  let hung;
  const conns = new Set();
  beforeAll(async () => {
    hung = net.createServer((s) => {
      conns.add(s);
      s.on('close', () => conns.delete(s));
      s.resume();
    });
    await new Promise((r) => hung.listen(0, '127.0.0.1', r));
  });
  afterAll(() => {
    for (const s of conns) s.destroy();
    hung.close();
  });
  const until = async (what, ms = 10_000) => {
    for (const end = Date.now() + ms; !what() && Date.now() < end; ) await new Promise((r) => setTimeout(r, 20));
    return what();
  };
  const hungStorage = () => s3.storage({ endpoint: `http://127.0.0.1:${hung.address().port}` });

  test('File downloads whose clients left release their storage connections, and close() ends', async () => {
    const x = oneApi(`export function down(ctx) { return { storagePath: 'f.bin' } }`, {}, { storage: hungStorage() }, {});
    x.registry.putApi('app1', { path: 'down', call: { script: 'main.js', function: 'down' }, returnType: 'File' });
    const server = x.app.listen(0, '127.0.0.1');
    await new Promise((r) => server.once('listening', r));
    const reqs = Array.from({ length: 5 }, () => {
      const req = http.get(`http://127.0.0.1:${server.address().port}/web0/api/app1/down`);
      req.on('error', () => undefined);
      return req;
    });
    try {
      expect(await until(() => conns.size === 5)).toBe(true); // (each waits for the storage's stat)
      for (const req of reqs) req.destroy();
      // the clients are gone: their storage requests end, and the router has nothing left to wait for
      expect(await until(() => conns.size === 0)).toBe(true);
      await x.router.close();
    } finally {
      server.close();
    }
  }, 30_000);

  test('a multipart upload abandoned while the service hangs closes its file at once and settles', async () => {
    const fs = require('node:fs');
    const os = require('node:os');
    // a service that starts multipart uploads, then answers nothing (parts, abort)
    const sockets = new Set();
    const half = http.createServer((req, res) => {
      if (req.method === 'POST' && req.url.includes('uploads')) {
        res.setHeader('Content-Type', 'application/xml');
        res.end('<?xml version="1.0" encoding="UTF-8"?><InitiateMultipartUploadResult><Bucket>b</Bucket><Key>k</Key><UploadId>u1</UploadId></InitiateMultipartUploadResult>');
      } else req.resume();
    });
    half.on('connection', (sock) => {
      sockets.add(sock);
      sock.on('close', () => sockets.delete(sock));
    });
    await new Promise((r) => half.listen(0, '127.0.0.1', r));
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'sapi-s3-hang-'));
    const file = path.join(dir, 'up.bin');
    fs.writeFileSync(file, Buffer.alloc(12 * 1024 * 1024, 1));
    const s = s3.storage({ endpoint: `http://127.0.0.1:${half.address().port}` });
    const openOnFile = () => descriptorsOn(file).length;
    try {
      const ac = new AbortController();
      // (as the router gives it: a stream over the file too, which a storage that reads localPath leaves unread)
      const unread = fs.createReadStream(file);
      unread.on('error', () => undefined);
      const put = s.put('app1', 'hang.bin', unread, { localPath: file, signal: ac.signal });
      const settled = put.then(() => 'stored', (e) => e.name);
      expect(await until(() => sockets.size >= 2)).toBe(true); // (the parts are on their way)
      ac.abort(); // the request ended
      expect(await until(() => openOnFile() === 0, 5000)).toBe(true);
      const t0 = Date.now();
      expect(await settled).not.toBe('stored');
      expect(Date.now() - t0).toBeLessThan(20_000);
    } finally {
      for (const sock of sockets) sock.destroy();
      half.close();
      fs.rmSync(dir, { recursive: true, force: true });
    }
  }, 40_000);

  test('saveStorage of a call that timed out releases its storage connection', async () => {
    const x = oneApi(
      `export function fn(ctx) { return ctx.getParts()[0].saveStorage('up.bin') }`,
      {},
      { storage: hungStorage(), scriptTimeoutMs: 1000 },
      {},
    );
    try {
      const res = await request(x.app).post('/web0/api/app1/p').attach('f', Buffer.alloc(1000, 7), 'up.bin');
      expect([res.status, res.body.code]).toEqual([500, 270200]);
      expect(await until(() => conns.size === 0)).toBe(true);
    } finally {
      await x.router.close();
    }
  }, 30_000);
});
