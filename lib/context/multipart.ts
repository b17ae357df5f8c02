/**
 * multipart/form-data bodies: form fields into the form map, files streamed (busboy) to
 * temporary files, never held whole in memory. Limits come from the `upload` option; a body
 * over one is a 413 naming it, a malformed body a 400, both before any script runs. The
 * temporary files live in one folder per request, removed when the response closes (sent,
 * failed, timed out, or the client went away).
 */
import * as fs from 'node:fs';
import * as path from 'node:path';
import type { IncomingMessage, ServerResponse } from 'node:http';
import { pipeline } from 'node:stream/promises';
import busboy from 'busboy';
import { ApiError } from '../errors';
import { ownGet, ownSet } from './own-map';
import type { UploadLimits } from './upload-options';

/** One uploaded file, kept on the host in a temporary file until the request ends. */
export interface UploadedPart {
  fieldName: string;
  fileName: string | null;
  contentType: string;
  size: number;
  /** The temporary file holding the bytes. */
  path: string;
}

export interface MultipartBody {
  form: Record<string, string[]>;
  parts: UploadedPart[];
}

/** Longest form field name busboy passes whole (its default). */
const FIELD_NAME_SIZE = 100;

const tooLarge = (message: string) => new ApiError('UPLOAD_TOO_LARGE', message);
const malformed = (message: string) => new ApiError('BAD_REQUEST', `Malformed multipart body: ${message}`);
/** RFC 7578: every part's Content-Disposition has a `name` (busboy passes undefined without one). */
const unnamed = () => malformed('a part has no name (Content-Disposition: form-data; name="...")');

/**
 * The uploads of a router whose temporary folders may still be on disk. A folder goes when its
 * response closes; `removeAll()` (router.close()) removes those left (a response whose 'close' has
 * not come yet, an upload still arriving) and resolves once they are gone: a process that exits
 * right after close() leaves none behind in `upload.tmpDir`.
 */
export class UploadFolders {
  private readonly open = new Set<(why: ApiError) => Promise<void>>();

  /** @internal */
  add(remove: (why: ApiError) => Promise<void>): void {
    this.open.add(remove);
  }

  /** @internal */
  delete(remove: (why: ApiError) => Promise<void>): void {
    this.open.delete(remove);
  }

  /** Ends the uploads still arriving (with `why`) and removes every folder left; resolves once they are gone. */
  async removeAll(why: ApiError): Promise<void> {
    await Promise.all([...this.open].map((remove) => remove(why)));
  }
}

/**
 * `fieldsTotal` bounds the form fields' values together (they are held in memory, like any other
 * body: the router gives `bodyLimit`). `folders`: the router's, which removes at close() what its
 * responses have not.
 */
export function readMultipart(req: IncomingMessage, res: ServerResponse, limits: UploadLimits, fieldsTotal: number, folders?: UploadFolders): Promise<MultipartBody> {
  return new Promise((resolve, reject) => {
    let bb: busboy.Busboy;
    try {
      bb = busboy({
        headers: req.headers,
        defParamCharset: 'utf8', // browsers send file names as raw UTF-8
        limits: { fileSize: limits.fileSize, files: limits.files, fields: limits.fields, fieldSize: limits.fieldSize, fieldNameSize: FIELD_NAME_SIZE },
      });
    } catch (err) {
      reject(malformed((err as Error).message)); // e.g. no boundary
      return;
    }
    const form: Record<string, string[]> = {};
    const parts: UploadedPart[] = [];
    const writes: Promise<void>[] = [];
    const files = new Set<NodeJS.ReadableStream & { destroy(err?: Error): void }>();
    let dir: Promise<string> | null = null;
    let settled = false;
    let fieldBytes = 0;

    const fail = (e: ApiError) => {
      if (settled) return;
      settled = true;
      req.unpipe(bb);
      // (with an error: a file stream busboy has ended, its last bytes not yet written, destroyed
      // without one leaves pipeline() waiting for an 'end' that never comes, its temp file open)
      for (const f of files) f.destroy(e);
      bb.destroy();
      // read (and drop) the rest, so the client gets the answer rather than a reset
      req.resume();
      reject(e);
    };
    // (busboy goes on with its work after it emits an event: stop it once that is done)
    const failSoon = (e: ApiError) => process.nextTick(fail, e);

    // the one place temporary files go away, whatever ended the request: its response's close, or
    // the router's close() (for a response that has not closed yet)
    let removal: Promise<void> | undefined;
    const remove = (why: ApiError): Promise<void> => {
      fail(why); // (no folder is made after this: a file part that comes later is dropped)
      const made = dir;
      removal ??= (made === null ? Promise.resolve() : Promise.allSettled(writes).then(() => made).then((d) => fs.promises.rm(d, { recursive: true, force: true })))
        .catch(() => undefined)
        .finally(() => folders?.delete(remove));
      return removal;
    };
    folders?.add(remove);
    res.once('close', () => void remove(new ApiError('BAD_REQUEST', 'The upload was aborted')));

    bb.on('file', (name, stream, info) => {
      if (settled || name === undefined) {
        stream.resume();
        if (name === undefined) failSoon(unnamed());
        return;
      }
      const part: UploadedPart = { fieldName: name, fileName: info.filename || null, contentType: info.mimeType, size: 0, path: '' };
      const index = parts.push(part) - 1;
      files.add(stream);
      // (until the temp file is open nothing else listens: an error then must not be uncaught;
      // pipeline() still sees it, the stream being errored)
      stream.on('error', () => undefined);
      stream.once('limit', () => failSoon(tooLarge(`An uploaded file is larger than upload.fileSize (${limits.fileSize} bytes)`)));
      // (tmpDir is made when missing, as sandboxDir and storageDir are)
      dir ??= fs.promises.mkdir(limits.tmpDir, { recursive: true }).then(() => fs.promises.mkdtemp(path.join(limits.tmpDir, 'scriptable-api-upload-')));
      writes.push(
        dir
          .then(async (d) => {
            part.path = path.join(d, String(index));
            if (settled) return;
            const out = fs.createWriteStream(part.path, { flags: 'wx' });
            await pipeline(stream, out);
            part.size = out.bytesWritten;
          })
          .catch((err: unknown) => {
            const e = err as NodeJS.ErrnoException;
            if (settled || e?.code === 'ERR_STREAM_PREMATURE_CLOSE') return; // (destroyed by fail())
            // a disk that cannot take the file (a system call failed) is the host's failure; the rest is the body's
            if (e?.syscall !== undefined) fail(new ApiError('HOST_ERROR', `The upload could not be stored (${e.code ?? 'error'})`));
            else fail(malformed(e?.message ?? String(err)));
          })
          .finally(() => files.delete(stream)),
      );
    });
    bb.on('field', (name, value, info) => {
      if (settled) return;
      if (name === undefined) return failSoon(unnamed());
      if (info.nameTruncated) return failSoon(tooLarge(`A form field name is longer than ${FIELD_NAME_SIZE} bytes`));
      if (info.valueTruncated) return failSoon(tooLarge(`Form field '${name}' is larger than upload.fieldSize (${limits.fieldSize} bytes)`));
      // (busboy decodes a part's declared charset itself: UTF-8, ISO-8859-1, US-ASCII, UTF-16LE;
      // for any other one, gbk too, it gives no value and the bytes are gone)
      if (value === undefined) return failSoon(new ApiError('UNSUPPORTED_CHARSET', `Form field '${name}' declares a charset the multipart parser cannot decode`));
      fieldBytes += Buffer.byteLength(name) + Buffer.byteLength(value);
      if (fieldBytes > fieldsTotal) return failSoon(tooLarge(`The form fields together are larger than bodyLimit (${fieldsTotal} bytes)`));
      const list = ownGet(form, name);
      if (list) list.push(value);
      else ownSet(form, name, [value]);
    });
    bb.once('filesLimit', () => failSoon(tooLarge(`The upload has more than upload.files (${limits.files}) files`)));
    bb.once('fieldsLimit', () => failSoon(tooLarge(`The upload has more than upload.fields (${limits.fields}) form fields`)));
    bb.on('error', (err: Error) => failSoon(malformed(err.message)));
    bb.once('close', () => {
      void Promise.all(writes).then(() => {
        if (settled) return;
        settled = true;
        resolve({ form, parts });
      });
    });
    req.once('error', () => fail(new ApiError('BAD_REQUEST', 'The upload was aborted')));
    req.once('close', () => {
      if (!req.complete) fail(new ApiError('BAD_REQUEST', 'The upload was aborted'));
    });
    req.pipe(bb);
  });
}
