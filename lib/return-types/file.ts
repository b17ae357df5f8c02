/**
 * File: streams `{ path | storagePath, name, contentDisposition }`. `path` (the app's local
 * sandbox) wins over `storagePath` (shared storage); an empty path or a missing file is a 404;
 * no path may leave its area. GET and HEAD get conditional requests (304, 412) and byte ranges
 * (206, 416), so a browser can cache a file and seek in an inline video or PDF.
 */
import * as path from 'node:path';
import type { IncomingHttpHeaders, ServerResponse } from 'node:http';
import { Transform } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import { contentType as mimeContentType } from 'mime-types';
import { ApiError } from '../errors';
import { safeFileName } from '../files/file-name';
import { checkAppId, normalizeAppPath } from '../files/sandbox-path';
import type { ByteRange, FileStorage, StoredFileInfo } from '../files/storage';
import { contentTypeOf, removeHeaders } from '../response/apply';
import { clientGone } from '../response/client-gone';
import { endWithBody, sendErrorBody } from '../response/error';
import { contentDisposition } from './disposition';
import { evaluateConditions } from './conditional';
import type { ReturnTypeHandler, SendContext } from './index';

export { contentDisposition };

/**
 * `Content-Type` for a file name's extension (`text/plain; charset=utf-8`), or null when it has
 * none or an unknown one. The extension alone: mime-types takes a bare word (`pdf`) for an
 * extension and a string with a `/` (`image/svg+xml`) for the type itself.
 */
export function mimeOf(name: string): string | null {
  const ext = path.extname(name);
  return ext === '' ? null : mimeContentType(ext) || null;
}

async function statOf(store: FileStorage, appId: string, rel: string, userPath: string, signal: AbortSignal): Promise<StoredFileInfo> {
  let info: StoredFileInfo | null;
  try {
    info = await store.stat(appId, rel, { signal });
  } catch (err) {
    if (err instanceof ApiError) throw err;
    throw new ApiError('HOST_ERROR', `File '${userPath}' cannot be read`, { cause: err });
  }
  if (!info) throw new ApiError('FILE_NOT_FOUND', `File '${userPath}' not found`);
  // (the length goes out as Content-Length: a BigInt or a negative one would fail the response after its headers)
  if (!(Number.isSafeInteger(info.size) && info.size >= 0)) throw new ApiError('HOST_ERROR', `File '${userPath}' cannot be read: the storage gave no valid size`);
  return info;
}

/**
 * Passes exactly `length` bytes, or fails the pipeline: a source that ends early (a file truncated
 * while it is read) or sends more. The response is then destroyed before `end()` could meet a
 * length it does not have (with strictContentLength, end() throws outside any handler).
 */
function exactly(length: number): Transform {
  let seen = 0;
  return new Transform({
    transform(chunk: Buffer, _encoding, done) {
      seen += chunk.length;
      done(seen > length ? new Error(`the source sent more than its ${length} bytes`) : null, chunk);
    },
    flush(done) {
      done(seen === length ? null : new Error(`the source ended after ${seen} of its ${length} bytes`));
    },
  });
}

/** The file's source failed while it was sent (the client was still there): `cause` is its error. */
class SourceFailed {
  constructor(readonly cause: unknown) {}
}

/** A Content-Type the script set as a plain header. */
function scriptType(res: ServerResponse): string | null {
  const v = res.getHeader('Content-Type');
  return typeof v === 'string' && v !== '' ? v : null;
}

function setAll(res: ServerResponse, headers: Record<string, string | number>): void {
  for (const k in headers) res.setHeader(k, headers[k]);
}

export const sendFile: ReturnTypeHandler<'File'> = async (output, ctx) => {
  // (a client that leaves while the storage is asked ends the storage's request: a hung service
  // holds no connection, and the router nothing to wait for, past the client)
  const gone = clientGone(ctx.res);
  try {
    await send(output, ctx, gone.signal);
  } catch (err) {
    if (err instanceof SourceFailed) throw err.cause;
    if (!gone.signal.aborted) throw err;
    ctx.res.destroy(); // (nobody to answer)
  } finally {
    gone.done();
  }
};

const send = async (output: Parameters<ReturnTypeHandler<'File'>>[0], { res, requestId, state, appId, files, method, headers: reqHeaders, scriptHeaders }: SendContext, signal: AbortSignal) => {
  const { file } = output;
  const local = file.path !== null && file.path !== '';
  const userPath = local ? file.path! : file.storagePath;
  if (!userPath) throw new ApiError('FILE_NOT_FOUND', 'The file result has no path');
  const store = local ? files.sandbox : files.storage;
  if (!store) throw new ApiError('FILES_NOT_CONFIGURED', local ? 'A File result with `path` needs the router option `sandboxDir`' : 'A File result with `storagePath` needs shared storage (`storage` or `storageDir`)');
  checkAppId(appId);
  const rel = normalizeAppPath(userPath);
  const info = await statOf(store, appId, rel, userPath, signal);

  const name = file.name || path.posix.basename(rel);
  const headers: Record<string, string | number> = {
    // (the type of the name as Content-Disposition sends it: trimmed, no control characters or `/`)
    'Content-Type': contentTypeOf(state) ?? scriptType(res) ?? mimeOf(safeFileName(name)) ?? info.contentType ?? 'application/octet-stream',
    // (a disposition type is case-insensitive, RFC 6266 4.2: `INLINE` is inline; anything else, attachment)
    'Content-Disposition': contentDisposition(file.contentDisposition?.trim().toLowerCase() === 'inline' ? 'inline' : 'attachment', name),
    'Last-Modified': info.modified.toUTCString(),
    ETag: info.etag,
    'X-Content-Type-Options': 'nosniff',
  };
  let status = state.status;
  if (status === 204 || status === 205 || status === 304) {
    // a status the script set that has no content: no file is read, and endWithBody frames it
    res.statusCode = status;
    setAll(res, { 'Last-Modified': headers['Last-Modified'], ETag: info.etag });
    endWithBody(res, '', null);
    return;
  }
  let range: ByteRange | undefined;
  // conditional requests and ranges: for reads of the file as it is (GET / HEAD answered 200)
  if ((method === 'GET' || method === 'HEAD') && status === 200) {
    headers['Accept-Ranges'] = 'bytes';
    const verdict = evaluateConditions(method, reqHeaders, info);
    // (412 and 416 answer with the error body: as a failure does, without the script's headers,
    // whose Content-Encoding or Cache-Control were the file's)
    if (verdict.kind === 'precondition-failed') {
      const e = new ApiError('PRECONDITION_FAILED', 'The file does not match the If-Match / If-Unmodified-Since precondition');
      if (scriptHeaders) removeHeaders(res, scriptHeaders);
      return sendErrorBody(res, { requestId, message: e.message, code: e.code }, e.status, { ETag: info.etag, 'Last-Modified': headers['Last-Modified'] as string });
    }
    if (verdict.kind === 'not-modified') {
      res.statusCode = 304;
      setAll(res, { 'Last-Modified': headers['Last-Modified'], ETag: info.etag, 'Accept-Ranges': 'bytes' });
      res.end();
      return;
    }
    if (verdict.kind === 'unsatisfiable') {
      const e = new ApiError('RANGE_NOT_SATISFIABLE', `The range is outside the file's ${info.size} bytes`);
      if (scriptHeaders) removeHeaders(res, scriptHeaders);
      return sendErrorBody(res, { requestId, message: e.message, code: e.code }, e.status, { 'Content-Range': `bytes */${info.size}`, 'Accept-Ranges': 'bytes' });
    }
    if (verdict.kind === 'range') {
      range = verdict.range;
      status = 206;
      headers['Content-Range'] = `bytes ${range.start}-${range.end}/${info.size}`;
    }
  }
  headers['Content-Length'] = range ? range.end - range.start + 1 : info.size;

  if (method === 'HEAD') {
    res.statusCode = status;
    setAll(res, headers);
    res.end();
    return;
  }
  // (a zero-byte file has no range to ask a storage for)
  const opened = info.size === 0 ? null : await store.get(appId, rel, range ? { range, signal } : { signal }).catch((err: unknown) => {
    if (err instanceof ApiError) throw err;
    throw new ApiError('HOST_ERROR', `File '${userPath}' cannot be read`, { cause: err });
  });
  if (info.size !== 0 && !opened) throw new ApiError('FILE_NOT_FOUND', `File '${userPath}' not found`);
  if (opened && (opened.size !== info.size || opened.etag !== info.etag)) {
    // replaced between stat and get: its length, ETag and range would not be this content's
    opened.stream.destroy();
    throw new ApiError('HOST_ERROR', `File '${userPath}' changed while it was being sent; try again`);
  }
  res.statusCode = status;
  res.strictContentLength = true; // (a source that sends more or less than it said ends the connection, never the next response)
  try {
    setAll(res, headers);
  } catch (e) {
    opened?.stream.destroy(); // (its file handle or connection goes now, not when collected)
    throw e;
  }
  if (!opened) {
    res.end();
    return;
  }
  // backpressure from the client to the source; a client that goes away destroys the source,
  // which frees its file handle or connection
  const restore = roomForPipeline(res);
  const counted = exactly(headers['Content-Length'] as number);
  // (which gave out first: the source (it failed or ended early) or the client. The pipeline then
  // ends the other, and from Node.js 24 on it closes the response before it rejects)
  let first: 'source' | 'client' | undefined;
  const sourceFirst = () => void (first ??= 'source');
  opened.stream.once('error', sourceFirst);
  counted.once('error', sourceFirst);
  res.once('close', () => void (first ??= 'client'));
  await pipeline(opened.stream, counted, res)
    .catch((err: unknown) => {
      opened.stream.destroy();
      res.destroy();
      // (a source that failed or ended early is the host's failure, with the client still there: the
      // router logs it and counts it; a client that left is nobody's)
      if (first === 'source' || (first === undefined && !signal.aborted)) throw new SourceFailed(err);
    })
    .finally(restore);
};

/** 'close' listeners node:stream's pipeline puts on its destination (7 on Node.js 20), with room to spare. */
const PIPELINE_LISTENERS = 10;

/**
 * Raises the response's listener limit for the pipeline's own listeners while it runs; returns the
 * restore. Beside the router's and a host's own (a request log, a tracker of requests in flight, as
 * the standalone server has) they passed Node.js's default of 10, and every download printed a
 * MaxListenersExceededWarning, a leak that is not there. A limit of 0 (none) is left as it is.
 */
function roomForPipeline(res: ServerResponse): () => void {
  const limit = res.getMaxListeners();
  if (limit === 0) return () => undefined;
  res.setMaxListeners(limit + PIPELINE_LISTENERS);
  return () => void res.setMaxListeners(limit);
}
