/**
 * LocalFileStorage: the default FileStorage, a folder on this machine (`<root>/<appId>/<path>`).
 * Every path goes through resolveAppPath (no escape through `..` or links); writes are atomic.
 */
import * as fs from 'node:fs';
import { Readable } from 'node:stream';
import etag from 'etag';
import { ApiError, ConfigError } from '../errors';
import { onlyKnownKeys, type Same } from '../validations';
import { copyFileTo, resolveAppPath, saveStreamTo } from './sandbox-path';
import type { ByteRange, FileStorage, StoragePutInfo, StoragePutResult, StoredFile, StoredFileInfo } from './storage';

/** Options of LocalFileStorage. */
export interface LocalFileStorageOptions {
  /** The folder holding one sub-folder per app. Created on first write. */
  root: string;
}

/** The keys of LocalFileStorageOptions (the build fails when one is added to the type and not here). */
const OPTION_KEYS = ['root'] as const;
const keysMatch: Same<keyof LocalFileStorageOptions, (typeof OPTION_KEYS)[number]> = true;
void keysMatch;

const missing = (err: unknown) => {
  const code = (err as NodeJS.ErrnoException)?.code;
  // (ENAMETOOLONG: a name or path longer than the file system holds names no file)
  return code === 'ENOENT' || code === 'ENOTDIR' || code === 'EISDIR' || code === 'ENAMETOOLONG';
};

function infoOf(stats: fs.Stats): StoredFileInfo {
  // the ETag Express's `send` gives a file: weak, from its size and modification time
  return { size: stats.size, modified: stats.mtime, etag: etag(stats) };
}

/** Files in a local folder. What `storageDir` gives when no `storage` is configured. */
export class LocalFileStorage implements FileStorage {
  /** The folder holding one sub-folder per app. */
  readonly root: string;

  constructor(options: LocalFileStorageOptions | string) {
    if (typeof options === 'object' && options !== null) onlyKnownKeys(options as unknown as Record<string, unknown>, OPTION_KEYS, '');
    const root = typeof options === 'string' ? options : options?.root;
    if (typeof root !== 'string' || root === '') throw new ConfigError('root', 'LocalFileStorage needs a root folder: new LocalFileStorage({ root })');
    this.root = root;
  }

  async put(appId: string, path: string, stream: Readable, info: StoragePutInfo): Promise<StoragePutResult> {
    if (info?.localPath) {
      // same machine: link or copy the file rather than pass its bytes through this process
      const saved = await copyFileTo(this.root, appId, path, info.localPath);
      return { size: saved.size };
    }
    const saved = await saveStreamTo(this.root, appId, path, stream);
    return { size: saved.size };
  }

  async get(appId: string, path: string, options?: { range?: ByteRange }): Promise<StoredFile | null> {
    const abs = await resolveAppPath(this.root, appId, path);
    let handle: fs.promises.FileHandle;
    try {
      handle = await fs.promises.open(abs, 'r');
    } catch (err) {
      if (missing(err)) return null;
      throw new ApiError('HOST_ERROR', `cannot open ${JSON.stringify(path)} (${(err as NodeJS.ErrnoException)?.code ?? 'error'})`);
    }
    try {
      const stats = await handle.stat();
      if (!stats.isFile()) {
        await handle.close();
        return null;
      }
      if (stats.size === 0 && !options?.range) {
        await handle.close();
        return { ...infoOf(stats), stream: Readable.from([]) };
      }
      // the bytes of the file as it was opened, never past its size: a file appended to meanwhile
      // (a growing log) is read as it was, not beyond the length it is sent with
      const range = options?.range ?? { start: 0, end: stats.size - 1 };
      // the stream owns the handle: it closes it at the end, on an error, or when destroyed
      const stream = handle.createReadStream({ start: range.start, end: range.end });
      return { ...infoOf(stats), stream };
    } catch (err) {
      await handle.close().catch(() => undefined);
      throw err;
    }
  }

  async stat(appId: string, path: string): Promise<StoredFileInfo | null> {
    const abs = await resolveAppPath(this.root, appId, path);
    const stats = await fs.promises.stat(abs).catch((err) => (missing(err) ? null : Promise.reject(err)));
    return stats && stats.isFile() ? infoOf(stats) : null;
  }

  async delete(appId: string, path: string): Promise<void> {
    const abs = await resolveAppPath(this.root, appId, path);
    // (a folder is no file: left alone, as stat and get say null for it)
    await fs.promises.unlink(abs).catch((err) => (missing(err) ? undefined : Promise.reject(err)));
  }
}
