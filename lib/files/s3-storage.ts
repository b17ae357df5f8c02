/**
 * S3FileStorage: a FileStorage in an S3 bucket (AWS or any S3-compatible service), keys
 * `<prefix><appId>/<path>`. Uses the AWS SDK v3 (`@aws-sdk/client-s3`, `@aws-sdk/lib-storage`),
 * optional peer dependencies loaded only when an S3FileStorage is made.
 */
import * as fs from 'node:fs';
import { Transform, type Readable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import { uploadFileToS3 } from './s3-file-upload';
import { onlyKnownKeys, shown, type Same } from '../validations';
import { ConfigError } from '../errors';
import type { ByteRange, FileStorage, StorageOptions, StoragePutInfo, StoragePutResult, StoredFile, StoredFileInfo } from './storage';

/** Static S3 credentials. */
export interface S3Credentials {
  accessKeyId: string;
  secretAccessKey: string;
  sessionToken?: string;
}

/** Options of S3FileStorage: the settings of a client the storage makes, or `client` (yours, with its own settings), not both. */
export type S3FileStorageOptions = S3FileStorageSettingsOptions | S3FileStorageClientOptions;

interface S3FileStorageCommonOptions {
  /** The bucket (it must exist). */
  bucket: string;
  /** Key prefix before `<appId>/<path>`, e.g. `files/` (a `/` is added when missing). Default none. */
  prefix?: string;
  /** Bytes per part of a multipart upload (at least 5 MiB; at most 10,000 parts per file). Default 5 MiB. */
  partSize?: number;
  /** Parts uploaded at once; memory held is about partSize × queueSize. Default 4. */
  queueSize?: number;
}

/** A storage that makes its own S3Client from these settings. */
export interface S3FileStorageSettingsOptions extends S3FileStorageCommonOptions {
  client?: undefined;
  /** AWS region. Default: the SDK's (`AWS_REGION`...), or `us-east-1` with a custom `endpoint`. */
  region?: string;
  /** Endpoint of an S3-compatible service, e.g. `http://127.0.0.1:9000`. */
  endpoint?: string;
  /** Path-style URLs (`endpoint/bucket/key`), which most S3-compatible services need. */
  forcePathStyle?: boolean;
  /**
   * Static credentials, or a provider function returning a promise of them (such as the SDK's
   * `fromIni()`). Default: the SDK's credential chain (environment, profile, role).
   */
  credentials?: S3Credentials | (() => Promise<S3Credentials>);
  /**
   * Any other `S3ClientConfig` field, laid over the defaults. The defaults set
   * `requestChecksumCalculation` and `responseChecksumValidation` to `WHEN_REQUIRED`, which
   * S3-compatible services that predate the SDK's default checksums need, and a `requestHandler`
   * whose connections are not pooled to a maximum (a download holds one while its client reads).
   */
  clientOptions?: Record<string, unknown>;
}

/** A storage over an `S3Client` of yours (`@aws-sdk/client-s3`): its region, endpoint and credentials are its own. */
export interface S3FileStorageClientOptions extends S3FileStorageCommonOptions {
  /** An `S3Client` of your own; the storage never destroys it. */
  client: object;
  region?: undefined;
  endpoint?: undefined;
  forcePathStyle?: undefined;
  credentials?: undefined;
  clientOptions?: undefined;
}

/** The keys of S3FileStorageOptions (the build fails when one is added to the type and not here). */
const OPTION_KEYS = ['bucket', 'prefix', 'client', 'region', 'endpoint', 'forcePathStyle', 'credentials', 'clientOptions', 'partSize', 'queueSize'] as const;
const keysMatch: Same<keyof S3FileStorageOptions, (typeof OPTION_KEYS)[number]> = true;
void keysMatch;

function isObject(v: unknown): v is Record<string, unknown> {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

/** The options given, of their types (an endpoint or region of another type failed only at the first request). */
function checkTypes(o: S3FileStorageOptions): void {
  for (const k of ['prefix', 'region', 'endpoint'] as const) {
    if (o[k] !== undefined && typeof o[k] !== 'string') throw new ConfigError(k, `must be a string, got ${shown(o[k])}`);
  }
  if (o.forcePathStyle !== undefined && typeof o.forcePathStyle !== 'boolean') throw new ConfigError('forcePathStyle', `must be true or false, got ${shown(o.forcePathStyle)}`);
  const c = o.credentials as unknown;
  // (the SDK also takes a provider function, such as fromIni())
  if (c !== undefined && typeof c !== 'function' && (!isObject(c) || typeof c.accessKeyId !== 'string' || typeof c.secretAccessKey !== 'string' || (c.sessionToken !== undefined && typeof c.sessionToken !== 'string'))) {
    throw new ConfigError('credentials', `must be { accessKeyId, secretAccessKey, sessionToken? } of strings (or left out for the SDK's credential chain)`); // (never shown: it may hold a secret)
  }
  if (o.clientOptions !== undefined && !isObject(o.clientOptions)) throw new ConfigError('clientOptions', `must be an object of S3ClientConfig fields, got ${shown(o.clientOptions)}`);
  if (o.client !== undefined && (!isObject(o.client) || typeof o.client.send !== 'function')) throw new ConfigError('client', 'must be an S3Client of @aws-sdk/client-s3 (with send())');
}

/** The options that make the storage's own S3Client (refused beside `client`). */
const CLIENT_SETTINGS = ['region', 'endpoint', 'forcePathStyle', 'credentials', 'clientOptions'] as const;

const PEERS = '@aws-sdk/client-s3 and @aws-sdk/lib-storage';
const MIN_PART = 5 * 1024 * 1024;

/* eslint-disable @typescript-eslint/no-explicit-any */
type Sdk = { s3: any; storage: any };

function loadSdk(): Sdk {
  try {
    return { s3: require('@aws-sdk/client-s3'), storage: require('@aws-sdk/lib-storage') };
  } catch (err) {
    const e = err as NodeJS.ErrnoException;
    if (e?.code === 'MODULE_NOT_FOUND' && /@aws-sdk\//.test(e.message)) {
      // (a ConfigError, as every optional package missing at startup: see lib/optional-package.ts)
      throw Object.assign(new ConfigError('storage', `S3FileStorage needs the packages ${PEERS} (optional peer dependencies): npm install @aws-sdk/client-s3 @aws-sdk/lib-storage`), { cause: err });
    }
    throw err;
  }
}

function isMissing(err: unknown): boolean {
  const e = err as { name?: string; $metadata?: { httpStatusCode?: number } };
  return e?.name === 'NoSuchKey' || e?.name === 'NotFound' || e?.$metadata?.httpStatusCode === 404;
}

/** Files in an S3 bucket, for routers on several machines that share their files. */
export class S3FileStorage implements FileStorage {
  /** The bucket. */
  readonly bucket: string;
  /** The key prefix (empty, or ending with `/`). */
  readonly prefix: string;
  private readonly sdk: Sdk;
  private readonly client: any;
  private readonly ownClient: boolean;
  private readonly partSize: number;
  private readonly queueSize: number;

  constructor(options: S3FileStorageOptions) {
    if (typeof options === 'object' && options !== null) onlyKnownKeys(options as unknown as Record<string, unknown>, OPTION_KEYS, '');
    if (typeof options?.bucket !== 'string' || options.bucket === '') throw new ConfigError('bucket', 'S3FileStorage needs a bucket: new S3FileStorage({ bucket })');
    checkTypes(options);
    // (they configure the client the storage makes: beside a client of yours they would do nothing)
    if (options.client !== undefined) {
      for (const k of CLIENT_SETTINGS) {
        if (options[k] !== undefined) throw new ConfigError(k, 'configures the S3Client the storage makes: give either client (with its own settings) or the settings, not both');
      }
    }
    const partSize = options.partSize === undefined ? MIN_PART : options.partSize; // (null is checked, not taken as left out)
    if (!Number.isInteger(partSize) || partSize < MIN_PART) throw new ConfigError('partSize', `must be an integer >= ${MIN_PART} (5 MiB), got ${shown(partSize)}`);
    const queueSize = options.queueSize === undefined ? 4 : options.queueSize;
    if (!Number.isInteger(queueSize) || queueSize < 1) throw new ConfigError('queueSize', `must be an integer >= 1, got ${shown(queueSize)}`);
    this.sdk = loadSdk();
    this.bucket = options.bucket;
    const prefix = options.prefix ?? '';
    this.prefix = prefix === '' || prefix.endsWith('/') ? prefix : `${prefix}/`;
    this.partSize = partSize;
    this.queueSize = queueSize;
    this.ownClient = options.client === undefined;
    this.client =
      options.client ??
      new this.sdk.s3.S3Client({
        region: options.region ?? (options.endpoint ? 'us-east-1' : undefined),
        endpoint: options.endpoint,
        forcePathStyle: options.forcePathStyle,
        credentials: options.credentials,
        requestChecksumCalculation: 'WHEN_REQUIRED',
        responseChecksumValidation: 'WHEN_REQUIRED',
        // a download holds its connection for as long as its client takes to read it: with the
        // SDK's pool of 50, 50 slow or paused clients left no connection for any other call
        requestHandler: { httpAgent: { maxSockets: Infinity }, httpsAgent: { maxSockets: Infinity } },
        ...options.clientOptions,
      });
  }

  /** The object key of an app's file. */
  keyOf(appId: string, path: string): string {
    return `${this.prefix}${appId}/${path}`;
  }

  /**
   * A local file (`info.localPath`, an upload's temporary file) goes up in parts read straight
   * from it; any other stream through lib-storage's Upload, which holds up to
   * partSize × queueSize bytes while it sends them.
   */
  async put(appId: string, path: string, stream: Readable, info: StoragePutInfo): Promise<StoragePutResult> {
    if (info?.localPath) {
      stream.destroy(); // (read from the file instead: its descriptor goes now, not when the upload ends)
      const { size } = await fs.promises.stat(info.localPath);
      const etag = await uploadFileToS3(
        { client: this.client, s3: this.sdk.s3, bucket: this.bucket, key: this.keyOf(appId, path), contentType: info.contentType, partSize: this.partSize, queueSize: this.queueSize, signal: info.signal },
        info.localPath,
        size,
      );
      return { size, etag: typeof etag === 'string' ? etag : undefined };
    }
    let size = 0;
    const counter = new Transform({
      transform(chunk: Buffer, _enc, done) {
        size += chunk.length;
        done(null, chunk);
      },
    });
    const upload = new this.sdk.storage.Upload({
      client: this.client,
      params: { Bucket: this.bucket, Key: this.keyOf(appId, path), Body: counter, ContentType: info?.contentType },
      partSize: this.partSize,
      queueSize: this.queueSize,
      leavePartsOnError: false,
    });
    const piping = pipeline(stream, counter);
    const onAbort = () => void upload.abort().catch(() => undefined);
    info?.signal?.addEventListener('abort', onAbort, { once: true });
    if (info?.signal?.aborted) onAbort();
    try {
      const [result] = await Promise.all([upload.done(), piping]);
      return { size, etag: typeof result?.ETag === 'string' ? result.ETag : undefined };
    } catch (err) {
      counter.destroy();
      await upload.abort().catch(() => undefined);
      await piping.catch(() => undefined);
      throw err;
    } finally {
      info?.signal?.removeEventListener('abort', onAbort);
    }
  }

  async get(appId: string, path: string, options?: StorageOptions & { range?: ByteRange }): Promise<StoredFile | null> {
    const range = options?.range;
    let out: any;
    try {
      out = await this.client.send(
        new this.sdk.s3.GetObjectCommand({ Bucket: this.bucket, Key: this.keyOf(appId, path), Range: range ? `bytes=${range.start}-${range.end}` : undefined }),
        { abortSignal: options?.signal },
      );
    } catch (err) {
      if (isMissing(err)) return null;
      throw err;
    }
    // with a range, the whole size is the number after the slash of `Content-Range: bytes s-e/size`
    const total = typeof out.ContentRange === 'string' ? Number(/\/(\d+)$/.exec(out.ContentRange)?.[1]) : NaN;
    if (range && !(typeof out.ContentRange === 'string' && out.ContentRange.startsWith(`bytes ${range.start}-${range.end}/`))) {
      // a service (or a proxy before it) that ignored the Range: its body is not the bytes asked for
      (out.Body as Readable | undefined)?.destroy?.();
      throw new Error(`S3 answered a request for bytes ${range.start}-${range.end} of ${this.keyOf(appId, path)} with ${out.ContentRange ? `Content-Range ${out.ContentRange}` : 'the whole object'}`);
    }
    const size = Number.isFinite(total) ? total : Number(out.ContentLength ?? 0);
    return { ...this.infoOf(out, size), stream: out.Body as Readable };
  }

  async stat(appId: string, path: string, options?: StorageOptions): Promise<StoredFileInfo | null> {
    try {
      const out = await this.client.send(new this.sdk.s3.HeadObjectCommand({ Bucket: this.bucket, Key: this.keyOf(appId, path) }), { abortSignal: options?.signal });
      // (no length is no size: 0 would send the file as an empty one)
      if (typeof out.ContentLength !== 'number') throw new Error(`S3 gave no Content-Length for ${this.keyOf(appId, path)}`);
      return this.infoOf(out, out.ContentLength);
    } catch (err) {
      if (isMissing(err)) return null;
      throw err;
    }
  }

  async delete(appId: string, path: string, options?: StorageOptions): Promise<void> {
    await this.client.send(new this.sdk.s3.DeleteObjectCommand({ Bucket: this.bucket, Key: this.keyOf(appId, path) }), { abortSignal: options?.signal });
  }

  /** Closes the connections of the client this storage made (not of a `client` given to it). */
  destroy(): void {
    if (this.ownClient) this.client.destroy?.();
  }

  private infoOf(out: any, size: number): StoredFileInfo {
    const modified = out.LastModified instanceof Date ? out.LastModified : new Date(0);
    const etag = typeof out.ETag === 'string' && out.ETag !== '' ? out.ETag : `W/"${size.toString(16)}-${modified.getTime().toString(16)}"`;
    return { size, modified, etag, contentType: typeof out.ContentType === 'string' ? out.ContentType : undefined };
  }
}
