'use strict';
// LocalFileStorage (the default FileStorage over storageDir) on real files.
const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');
const { Readable } = require('node:stream');
const { LocalFileStorage } = require('..');

const root = fs.mkdtempSync(path.join(os.tmpdir(), 'sapi-local-'));
const storage = new LocalFileStorage({ root: path.join(root, 'store') });
afterAll(() => fs.rmSync(root, { recursive: true, force: true }));

const read = async (stream) => {
  const chunks = [];
  for await (const c of stream) chunks.push(c);
  return Buffer.concat(chunks).toString();
};

test('put from a stream (folders made), stat, get, ranges, delete', async () => {
  expect(await storage.put('app1', 'a/b/c.txt', Readable.from([Buffer.from('0123'), Buffer.from('456789')]), {})).toEqual({ size: 10 });
  expect(fs.readFileSync(path.join(root, 'store', 'app1', 'a', 'b', 'c.txt'), 'utf8')).toBe('0123456789');
  const info = await storage.stat('app1', 'a/b/c.txt');
  expect(info).toEqual({ size: 10, modified: expect.anything(), etag: expect.stringMatching(/^W\/"a-[0-9a-f]+"$/) });
  expect(info.modified.getTime()).toBe(fs.statSync(path.join(root, 'store', 'app1', 'a', 'b', 'c.txt')).mtime.getTime());
  const got = await storage.get('app1', 'a/b/c.txt');
  expect(got.size).toBe(10);
  expect(await read(got.stream)).toBe('0123456789');
  const part = await storage.get('app1', 'a/b/c.txt', { range: { start: 3, end: 5 } });
  expect([part.size, await read(part.stream)]).toEqual([10, '345']);
  await storage.delete('app1', 'a/b/c.txt');
  expect(await storage.stat('app1', 'a/b/c.txt')).toBeNull();
  await storage.delete('app1', 'a/b/c.txt'); // (none: resolves)
});

test('get reads the file as it was opened: no byte appended after it (its stream holds the size it gives)', async () => {
  const file = path.join(root, 'store', 'app1', 'grow.log');
  fs.mkdirSync(path.dirname(file), { recursive: true });
  fs.writeFileSync(file, 'first');
  const got = await storage.get('app1', 'grow.log');
  fs.appendFileSync(file, ' and more');
  expect([got.size, await read(got.stream)]).toEqual([5, 'first']);
  fs.writeFileSync(file, '');
  const empty = await storage.get('app1', 'grow.log');
  fs.appendFileSync(file, 'late');
  expect([empty.size, await read(empty.stream)]).toEqual([0, '']);
});

test('missing files and folders: null', async () => {
  expect(await storage.get('app1', 'none.txt')).toBeNull();
  expect(await storage.stat('app1', 'none.txt')).toBeNull();
  expect(await storage.stat('nobody', 'x/y.txt')).toBeNull();
  fs.mkdirSync(path.join(root, 'store', 'app1', 'dir'), { recursive: true });
  expect(await storage.get('app1', 'dir')).toBeNull();
  expect(await storage.stat('app1', 'dir')).toBeNull();
});

test('delete resolves whenever there is no such file: under a file, a folder, a name too long', async () => {
  fs.mkdirSync(path.join(root, 'store', 'app1', 'folder'), { recursive: true });
  fs.writeFileSync(path.join(root, 'store', 'app1', 'plain.txt'), 'x');
  await storage.delete('app1', 'plain.txt/child.txt');
  await storage.delete('app1', 'folder');
  await storage.delete('app1', `${'n'.repeat(300)}.txt`);
  expect(fs.existsSync(path.join(root, 'store', 'app1', 'folder'))).toBe(true);
  expect(fs.readFileSync(path.join(root, 'store', 'app1', 'plain.txt'), 'utf8')).toBe('x');
});

test('put with localPath links the file on the same file system (no copy) and leaves the stream unread', async () => {
  const src = path.join(root, 'upload.tmp');
  fs.writeFileSync(src, 'uploaded bytes');
  const stream = fs.createReadStream(src);
  expect(await storage.put('app1', 'up/u.bin', stream, { localPath: src })).toEqual({ size: 14 });
  stream.destroy();
  const dest = path.join(root, 'store', 'app1', 'up', 'u.bin');
  expect(fs.statSync(dest).ino).toBe(fs.statSync(src).ino);
  fs.rmSync(src);
  expect(fs.readFileSync(dest, 'utf8')).toBe('uploaded bytes');
});

test('a replaced file is never seen half written, and a failed write leaves the old one', async () => {
  await storage.put('app1', 'r.txt', Readable.from([Buffer.from('old')]), {});
  const failing = new Readable({
    read() {
      this.push('new and partial');
      this.destroy(new Error('source broke'));
    },
  });
  await expect(storage.put('app1', 'r.txt', failing, {})).rejects.toMatchObject({ code: 270602 });
  expect(fs.readFileSync(path.join(root, 'store', 'app1', 'r.txt'), 'utf8')).toBe('old');
  expect(fs.readdirSync(path.join(root, 'store', 'app1')).filter((n) => n.endsWith('.tmp'))).toEqual([]);
});

test('paths through links out of the app are refused', async () => {
  fs.writeFileSync(path.join(root, 'secret.txt'), 'secret');
  fs.symlinkSync(path.join(root, 'secret.txt'), path.join(root, 'store', 'app1', 'evil.txt'));
  await expect(storage.get('app1', 'evil.txt')).rejects.toMatchObject({ code: 270302 });
  await expect(storage.put('app1', 'evil.txt', Readable.from([Buffer.from('x')]), {})).rejects.toMatchObject({ code: 270302 });
  expect(fs.readFileSync(path.join(root, 'secret.txt'), 'utf8')).toBe('secret');
});

test('a root is required', () => {
  expect(() => new LocalFileStorage({})).toThrow(/root/);
  expect(new LocalFileStorage('/tmp/x').root).toBe('/tmp/x');
});
