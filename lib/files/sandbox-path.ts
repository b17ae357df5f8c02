/**
 * Paths given by scripts, confined to `<root>/<appId>/` (the local sandbox or shared storage):
 * validation, symlink-aware resolution, and atomic writes (temp file + rename) into it.
 */
import * as fs from 'node:fs';
import * as path from 'node:path';
import { randomBytes } from 'node:crypto';
import type { Readable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import { ApiError } from '../errors';

/** The two file areas of an app: `sandbox` (`sandboxDir`) and `storage` (`storageDir`). */
export type FileArea = 'sandbox' | 'storage';

/** A file written into an app's area. */
export interface SavedFile {
  /** Path relative to the app root, `/`-separated (what the script asked for, normalized). */
  path: string;
  /** Size in bytes. */
  size: number;
}

const outside = (message: string) => new ApiError('PATH_OUTSIDE_SANDBOX', message);
const show = (p: string) => JSON.stringify(p.length > 200 ? `${p.slice(0, 200)}...` : p);

/** Refuses an app id that is not one plain path segment. */
export function checkAppId(appId: string): void {
  if (typeof appId !== 'string' || appId === '' || appId === '.' || /[/\\\0]/.test(appId) || appId.includes('..')) {
    throw outside('invalid app id');
  }
}

/** The path's segments; refuses anything that could name a file outside the app root. */
function segmentsOf(userPath: string): string[] {
  if (typeof userPath !== 'string' || userPath === '') throw outside('the path is empty');
  if (userPath.includes('\0')) throw outside(`the path ${show(userPath)} contains a NUL byte`);
  if (userPath.includes('\\')) throw outside(`the path ${show(userPath)} contains a backslash`);
  if (userPath.startsWith('/') || /^[a-zA-Z]:/.test(userPath)) throw outside(`the path ${show(userPath)} is absolute`);
  const segments = userPath.split('/').filter((s) => s !== '' && s !== '.');
  if (segments.includes('..')) throw outside(`the path ${show(userPath)} leaves the sandbox`);
  if (segments.length === 0) throw outside(`the path ${show(userPath)} names no file`);
  return segments;
}

const isInside = (real: string, rootReal: string) => real === rootReal || real.startsWith(rootReal + path.sep);
const code = (err: unknown) => (err as NodeJS.ErrnoException)?.code;
/** The longest path (bytes, with its NUL) and file name the system's calls take (Linux; macOS: 1024). */
const PATH_MAX = process.platform === 'darwin' ? 1024 : 4096;
const NAME_MAX = 255;
const tooLong = (userPath: string) => outside(`the path ${show(userPath)} is too long for the file system`);
/** A write whose target is a directory (PATH_OUTSIDE_SANDBOX, 400). */
export const namesDirectory = (userPath: string) => outside(`the path ${show(userPath)} names a directory`);
/** An unexpected file-system failure, without the host path Node puts in its messages. */
const hostFailure = (userPath: string, err: unknown) =>
  err instanceof ApiError ? err : new ApiError('HOST_ERROR', `file operation on ${show(userPath)} failed (${code(err) ?? 'error'})`);

/**
 * Resolves a script-given relative path inside `<root>/<appId>/`. Refuses absolute paths, `..`
 * segments, NUL bytes, backslashes, empty paths, and paths that go through a symlink (or end on
 * one) leading outside the app root or nowhere. With `forWrite`, creates the app root and the
 * parent directories, one at a time, each checked before the next is made. The file itself
 * need not exist. Throws ApiError FILES_NOT_CONFIGURED when root is undefined,
 * PATH_OUTSIDE_SANDBOX otherwise (messages show the script's path, never host paths).
 */
export async function resolveAppPath(root: string | undefined, appId: string, userPath: string, opts?: { forWrite?: boolean }): Promise<string> {
  if (typeof root !== 'string' || root === '') throw new ApiError('FILES_NOT_CONFIGURED');
  checkAppId(appId);
  const segments = segmentsOf(userPath);
  const forWrite = opts?.forWrite === true;
  const appRoot = path.join(path.resolve(root), appId);
  const target = path.join(appRoot, ...segments);
  // (refused before a directory is made: a write failing deep down left every level above it)
  if (forWrite && (Buffer.byteLength(target) >= PATH_MAX || segments.some((s) => Buffer.byteLength(s) > NAME_MAX))) throw tooLong(userPath);
  if (forWrite) await fs.promises.mkdir(appRoot, { recursive: true }).catch((err) => Promise.reject(hostFailure(userPath, err)));
  let rootReal: string;
  try {
    rootReal = await fs.promises.realpath(appRoot);
  } catch (err) {
    if (code(err) === 'ENOENT') return target; // nothing of this app exists yet: nothing to follow
    throw hostFailure(userPath, err);
  }
  let current = appRoot;
  for (let i = 0; i < segments.length; i++) {
    current = path.join(current, segments[i]);
    const isLast = i === segments.length - 1;
    if (forWrite && !isLast) {
      try {
        await fs.promises.mkdir(current);
      } catch (err) {
        if (code(err) === 'ENAMETOOLONG') throw tooLong(userPath);
        if (code(err) !== 'EEXIST') throw outside(`cannot create the directories of ${show(userPath)} (${code(err) ?? 'error'})`);
      }
    }
    let stat: fs.Stats;
    try {
      stat = await fs.promises.lstat(current);
    } catch (err) {
      if (code(err) === 'ENOENT' || code(err) === 'ENOTDIR') break; // the rest does not exist
      if (code(err) === 'ENAMETOOLONG') {
        if (forWrite) throw tooLong(userPath);
        break; // (a name no file system holds: nothing there)
      }
      throw hostFailure(userPath, err);
    }
    if (stat.isSymbolicLink()) {
      let real: string;
      try {
        real = await fs.promises.realpath(current);
      } catch {
        throw outside(`the path ${show(userPath)} goes through a broken link`);
      }
      if (!isInside(real, rootReal)) throw outside(`the path ${show(userPath)} leads outside the sandbox through a link`);
      if (!isLast && !(await fs.promises.stat(real)).isDirectory()) throw outside(`a parent of ${show(userPath)} is not a directory`);
    } else if (!isLast && !stat.isDirectory()) {
      if (forWrite) throw outside(`a parent of ${show(userPath)} is not a directory`);
      break;
    }
  }
  return target;
}

/**
 * A fresh temporary name beside `dest` (`.<name>.<random>.tmp`), within the 255 bytes a file
 * name may have whatever the length of `dest`'s name.
 */
export function tempPathFor(dest: string): string {
  const name = path.basename(dest);
  const random = randomBytes(6).toString('hex');
  return path.join(path.dirname(dest), Buffer.byteLength(name) <= 200 ? `.${name}.${random}.tmp` : `.${random}.tmp`);
}

/** Writes into `dest` through a temp file in the same directory, then renames it over `dest`. */
async function writeAtomic(dest: string, userPath: string, write: (tmp: string) => Promise<void>): Promise<number> {
  const tmp = tempPathFor(dest);
  try {
    await write(tmp);
    const { size } = await fs.promises.stat(tmp);
    await fs.promises.rename(tmp, dest);
    // (a rename between two links to one file does nothing and leaves `tmp`: a part linked again
    // where it is already linked, as a second save at the same path)
    await fs.promises.rm(tmp, { force: true });
    return size;
  } catch (err) {
    await fs.promises.rm(tmp, { force: true }).catch(() => undefined);
    if (code(err) === 'EISDIR' || code(err) === 'ENOTEMPTY' || code(err) === 'EEXIST') throw namesDirectory(userPath);
    if (code(err) === 'ENAMETOOLONG') throw tooLong(userPath);
    throw hostFailure(userPath, err);
  }
}

/**
 * A script-given path as the app root's relative, `/`-separated form (`./a//b` → `a/b`); throws
 * PATH_OUTSIDE_SANDBOX for any path that could leave the root (see resolveAppPath).
 */
export const normalizeAppPath = (userPath: string): string => segmentsOf(userPath).join('/');
const relative = normalizeAppPath;

/**
 * Saves `data` at `userPath` inside `<root>/<appId>/` (parents created, existing file replaced
 * atomically). Returns the path relative to the app root and the size.
 */
export async function saveBufferTo(root: string | undefined, appId: string, userPath: string, data: Buffer): Promise<SavedFile> {
  const dest = await resolveAppPath(root, appId, userPath, { forWrite: true });
  const size = await writeAtomic(dest, userPath, (tmp) => fs.promises.writeFile(tmp, data, { flag: 'wx' }));
  return { path: relative(userPath), size };
}

/**
 * Copies the host file `srcAbsPath` (e.g. an upload's temp file; trusted, not checked) to
 * `userPath` inside `<root>/<appId>/`. Throws ApiError FILE_NOT_FOUND when the source is missing.
 */
export async function copyFileTo(root: string | undefined, appId: string, userPath: string, srcAbsPath: string): Promise<SavedFile> {
  if (!(await fs.promises.stat(srcAbsPath).then((s) => s.isFile(), () => false))) {
    throw new ApiError('FILE_NOT_FOUND', 'the file to save does not exist');
  }
  const dest = await resolveAppPath(root, appId, userPath, { forWrite: true });
  const size = await writeAtomic(dest, userPath, (tmp) => linkOrCopy(srcAbsPath, tmp));
  return { path: relative(userPath), size };
}

/**
 * A hard link when `src` is on the same file system (no bytes copied: a 1 GiB upload saves at
 * once), a copy otherwise. The caller must not change `src` in place afterwards.
 */
async function linkOrCopy(src: string, tmp: string): Promise<void> {
  try {
    await fs.promises.link(src, tmp);
  } catch (err) {
    if (code(err) === 'ENOENT') throw err;
    await fs.promises.copyFile(src, tmp, fs.constants.COPYFILE_EXCL);
  }
}

/**
 * Writes `stream` to `userPath` inside `<root>/<appId>/` (parents created, existing file replaced
 * atomically), with backpressure. Returns the path relative to the app root and the size.
 */
export async function saveStreamTo(root: string | undefined, appId: string, userPath: string, stream: Readable): Promise<SavedFile> {
  const dest = await resolveAppPath(root, appId, userPath, { forWrite: true });
  const size = await writeAtomic(dest, userPath, (tmp) => pipeline(stream, fs.createWriteStream(tmp, { flags: 'wx' })));
  return { path: relative(userPath), size };
}
