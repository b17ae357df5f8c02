'use strict';
// File responses over real HTTP: types from the name, RFC 6266 names, ETag and Last-Modified,
// conditional GET (304 / 412), ranges (206 / 416), HEAD, 404s, and a client that goes away
// mid-download releasing the file handle.
const fs = require('node:fs');
const http = require('node:http');
const os = require('node:os');
const path = require('node:path');
const request = require('supertest');
const { oneApi } = require('./helpers/app');
const { contentDisposition } = require('../dist/cjs/return-types/disposition.js');

const root = fs.mkdtempSync(path.join(os.tmpdir(), 'sapi-fileres-'));
const sandboxDir = path.join(root, 'sandbox');
const storageDir = path.join(root, 'storage');
const content = Buffer.from('0123456789abcdefghij'); // 20 bytes
fs.mkdirSync(path.join(sandboxDir, 'app1', 'docs'), { recursive: true });
fs.mkdirSync(path.join(storageDir, 'app1', 'media'), { recursive: true });
fs.writeFileSync(path.join(sandboxDir, 'app1', 'docs', 'data.txt'), content);
fs.writeFileSync(path.join(sandboxDir, 'app1', 'docs', 'empty.bin'), '');
fs.writeFileSync(path.join(storageDir, 'app1', 'media', 'clip.mp4'), content);
const big = path.join(sandboxDir, 'app1', 'big.bin');
fs.writeFileSync(big, Buffer.alloc(32 * 1024 * 1024, 5));

const { app, router } = oneApi(
  `export function fn(ctx) {
    const r = JSON.parse(ctx.query.r);
    if (r.type) ctx.response.setContentType(r.type);
    if (r.status) ctx.response.setStatus(r.status);
    return r.file;
  }`,
  { returnType: 'File' },
  { sandboxDir, storageDir },
);
const url = (file, extra = {}) => `/web0/api/app1/p?r=${encodeURIComponent(JSON.stringify({ file, ...extra }))}`;
const DATA = url({ path: 'docs/data.txt' });
let server;
beforeAll(() => new Promise((r) => (server = app.listen(0, '127.0.0.1', r))));
afterAll(async () => {
  server.closeAllConnections?.();
  await new Promise((r) => server.close(r));
  await router.close();
  fs.rmSync(root, { recursive: true, force: true });
});

describe('headers', () => {
  test('type from the name (mime-types), length, Last-Modified, a weak ETag, nosniff, Accept-Ranges', async () => {
    const res = await request(app).get(DATA);
    expect(res.status).toBe(200);
    expect(res.text).toBe(content.toString());
    const mtime = fs.statSync(path.join(sandboxDir, 'app1', 'docs', 'data.txt')).mtime;
    expect(res.headers).toMatchObject({
      'content-type': 'text/plain; charset=utf-8',
      'content-length': '20',
      'last-modified': mtime.toUTCString(),
      etag: expect.stringMatching(/^W\/"14-[0-9a-f]+"$/),
      'x-content-type-options': 'nosniff',
      'accept-ranges': 'bytes',
      'content-disposition': 'attachment; filename=data.txt',
    });
  });

  test.each([
    ['a.pdf', 'application/pdf'],
    ['clip.MP4', 'video/mp4'],
    ['pic.webp', 'image/webp'],
    ['sheet.xlsx', 'application/vnd.openxmlformats-officedocument.spreadsheetml.sheet'],
    ['font.woff2', 'font/woff2'],
    ['page.html', 'text/html; charset=utf-8'],
    ['noext', 'application/octet-stream'],
    ['weird.zzzz', 'application/octet-stream'],
  ])('%s is sent as %s', async (name, type) => {
    const res = await request(app).get(url({ path: 'docs/data.txt', name }));
    expect(res.headers['content-type']).toBe(type);
  });

  test.each([
    // a bare word is no extension (mime-types alone would take it for one)
    ['html', 'application/octet-stream'],
    ['pdf', 'application/octet-stream'],
    ['.html', 'application/octet-stream'],
    // a name with a `/` is no content type (mime-types alone would send it as one)
    ['image/svg+xml', 'application/octet-stream'],
    ['text/html; charset=utf-7', 'application/octet-stream'],
    ['../../etc/passwd', 'application/octet-stream'],
    ['reports/q1.pdf', 'application/pdf'],
    // the name as it is sent: trimmed, without control characters
    ['report.pdf ', 'application/pdf'],
    ['page.ht\r\nml', 'text/html; charset=utf-8'],
  ])('only the extension of the name %j gives the type: %s', async (name, type) => {
    const res = await request(app).get(url({ path: 'docs/data.txt', name }));
    expect([res.status, res.headers['content-type']]).toEqual([200, type]);
  });

  test.each(['dir/报告', 'x/y\r\nSet-Cookie: a=b'])('a name %j that is no header value as a type is sent (not a 500)', async (name) => {
    const res = await request(app).get(url({ path: 'docs/data.txt', name }));
    expect([res.status, res.headers['content-type'], res.body.toString()]).toEqual([200, 'application/octet-stream', content.toString()]);
    expect(res.headers['set-cookie']).toBeUndefined();
  });

  test("the script's content type wins over the name's", async () => {
    const res = await request(app).get(url({ path: 'docs/data.txt' }, { type: 'application/x-custom' }));
    expect(res.headers['content-type']).toBe('application/x-custom');
  });

  test('storagePath reads shared storage; path wins over it', async () => {
    const shared = await request(app).get(url({ storagePath: 'media/clip.mp4', contentDisposition: 'inline' }));
    expect(shared.headers['content-type']).toBe('video/mp4');
    expect(shared.headers['content-disposition']).toBe('inline; filename=clip.mp4');
    const both = await request(app).get(url({ path: 'docs/data.txt', storagePath: 'media/clip.mp4', name: 'x.txt' }));
    expect(both.headers['content-type']).toBe('text/plain; charset=utf-8');
  });

  test.each([
    ['INLINE', 'inline'],
    [' Inline ', 'inline'],
    ['Attachment', 'attachment'],
    ['preview', 'attachment'],
  ])('contentDisposition %j is read as RFC 6266 reads a disposition type (case-insensitive): %s', async (given, type) => {
    const res = await request(app).get(url({ path: 'docs/data.txt', contentDisposition: given }));
    expect(res.headers['content-disposition']).toBe(`${type}; filename=data.txt`);
  });
});

describe('Content-Disposition (RFC 6266)', () => {
  test.each([
    ['report.pdf', 'attachment', 'attachment; filename=report.pdf'],
    ['报告 2026.pdf', 'attachment', `attachment; filename="__ 2026.pdf"; filename*=UTF-8''%E6%8A%A5%E5%91%8A%202026.pdf`],
    ['résumé.txt', 'inline', `inline; filename=resume.txt; filename*=UTF-8''r%C3%A9sum%C3%A9.txt`],
    ['a"b".txt', 'attachment', 'attachment; filename=a_b_.txt'],
    ['evil\r\nSet-Cookie: x=1.txt', 'attachment', 'attachment; filename="evilSet-Cookie: x=1.txt"'],
    ['../../etc/passwd', 'attachment', 'attachment; filename=.._.._etc_passwd'],
    ['C:\\dir\\f.txt', 'attachment', 'attachment; filename="C:_dir_f.txt"'],
    ['..', 'attachment', 'attachment; filename=download'],
    ['100%.txt', 'attachment', `attachment; filename=100_.txt; filename*=UTF-8''100%25.txt`],
  ])('%j (%s)', (name, kind, expected) => {
    expect(contentDisposition(kind, name)).toBe(expected);
  });

  test('on the wire, a UTF-8 name and a name with CR/LF', async () => {
    const res = await request(app).get(url({ path: 'docs/data.txt', name: '报告 2026.pdf' }));
    expect(res.headers['content-disposition']).toBe(`attachment; filename="__ 2026.pdf"; filename*=UTF-8''%E6%8A%A5%E5%91%8A%202026.pdf`);
    const crlf = await request(app).get(url({ path: 'docs/data.txt', name: 'a\r\nX-Injected: 1' }));
    expect(crlf.status).toBe(200);
    expect(crlf.headers['x-injected']).toBeUndefined();
  });

  test('a name with a lone surrogate (not well-formed UTF-16) is sent with U+FFFD in its place', async () => {
    // (the script gets it from JSON.parse of '"a\\ud800b.txt"': any script may make one)
    const res = await request(app).get(url({ path: 'docs/data.txt', name: 'a\ud800b.txt' }));
    expect(res.status).toBe(200);
    expect(res.headers['content-disposition']).toBe(`attachment; filename=a_b.txt; filename*=UTF-8''a%EF%BF%BDb.txt`);
    expect(res.text).toBe(content.toString());
  });
});

describe('conditional requests', () => {
  let etag;
  let lastModified;
  beforeAll(async () => {
    const res = await request(app).get(DATA);
    etag = res.headers.etag;
    lastModified = res.headers['last-modified'];
  });

  test('If-None-Match with the ETag: 304 without a body', async () => {
    const res = await request(app).get(DATA).set('If-None-Match', etag);
    expect(res.status).toBe(304);
    expect(res.headers.etag).toBe(etag);
    expect(res.text ?? '').toBe('');
    expect((await request(app).get(DATA).set('If-None-Match', '"other"')).status).toBe(200);
  });

  test('If-Modified-Since at or after the modification: 304; before it: 200', async () => {
    expect((await request(app).get(DATA).set('If-Modified-Since', lastModified)).status).toBe(304);
    expect((await request(app).get(DATA).set('If-Modified-Since', new Date(Date.parse(lastModified) - 60_000).toUTCString())).status).toBe(200);
  });

  test('If-Match that fails (a weak ETag never matches strongly): 412 with the error body', async () => {
    const res = await request(app).get(DATA).set('If-Match', etag);
    expect(res.status).toBe(412);
    expect(res.body).toMatchObject({ code: 270311, requestId: res.headers['x-request-id'] });
    expect((await request(app).get(DATA).set('If-Match', '*')).status).toBe(200);
    const old = new Date(Date.parse(lastModified) - 60_000).toUTCString();
    expect((await request(app).get(DATA).set('If-Unmodified-Since', old)).status).toBe(412);
    expect((await request(app).get(DATA).set('If-Unmodified-Since', lastModified)).status).toBe(200);
  });

  test('a POST answered with a file is not conditional', async () => {
    const res = await request(app).post(DATA).set('If-None-Match', etag);
    expect(res.status).toBe(200);
    expect(res.text).toBe(content.toString());
  });
});

describe('ranges', () => {
  const ranged = (range, extra = {}) => {
    let r = request(app).get(DATA).set('Range', range);
    for (const [k, v] of Object.entries(extra)) r = r.set(k, v);
    return r;
  };

  test('bytes=0-3: 206 with Content-Range and those bytes', async () => {
    const res = await ranged('bytes=0-3');
    expect(res.status).toBe(206);
    expect(res.text).toBe('0123');
    expect(res.headers['content-range']).toBe('bytes 0-3/20');
    expect(res.headers['content-length']).toBe('4');
  });

  test('a suffix, an open end, and an end past the size', async () => {
    expect((await ranged('bytes=-5')).text).toBe('fghij');
    expect((await ranged('bytes=15-')).text).toBe('fghij');
    const past = await ranged('bytes=18-100');
    expect([past.status, past.text, past.headers['content-range']]).toEqual([206, 'ij', 'bytes 18-19/20']);
  });

  test('a suffix longer than the file is the whole file (RFC 9110 14.1.2); a zero-length suffix is unsatisfiable', async () => {
    for (const range of ['bytes=-30', 'bytes=-20', 'bytes=-30,50-60', 'bytes=50-60, -999999']) {
      const res = await ranged(range);
      expect([range, res.status, res.headers['content-range'], res.text]).toEqual([range, 206, 'bytes 0-19/20', content.toString()]);
    }
    const none = await ranged('bytes=-0');
    expect([none.status, none.headers['content-range']]).toEqual([416, 'bytes */20']);
    // a zero-byte file: a non-zero suffix is satisfiable (RFC 9110 14.1.1), no 206 can carry it: the whole (empty) file
    const empty = await request(app).get(url({ path: 'docs/empty.bin' })).set('Range', 'bytes=-5');
    expect([empty.status, empty.headers['content-length'], empty.headers['content-range']]).toEqual([200, '0', undefined]);
  });

  test('from the storage too', async () => {
    const res = await request(app).get(url({ storagePath: 'media/clip.mp4' })).set('Range', 'bytes=10-12');
    expect([res.status, res.headers['content-range']]).toEqual([206, 'bytes 10-12/20']);
    expect(res.body.toString()).toBe('abc');
  });

  test('unsatisfiable: 416 with Content-Range bytes */size and the error body', async () => {
    const res = await ranged('bytes=50-60');
    expect(res.status).toBe(416);
    expect(res.headers['content-range']).toBe('bytes */20');
    expect(res.body).toMatchObject({ code: 270310 });
    const empty = await request(app).get(url({ path: 'docs/empty.bin' })).set('Range', 'bytes=0-');
    expect(empty.status).toBe(416);
  });

  test('several ranges or a malformed header: the whole file', async () => {
    const multi = await ranged('bytes=0-1,5-6');
    expect([multi.status, multi.text]).toEqual([200, content.toString()]);
    const bad = await ranged('lines=1-2');
    expect([bad.status, bad.text]).toEqual([200, content.toString()]);
  });

  test('If-Range: the range when the ETag or date still holds, else the whole file', async () => {
    const first = await request(app).get(DATA);
    const byDate = await ranged('bytes=0-1', { 'If-Range': first.headers['last-modified'] });
    expect(byDate.status).toBe(206);
    const stale = await ranged('bytes=0-1', { 'If-Range': '"something-else"' });
    expect(stale.status).toBe(200);
    // the local storage's ETags are weak: If-Range needs a strong one
    const weak = await ranged('bytes=0-1', { 'If-Range': first.headers.etag });
    expect(weak.status).toBe(200);
  });

  test('a script-set status other than 200 is kept, without ranges', async () => {
    const res = await request(app).get(url({ path: 'docs/data.txt' }, { status: 203 })).set('Range', 'bytes=0-1');
    expect([res.status, res.text]).toEqual([203, content.toString()]);
  });

  test.each([
    [204, undefined],
    [205, '0'],
    [304, undefined],
  ])('a script-set %i (a status without content) goes without the file; the next response on the connection is read where it begins', async (status, length) => {
    const net = require('node:net');
    const raw = await new Promise((resolve, reject) => {
      const socket = net.connect(server.address().port, '127.0.0.1');
      let text = '';
      socket.on('data', (d) => {
        text += d;
        // both answers in: the second one's body (the file) ends the stream of bytes
        if (text.split('HTTP/1.1 ').length === 3 && text.endsWith(content.toString())) socket.end();
      });
      socket.on('end', () => resolve(text));
      socket.on('error', reject);
      socket.setTimeout(10_000, () => socket.destroy(new Error(`no second answer: ${JSON.stringify(text)}`)));
      const get = (p) => `GET ${p} HTTP/1.1\r\nHost: x\r\n\r\n`;
      socket.write(get(url({ path: 'docs/data.txt' }, { status })) + get(DATA));
    });
    const [first, second] = raw.split(/(?=HTTP\/1\.1 )/);
    const [head, body] = first.split('\r\n\r\n');
    expect(head.split('\r\n')[0]).toBe(`HTTP/1.1 ${status} ${require('node:http').STATUS_CODES[status]}`);
    expect(/content-length: (\d+)/i.exec(head)?.[1]).toBe(length);
    expect(body).toBe('');
    expect(second.startsWith('HTTP/1.1 200 OK')).toBe(true);
  });
});

describe('HEAD, empty files and 404s', () => {
  test('HEAD: the headers of GET, no body', async () => {
    const res = await request(app).head(DATA);
    expect(res.status).toBe(200);
    expect(res.headers['content-length']).toBe('20');
    expect(res.headers['content-type']).toBe('text/plain; charset=utf-8');
    expect(res.text ?? '').toBe('');
  });

  test('a zero-byte file', async () => {
    const res = await request(app).get(url({ path: 'docs/empty.bin' }));
    expect([res.status, res.headers['content-length']]).toEqual([200, '0']);
  });

  test.each([
    [{ path: '' }, 270301],
    [{ path: null, storagePath: '' }, 270301],
    [{ path: 'docs/missing.txt' }, 270301],
    [{ storagePath: 'media/missing.mp4' }, 270301],
    [{ path: 'docs' }, 270301],
  ])('%j: 404 with the error body', async (file, code) => {
    const res = await request(app).get(url(file));
    expect(res.status).toBe(404);
    expect(res.body).toEqual({ requestId: res.headers['x-request-id'], code, message: expect.any(String) });
    expect(res.headers['content-disposition']).toBeUndefined();
  });

  test.each([
    ['a file name longer than a file system allows', { path: `docs/${'n'.repeat(300)}.txt` }],
    ['a folder name longer than a file system allows', { path: `${'d'.repeat(300)}/x.txt` }],
    ['a file name longer than a file system allows, in storage', { storagePath: `media/${'n'.repeat(300)}.mp4` }],
    ['a path longer than a file system allows', { path: `${'d/'.repeat(2100)}x.txt` }],
    ['a path longer than a file system allows, in storage', { storagePath: `${'e'.repeat(200)}/`.repeat(25) + 'x.txt' }],
  ])('%s: no such file, 404 (not a host error)', async (_name, file) => {
    const res = await request(app).get(url(file));
    expect([res.status, res.body.code]).toEqual([404, 270301]);
  });

  test('paths out of the area: 400', async () => {
    for (const file of [{ path: '../secret' }, { storagePath: '/etc/passwd' }]) {
      const res = await request(app).get(url(file));
      expect([res.status, res.body.code]).toEqual([400, 270302]);
    }
  });
});

/** The descriptors of this process open on `file` (Linux: /proc/self/fd). */
function openOn(file) {
  let n = 0;
  for (const fd of fs.readdirSync('/proc/self/fd')) {
    try {
      if (fs.readlinkSync(`/proc/self/fd/${fd}`) === file) n++;
    } catch {
      // (closed while listing)
    }
  }
  return n;
}

/** Resolves once no descriptor is open on `file` (closing follows the response's end). */
async function closedOn(file) {
  const until = Date.now() + 10_000;
  while (openOn(file) !== 0 && Date.now() < until) await new Promise((r) => setTimeout(r, 20));
  expect(openOn(file)).toBe(0);
}

describe('streaming', () => {
  test('a client that goes away mid-download frees the file handle', async () => {
    expect(openOn(big)).toBe(0);
    const served = new Promise((resolve) => {
      const req = http.get({ host: '127.0.0.1', port: server.address().port, path: url({ path: 'big.bin' }) }, (res) => {
        expect(res.statusCode).toBe(200);
        let got = 0;
        res.on('data', (chunk) => {
          got += chunk.length;
          // the server stopped at the socket's backpressure, far from the end, with the file open
          if (got >= 256 * 1024 && !req.destroyed) {
            expect(openOn(big)).toBe(1);
            req.destroy();
            resolve(got);
          }
        });
      });
      req.on('error', () => undefined);
    });
    expect(await served).toBeLessThan(32 * 1024 * 1024);
    await closedOn(big);
  });

  test('a file appended to while it is sent (a growing log) arrives whole, as it was when opened', async () => {
    const log = path.join(sandboxDir, 'app1', 'grow.log');
    const size = 16 * 1024 * 1024 + 1000; // (not a whole number of read chunks)
    fs.writeFileSync(log, Buffer.alloc(size, 1));
    try {
      const res = await new Promise((resolve) => {
        const req = http.get({ host: '127.0.0.1', port: server.address().port, path: url({ path: 'grow.log' }), agent: false }, (r) => {
          let size = 0;
          let bad = 0;
          let appended = false;
          r.on('data', (c) => {
            size += c.length;
            for (const b of c) if (b !== 1) bad++;
            if (appended || size < 1024 * 1024) return;
            appended = true;
            r.pause(); // (the server has read ahead of us, but not the 16 MiB)
            fs.appendFileSync(log, Buffer.alloc(1024 * 1024, 2));
            setTimeout(() => r.resume(), 100);
          });
          r.on('end', () => resolve({ status: r.statusCode, size, bad, complete: r.complete, length: r.headers['content-length'] }));
          r.on('error', () => resolve({ status: r.statusCode, size, bad, complete: false }));
          r.on('aborted', () => undefined);
        });
        req.on('error', (error) => resolve({ error: error.code }));
      });
      expect(res).toEqual({ status: 200, size, bad: 0, complete: true, length: String(size) });
    } finally {
      await closedOn(log);
      fs.rmSync(log, { force: true });
    }
  });

  test('a whole large file arrives intact', async () => {
    const res = await new Promise((resolve, reject) => {
      http.get({ host: '127.0.0.1', port: server.address().port, path: url({ path: 'big.bin' }) }, (r) => {
        let size = 0;
        let bad = 0;
        r.on('data', (c) => {
          size += c.length;
          for (const b of c) if (b !== 5) bad++;
        });
        r.on('end', () => resolve({ size, bad, length: r.headers['content-length'] }));
      }).on('error', reject);
    });
    expect(res).toEqual({ size: 32 * 1024 * 1024, bad: 0, length: String(32 * 1024 * 1024) });
    await closedOn(big);
  });
});

test('a file replaced between its stat and its read is not sent under the old length and ETag', async () => {
  const { LocalFileStorage } = require('..');
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'sapi-fileres-race-'));
  const local = new LocalFileStorage({ root: dir });
  fs.mkdirSync(path.join(dir, 'app1'), { recursive: true });
  fs.writeFileSync(path.join(dir, 'app1', 'f.txt'), 'abc');
  // a storage whose file changes right after its stat (as a concurrent save would do)
  const storage = {
    put: (...a) => local.put(...a),
    delete: (...a) => local.delete(...a),
    async stat(...a) {
      const info = await local.stat(...a);
      fs.writeFileSync(path.join(dir, 'app1', 'f.txt.tmp'), 'abcdefghij');
      fs.renameSync(path.join(dir, 'app1', 'f.txt.tmp'), path.join(dir, 'app1', 'f.txt'));
      return info;
    },
    get: (...a) => local.get(...a),
  };
  const x = oneApi('export function fn() { return { storagePath: "f.txt" } }', { returnType: 'File' }, { storage });
  try {
    const res = await request(x.app).get('/web0/api/app1/p');
    expect(res.status).toBe(500);
    expect(res.body).toMatchObject({ code: 270602, message: "File 'f.txt' changed while it was being sent; try again" });
  } finally {
    await x.router.close();
    fs.rmSync(dir, { recursive: true, force: true });
  }
});

test('a file replaced between its stat and its read by one of the same size is not sent under the old ETag (a ranged read would splice two versions)', async () => {
  const { LocalFileStorage } = require('..');
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'sapi-fileres-race-'));
  const local = new LocalFileStorage({ root: dir });
  const file = path.join(dir, 'app1', 'f.txt');
  fs.mkdirSync(path.join(dir, 'app1'), { recursive: true });
  fs.writeFileSync(file, 'abcdefghij');
  fs.utimesSync(file, new Date(1_000_000), new Date(1_000_000));
  let replace = true;
  // a storage whose file is replaced right after its stat by another of the same length
  const storage = {
    put: (...a) => local.put(...a),
    delete: (...a) => local.delete(...a),
    async stat(...a) {
      const info = await local.stat(...a);
      if (replace) {
        fs.writeFileSync(`${file}.tmp`, 'ABCDEFGHIJ');
        fs.utimesSync(`${file}.tmp`, new Date(2_000_000), new Date(2_000_000));
        fs.renameSync(`${file}.tmp`, file);
      }
      return info;
    },
    get: (...a) => local.get(...a),
  };
  const x = oneApi('export function fn() { return { storagePath: "f.txt" } }', { returnType: 'File' }, { storage });
  try {
    const res = await request(x.app).get('/web0/api/app1/p').set('Range', 'bytes=5-');
    expect([res.status, res.body.code, res.body.message]).toEqual([500, 270602, "File 'f.txt' changed while it was being sent; try again"]);
    // the next request sends the file as it is now, under its own ETag
    replace = false;
    const next = await request(x.app).get('/web0/api/app1/p').set('Range', 'bytes=5-');
    expect([next.status, next.text, next.headers.etag]).toEqual([206, 'FGHIJ', (await local.stat('app1', 'f.txt')).etag]);
  } finally {
    await x.router.close();
    fs.rmSync(dir, { recursive: true, force: true });
  }
});

test("a File response that fails (file not found) goes without the script's headers", async () => {
  const x = oneApi('export function fn(ctx) { ctx.response.setHeader("Content-Encoding", "gzip"); ctx.response.setHeader("Cache-Control", "max-age=3600"); return { storagePath: "missing.gz" } }', { returnType: 'File' }, { storageDir });
  try {
    const res = await request(x.app).get('/web0/api/app1/p');
    expect(res.status).toBe(404);
    expect(res.headers['content-encoding']).toBeUndefined();
    expect(res.headers['cache-control']).toBeUndefined();
    expect(res.body.code).toBe(270301);
  } finally {
    await x.router.close();
  }
});

test("412 and 416 error bodies go without the script's headers too (its Content-Encoding would make them unreadable); a 304 keeps them", async () => {
  const x = oneApi('export function fn(ctx) { ctx.response.setHeader("Content-Encoding", "gzip"); ctx.response.setHeader("Cache-Control", "max-age=3600"); return { storagePath: "media/clip.mp4" } }', { returnType: 'File' }, { storageDir });
  try {
    for (const [header, value, status, code] of [['Range', 'bytes=999-', 416, 270310], ['If-Match', '"other"', 412, 270311]]) {
      const res = await request(x.app).get('/web0/api/app1/p').set(header, value);
      expect([res.status, res.body.code, res.headers['content-encoding'], res.headers['cache-control']]).toEqual([status, code, undefined, undefined]);
    }
    expect((await request(x.app).get('/web0/api/app1/p').set('Range', 'bytes=999-')).headers['content-range']).toBe('bytes */20');
    const cached = await request(x.app).get('/web0/api/app1/p').set('If-None-Match', '*');
    expect([cached.status, cached.headers['cache-control']]).toEqual([304, 'max-age=3600']);
  } finally {
    await x.router.close();
  }
});

test('a source that ends before its length (a file truncated mid-download) or sends more ends that connection; the host goes on', async () => {
  const { Readable } = require('node:stream');
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'sapi-fileres-short-'));
  fs.mkdirSync(path.join(dir, 'app1'));
  const file = path.join(dir, 'app1', 'log.bin');
  fs.writeFileSync(file, Buffer.alloc(16 * 1024 * 1024, 7));
  const info = { size: 10, modified: new Date(0), etag: '"x"' };
  // a storage whose stream does not hold the length it declared
  const storage = { put: async () => ({ size: 0 }), delete: async () => {}, stat: async () => info, get: async () => ({ ...info, stream: Readable.from([Buffer.from('more than ten bytes')]) }) };
  const x = oneApi('export function fn(ctx) { return ctx.query.s ? { storagePath: "f.bin" } : { path: "log.bin" } }', { returnType: 'File' }, { sandboxDir: dir, storage });
  const srv = await new Promise((resolve) => { const s = x.app.listen(0, '127.0.0.1', () => resolve(s)); });
  const get = (query, onData) => new Promise((resolve) => {
    const req = http.get({ host: '127.0.0.1', port: srv.address().port, path: `/web0/api/app1/p${query}`, agent: false }, (res) => {
      let got = 0;
      res.on('data', (c) => { got += c.length; onData?.(res, got); });
      res.on('end', () => resolve({ status: res.statusCode, got, complete: res.complete }));
      res.on('error', () => resolve({ status: res.statusCode, got, complete: false }));
      res.on('aborted', () => undefined);
    });
    req.on('error', () => resolve({ error: true }));
  });
  try {
    let truncated = false;
    const short = await get('', (res, got) => {
      if (truncated || got < 1024 * 1024) return;
      truncated = true;
      res.pause(); // (the server has read ahead of us, but not the 16 MiB)
      fs.truncateSync(file, 2 * 1024 * 1024);
      setTimeout(() => res.resume(), 100);
    });
    expect(truncated).toBe(true);
    expect(short.complete).not.toBe(true);
    expect(short.got).toBeLessThan(16 * 1024 * 1024);
    const long = await get('?s=1');
    expect(long.complete).not.toBe(true);
    // the host is still up, and answers the next request whole
    fs.writeFileSync(file, 'whole');
    expect(await get('')).toEqual({ status: 200, got: 5, complete: true });
  } finally {
    await new Promise((resolve) => srv.close(resolve));
    await x.router.close({ force: true });
    fs.rmSync(dir, { recursive: true, force: true });
  }
});

test.each([['a BigInt', 5n], ['a negative number', -1], ['a fraction', 2.5]])('a storage whose stat gives %s as the size: HOST_ERROR, the host goes on', async (_what, size) => {
  const { Readable } = require('node:stream');
  const info = { size, modified: new Date(0), etag: '"x"' };
  const storage = { put: async () => ({ size: 0 }), delete: async () => {}, stat: async () => info, get: async () => ({ ...info, stream: Readable.from([Buffer.from('hello')]) }) };
  const x = oneApi('export function fn() { return { storagePath: "f.bin" } }', { returnType: 'File' }, { storage });
  try {
    const res = await request(x.app).get('/web0/api/app1/p').timeout(10000);
    expect([res.status, res.body.code, res.body.message]).toEqual([500, 270602, "File 'f.bin' cannot be read: the storage gave no valid size"]);
  } finally {
    await x.router.close({ force: true });
  }
});

test("a host's own 'close' listeners on the response (a request log, a tracker of requests in flight) do not pass its listener limit during a download (Node.js would print a MaxListenersExceededWarning); the limit is restored after", async () => {
  const express = require('express');
  const host = express();
  let restored;
  const limitBack = new Promise((r) => (restored = r));
  let most = 0;
  const over = [];
  host.use((req, res, next) => {
    const setMax = res.setMaxListeners;
    res.setMaxListeners = function (n) {
      setMax.call(this, n);
      if (n === 10) restored(this.getMaxListeners());
      return this;
    };
    // (what Node.js checks on each listener added, to warn of a leak)
    const watch = (add) =>
      function (event, listener) {
        const out = add.call(this, event, listener);
        if (event !== 'close') return out;
        most = Math.max(most, this.listenerCount('close'));
        if (this.listenerCount('close') > this.getMaxListeners()) over.push(`${this.listenerCount('close')} of ${this.getMaxListeners()}`);
        return out;
      };
    res.on = watch(res.on);
    res.once = watch(res.once);
    res.addListener = watch(res.addListener);
    res.prependListener = watch(res.prependListener);
    res.once('close', () => undefined);
    res.once('close', () => undefined);
    next();
  });
  host.use('/web0/api', router);
  const res = await request(host).get(DATA);
  expect(res.status).toBe(200);
  expect(res.text).toBe(content.toString());
  expect(most).toBeGreaterThan(10); // (the pipeline's own listeners are there)
  expect(over).toEqual([]);
  expect(await limitBack).toBe(10);
});
