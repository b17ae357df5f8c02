/**
 * The FileStorage contract: where `Part.saveStorage`, `Part.saveAttachment` (without an
 * `attachments` service) and `{ storagePath }` File results keep and find files. The default is
 * LocalFileStorage over `storageDir`; S3FileStorage keeps them in an S3 bucket; docs/storage.md
 * tells how to write another.
 */
import type { Readable } from 'node:stream';

/** What a storage knows about one stored file. */
export interface StoredFileInfo {
  /** Size in bytes (of the whole file, also when a range was read). */
  size: number;
  /** Last modification time (sent as `Last-Modified`). */
  modified: Date;
  /**
   * Entity tag as sent in the `ETag` header: quoted (`"abc"`), or weak (`W/"abc"`). It must change
   * whenever the content changes.
   */
  etag: string;
  /** MIME type recorded when the file was stored, if the storage keeps one. */
  contentType?: string;
}

/** Bytes `start` to `end` of a file, both inclusive (as in an HTTP `Range` header). */
export interface ByteRange {
  start: number;
  end: number;
}

/** A stored file opened for reading. */
export interface StoredFile extends StoredFileInfo {
  /**
   * The content, or the requested range of it. The caller consumes or destroys it; destroying
   * it must release what it holds (file handle, connection).
   */
  stream: Readable;
}

/** What `put` knows about the content besides the stream. */
export interface StoragePutInfo {
  /** MIME type of the content (an upload's `Content-Type`). */
  contentType?: string;
  /** Size in bytes, when known in advance. */
  size?: number;
  /**
   * A local file holding the same bytes (an upload's temporary file, valid during the call). A
   * storage on the same machine may copy or link it instead of reading `stream`; the caller
   * destroys a stream left unread.
   */
  localPath?: string;
  /**
   * Aborted when the result is no longer wanted (the request's scripts ended, its client left):
   * stop waiting on the service and release its connection.
   */
  signal?: AbortSignal;
}

/** What `get`, `stat` and `delete` are given besides the path. */
export interface StorageOptions {
  /**
   * Aborted when the result is no longer wanted (a client that left a download): stop waiting on
   * the service and release its connection (rejecting is fine).
   */
  signal?: AbortSignal;
}

/** What `put` stored. */
export interface StoragePutResult {
  /** Bytes stored. */
  size: number;
  /** The stored file's entity tag, when the storage knows it without another request. */
  etag?: string;
}

/**
 * A place for the apps' shared files. Every method is promise-based and streaming.
 *
 * `appId` and `path` arrive checked: `appId` is one path segment (no `/`, `\`, NUL or `..`);
 * `path` is relative, `/`-separated, without empty, `.` or `..` segments, backslashes or NUL
 * bytes (`reports/2026/q1.pdf`). Files of different apps never share a name: keep each app's
 * files apart (a folder per app, a key prefix...).
 *
 * Errors: return `null` (get, stat) for a missing file. Anything thrown is logged and answered
 * as a host error (500) unless it is an `ApiError`, which is answered as it is.
 *
 * Every method may be given a `signal` (`info.signal` for put): once it is aborted nobody waits
 * for the answer, so a storage over a network service passes it on (the AWS SDK's `abortSignal`)
 * and a hung service holds no connection past the request. A local one may ignore it.
 */
export interface FileStorage {
  /**
   * Stores the content of `stream` at `path` of app `appId`, replacing any file there, and
   * resolves once it is stored for good (readers never see a half-written file). Must consume
   * `stream` to its end or fail.
   */
  put(appId: string, path: string, stream: Readable, info: StoragePutInfo): Promise<StoragePutResult>;
  /**
   * Opens a stored file for reading, the whole of it or `options.range` (within the size the
   * caller got from `stat`). Resolves to null when the file does not exist.
   */
  get(appId: string, path: string, options?: StorageOptions & { range?: ByteRange }): Promise<StoredFile | null>;
  /** Size, time, ETag and type of a stored file, or null when it does not exist. */
  stat(appId: string, path: string, options?: StorageOptions): Promise<StoredFileInfo | null>;
  /** Removes a stored file; resolves also when there was none. */
  delete(appId: string, path: string, options?: StorageOptions): Promise<void>;
}

/** True when `v` has the four methods of a FileStorage. */
export function isFileStorage(v: unknown): v is FileStorage {
  const s = v as Record<string, unknown> | null;
  return typeof s === 'object' && s !== null && ['put', 'get', 'stat', 'delete'].every((m) => typeof s[m] === 'function');
}
