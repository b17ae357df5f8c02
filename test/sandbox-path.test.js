'use strict';
// Script-given paths confined to <root>/<appId>/, on real temp directories.
const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');
const { resolveAppPath, saveBufferTo, copyFileTo } = require('../dist/cjs/files/sandbox-path.js');

let root;
let outside;
let appRoot;

beforeEach(() => {
  root = fs.mkdtempSync(path.join(os.tmpdir(), 'sapi-root-'));
  outside = fs.mkdtempSync(path.join(os.tmpdir(), 'sapi-outside-'));
  appRoot = path.join(root, 'app1');
  fs.mkdirSync(appRoot);
  fs.writeFileSync(path.join(outside, 'secret.txt'), 'secret');
});
afterEach(() => {
  fs.rmSync(root, { recursive: true, force: true });
  fs.rmSync(outside, { recursive: true, force: true });
});

async function rejection(promise) {
  try {
    await promise;
  } catch (err) {
    return err;
  }
  throw new Error('expected a rejection');
}

async function expectOutside(promise, messagePart) {
  const err = await rejection(promise);
  expect(err).toMatchObject({ name: 'ApiError', errorName: 'PATH_OUTSIDE_SANDBOX', code: 270302, status: 400 });
  if (messagePart) expect(err.message).toContain(messagePart);
  expect(err.message).not.toContain(root);
  expect(err.message).not.toContain(outside);
  return err;
}

describe('resolveAppPath', () => {
  test('missing root is FILES_NOT_CONFIGURED', async () => {
    for (const r of [undefined, '']) {
      const err = await rejection(resolveAppPath(r, 'app1', 'a.txt'));
      expect(err).toMatchObject({ errorName: 'FILES_NOT_CONFIGURED', code: 270303 });
    }
  });

  test('resolves inside the app root', async () => {
    expect(await resolveAppPath(root, 'app1', 'a/b.txt')).toBe(path.join(appRoot, 'a', 'b.txt'));
    expect(await resolveAppPath(root, 'app1', './x//y.txt')).toBe(path.join(appRoot, 'x', 'y.txt'));
    expect(await resolveAppPath(root, 'app1', 'dots..name')).toBe(path.join(appRoot, 'dots..name'));
    // An app with no directory yet: nothing to follow, the path is still confined.
    expect(await resolveAppPath(root, 'fresh', 'f.txt')).toBe(path.join(root, 'fresh', 'f.txt'));
  });

  test.each([
    ['../x', 'leaves the sandbox'],
    ['..', 'leaves the sandbox'],
    ['a/../../x', 'leaves the sandbox'],
    ['a/../b', 'leaves the sandbox'],
    ['a/b/../../../app2/x', 'leaves the sandbox'],
    ['/etc/passwd', 'is absolute'],
    ['//etc/passwd', 'is absolute'],
    ['C:/Windows/win.ini', 'is absolute'],
    ['a\\..\\..\\x', 'backslash'],
    ['..\\x', 'backslash'],
    ['a\0.txt', 'NUL byte'],
    ['', 'empty'],
    ['.', 'names no file'],
    ['./', 'names no file'],
  ])('refuses %j', async (p, message) => {
    await expectOutside(resolveAppPath(root, 'app1', p), message);
    await expectOutside(resolveAppPath(root, 'app1', p, { forWrite: true }), message);
  });

  test.each(['', '.', '..', 'a/b', 'a\\b', 'a\0b', '..evil'])('refuses app id %j', async (appId) => {
    await expectOutside(resolveAppPath(root, appId, 'x.txt'), 'invalid app id');
  });

  test('forWrite creates the parent directories', async () => {
    const p = await resolveAppPath(root, 'app1', 'd1/d2/f.txt', { forWrite: true });
    expect(p).toBe(path.join(appRoot, 'd1', 'd2', 'f.txt'));
    expect(fs.statSync(path.join(appRoot, 'd1', 'd2')).isDirectory()).toBe(true);
    expect(fs.existsSync(p)).toBe(false);
    // and the app root itself for a new app
    const q = await resolveAppPath(root, 'app2', 'f.txt', { forWrite: true });
    expect(fs.statSync(path.dirname(q)).isDirectory()).toBe(true);
  });

  test('a parent directory linking outside is refused (and nothing is created there)', async () => {
    fs.symlinkSync(outside, path.join(appRoot, 'link'));
    await expectOutside(resolveAppPath(root, 'app1', 'link/secret.txt'), 'through a link');
    await expectOutside(resolveAppPath(root, 'app1', 'link/sub/new.txt', { forWrite: true }), 'through a link');
    expect(fs.existsSync(path.join(outside, 'sub'))).toBe(false);
  });

  test('a nested link to a parent of the root is refused', async () => {
    fs.mkdirSync(path.join(appRoot, 'd'));
    fs.symlinkSync('../..', path.join(appRoot, 'd', 'up'));
    await expectOutside(resolveAppPath(root, 'app1', 'd/up/other-app/x.txt'), 'through a link');
  });

  test('a file linking outside, or a broken link, is refused', async () => {
    fs.symlinkSync(path.join(outside, 'secret.txt'), path.join(appRoot, 'evil.txt'));
    await expectOutside(resolveAppPath(root, 'app1', 'evil.txt'), 'through a link');
    await expectOutside(resolveAppPath(root, 'app1', 'evil.txt', { forWrite: true }), 'through a link');
    fs.symlinkSync(path.join(outside, 'not-there.txt'), path.join(appRoot, 'dangling.txt'));
    await expectOutside(resolveAppPath(root, 'app1', 'dangling.txt', { forWrite: true }), 'broken link');
    expect(fs.existsSync(path.join(outside, 'not-there.txt'))).toBe(false);
  });

  test('links that stay inside the app root are followed', async () => {
    fs.mkdirSync(path.join(appRoot, 'real'));
    fs.writeFileSync(path.join(appRoot, 'real', 'f.txt'), 'hi');
    fs.symlinkSync('real', path.join(appRoot, 'alias'));
    const p = await resolveAppPath(root, 'app1', 'alias/f.txt');
    expect(fs.readFileSync(p, 'utf8')).toBe('hi');
  });

  test('a file where a directory is needed is refused for writes', async () => {
    fs.writeFileSync(path.join(appRoot, 'file'), 'x');
    await expectOutside(resolveAppPath(root, 'app1', 'file/child.txt', { forWrite: true }), 'not a directory');
    // For reads the path simply does not exist.
    expect(await resolveAppPath(root, 'app1', 'file/child.txt')).toBe(path.join(appRoot, 'file', 'child.txt'));
  });
});

describe('saveBufferTo and copyFileTo', () => {
  test('saveBufferTo writes atomically and returns the relative path', async () => {
    const saved = await saveBufferTo(root, 'app1', './out//data.bin', Buffer.from('hello'));
    expect(saved).toEqual({ path: 'out/data.bin', size: 5 });
    expect(fs.readFileSync(path.join(appRoot, 'out', 'data.bin'), 'utf8')).toBe('hello');
    await saveBufferTo(root, 'app1', 'out/data.bin', Buffer.from('replaced'));
    expect(fs.readFileSync(path.join(appRoot, 'out', 'data.bin'), 'utf8')).toBe('replaced');
    expect(fs.readdirSync(path.join(appRoot, 'out'))).toEqual(['data.bin']);
  });

  test('saveBufferTo refuses escapes and directories', async () => {
    await expectOutside(saveBufferTo(root, 'app1', '../app2/x', Buffer.from('x')));
    fs.mkdirSync(path.join(appRoot, 'dir'));
    await expectOutside(saveBufferTo(root, 'app1', 'dir', Buffer.from('x')), 'names a directory');
    expect(fs.readdirSync(appRoot)).toEqual(['dir']);
    const err = await rejection(saveBufferTo(undefined, 'app1', 'x', Buffer.from('x')));
    expect(err.errorName).toBe('FILES_NOT_CONFIGURED');
  });

  test('saveBufferTo does not write through a link pointing outside', async () => {
    fs.symlinkSync(path.join(outside, 'secret.txt'), path.join(appRoot, 'evil.txt'));
    await expectOutside(saveBufferTo(root, 'app1', 'evil.txt', Buffer.from('pwned')));
    expect(fs.readFileSync(path.join(outside, 'secret.txt'), 'utf8')).toBe('secret');
  });

  test('any name the file system holds can be saved; a longer one is refused (400), not a host error', async () => {
    for (const name of ['n'.repeat(255), `${'報'.repeat(80)}.txt`]) {
      expect(await saveBufferTo(root, 'app1', `long/${name}`, Buffer.from('x'))).toEqual({ path: `long/${name}`, size: 1 });
      expect(fs.readFileSync(path.join(appRoot, 'long', name), 'utf8')).toBe('x');
    }
    await expectOutside(saveBufferTo(root, 'app1', `long/${'n'.repeat(256)}`, Buffer.from('x')), 'too long');
    await expectOutside(saveBufferTo(root, 'app1', `${'d'.repeat(256)}/x`, Buffer.from('x')), 'too long');
    await expectOutside(saveBufferTo(root, 'app1', `${'d'.repeat(200)}/`.repeat(25) + 'x', Buffer.from('x')), 'too long');
    expect(fs.readdirSync(path.join(appRoot, 'long')).sort()).toEqual(['n'.repeat(255), `${'報'.repeat(80)}.txt`].sort());
  });

  test('a path too long for the file system is refused before any of its directories is made', async () => {
    const before = fs.readdirSync(appRoot).sort();
    await expectOutside(saveBufferTo(root, 'app1', 'deep/' + 'd/'.repeat(2100) + 'f', Buffer.from('x')), 'too long');
    await expectOutside(saveBufferTo(root, 'app1', `wide/${'w'.repeat(256)}/f`, Buffer.from('x')), 'too long');
    expect(fs.readdirSync(appRoot).sort()).toEqual(before);
    // a deep path the file system holds is still written
    const deep = 'd/'.repeat(500) + 'f';
    expect(await saveBufferTo(root, 'app1', deep, Buffer.from('x'))).toEqual({ path: deep, size: 1 });
  });

  test('copyFileTo copies a host file; a missing source is FILE_NOT_FOUND', async () => {
    const src = path.join(outside, 'upload.tmp');
    fs.writeFileSync(src, 'uploaded bytes');
    expect(await copyFileTo(root, 'app1', 'uploads/u.txt', src)).toEqual({ path: 'uploads/u.txt', size: 14 });
    expect(fs.readFileSync(path.join(appRoot, 'uploads', 'u.txt'), 'utf8')).toBe('uploaded bytes');
    const err = await rejection(copyFileTo(root, 'app1', 'uploads/v.txt', path.join(outside, 'gone.tmp')));
    expect(err).toMatchObject({ errorName: 'FILE_NOT_FOUND', code: 270301 });
    expect(fs.readdirSync(path.join(appRoot, 'uploads'))).toEqual(['u.txt']);
  });
});
