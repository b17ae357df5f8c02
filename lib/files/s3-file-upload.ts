/**
 * Uploads a local file to S3 without holding its parts in memory: each part's body is a read
 * stream over its byte range of the file (with its length), `queueSize` parts at once; a file of
 * one part is one PutObject. A failed multipart upload is aborted once its parts in flight have
 * settled (no orphaned parts are billed).
 */
import * as fs from 'node:fs';
import { Readable } from 'node:stream';

/** Bytes read at once from the file. */
const CHUNK = 256 * 1024;
/**
 * Longest wait for S3 to abort a failed multipart upload (a small request it answers at once): a
 * service that hangs holds no request past it (the upload is then left to the bucket's lifecycle rules).
 */
const ABORT_WAIT_MS = 10_000;

/* eslint-disable @typescript-eslint/no-explicit-any */
export interface FileUploadTarget {
  client: any;
  s3: any; // the @aws-sdk/client-s3 module
  bucket: string;
  key: string;
  contentType?: string;
  partSize: number;
  queueSize: number;
  /** Ends the requests in flight (the upload is then aborted, as after a failed part). */
  signal?: AbortSignal;
}

/**
 * A stream of bytes `start`..`end` of the open file, read at their positions: the descriptor
 * stays open whatever becomes of the stream (destroying an fs stream closes its descriptor), so
 * the parts share it, and the file may be removed meanwhile, as an upload's temporary file is when
 * its request ends. A read error fails the request it is the body of, never as an uncaught event.
 */
function rangeOf(handle: fs.promises.FileHandle, start: number, end: number): Readable {
  async function* chunks() {
    for (let pos = start; pos <= end; ) {
      const len = Math.min(CHUNK, end - pos + 1);
      const { bytesRead, buffer } = await handle.read(Buffer.allocUnsafe(len), 0, len, pos);
      if (bytesRead === 0) return;
      pos += bytesRead;
      yield buffer.subarray(0, bytesRead);
    }
  }
  const body = Readable.from(chunks(), { objectMode: false });
  body.on('error', () => undefined);
  return body;
}

/** Resolves to the stored object's ETag (when S3 gave one). */
export async function uploadFileToS3(t: FileUploadTarget, file: string, size: number): Promise<string | undefined> {
  const handle = await fs.promises.open(file, 'r');
  const close = () => handle.close().catch(() => undefined);
  try {
    return await upload(t, handle, size, close);
  } finally {
    await close();
  }
}

async function upload(t: FileUploadTarget, handle: fs.promises.FileHandle, size: number, close: () => Promise<void>): Promise<string | undefined> {
  const base = { Bucket: t.bucket, Key: t.key };
  const sending = { abortSignal: t.signal };
  if (size <= t.partSize) {
    const body = rangeOf(handle, 0, size - 1);
    try {
      const out = await t.client.send(new t.s3.PutObjectCommand({ ...base, Body: body, ContentLength: size, ContentType: t.contentType }), sending);
      return out?.ETag;
    } finally {
      body.destroy(); // (a failed send leaves it open: its descriptor, and the file with it)
    }
  }
  const { UploadId } = await t.client.send(new t.s3.CreateMultipartUploadCommand({ ...base, ContentType: t.contentType }), sending);
  const count = Math.ceil(size / t.partSize);
  const parts: Array<{ PartNumber: number; ETag: string }> = new Array(count);
  let next = 0;
  let failed = false;
  const worker = async () => {
    while (!failed && next < count) {
      const i = next++;
      const start = i * t.partSize;
      const end = Math.min(size, start + t.partSize) - 1;
      const body = rangeOf(handle, start, end);
      try {
        const out = await t.client.send(new t.s3.UploadPartCommand({ ...base, UploadId, PartNumber: i + 1, Body: body, ContentLength: end - start + 1 }), sending);
        parts[i] = { PartNumber: i + 1, ETag: out.ETag };
      } catch (err) {
        failed = true;
        throw err;
      } finally {
        body.destroy();
      }
    }
  };
  try {
    // every part settles before a failure aborts the upload (a part stored after the abort would stay)
    const settled = await Promise.allSettled(Array.from({ length: Math.min(t.queueSize, count) }, worker));
    await close(); // (every part is read: completing or aborting needs no file, which may be a deleted temporary file's space)
    const failure = settled.find((r): r is PromiseRejectedResult => r.status === 'rejected');
    if (failure) throw failure.reason;
    const out = await t.client.send(new t.s3.CompleteMultipartUploadCommand({ ...base, UploadId, MultipartUpload: { Parts: parts } }), sending);
    return out?.ETag;
  } catch (err) {
    // (not given the signal: an upload abandoned by its request is aborted all the same)
    await t.client.send(new t.s3.AbortMultipartUploadCommand({ ...base, UploadId }), { abortSignal: AbortSignal.timeout(ABORT_WAIT_MS) }).catch(() => undefined);
    throw err;
  }
}
