/**
 * What scripts do with uploaded Parts: save into the local sandbox, into shared storage, or as
 * a table attachment. The bytes stream from the upload's temporary file (or are linked/copied
 * from it by a storage on this machine); nothing holds a whole file in memory.
 */
import * as fs from 'node:fs';
import { randomUUID } from 'node:crypto';
import { ApiError } from '../errors';
import type { UploadedPart } from '../context/multipart';
import type { AttachmentFile, TableAttachment } from '../types';
import { checkAppId, normalizeAppPath, type SavedFile } from './sandbox-path';
import { safeFileName } from './file-name';
import type { FileStorage } from './storage';

/**
 * Refuses a part whose temporary file is gone: they are removed when the response closes, and a
 * script may go on after its client left.
 */
export async function checkPartFile(part: UploadedPart): Promise<void> {
  const isFile = part.path !== '' && (await fs.promises.stat(part.path).then((s) => s.isFile(), () => false));
  if (!isFile) throw new ApiError('FILE_NOT_FOUND', 'The uploaded file is no longer available (the request has ended)');
}

/**
 * Saves a part at `userPath` of the app's area in `target`. Returns the stored path (relative to
 * the app root, normalized) and the size. `signal`: the request's end (the storage stops waiting).
 */
export async function savePart(target: FileStorage | undefined, appId: string, userPath: string, part: UploadedPart, signal?: AbortSignal): Promise<SavedFile> {
  if (!target) throw new ApiError('FILES_NOT_CONFIGURED');
  checkAppId(appId);
  const rel = normalizeAppPath(userPath);
  await checkPartFile(part);
  const stream = fs.createReadStream(part.path);
  // (an error opening it, the file removed meanwhile, reaches a reader through pipeline(); one
  // left unread must not be an uncaught 'error' event)
  stream.on('error', () => undefined);
  try {
    const saved = await target.put(appId, rel, stream, { contentType: part.contentType, size: part.size, localPath: part.path, signal });
    return { path: rel, size: saved.size };
  } finally {
    stream.destroy(); // (a storage that linked or copied `localPath` left it unread)
  }
}

/** One path segment of an attachment's folder (a table or field id). */
function segment(v: string, field: string): string {
  if (v.includes('/') || normalizeAppPath(v) !== v) throw new ApiError('PATH_OUTSIDE_SANDBOX', `${field} ${JSON.stringify(v)} must be one plain path segment`);
  return v;
}

/**
 * The default of `saveAttachment(tableId, fieldId)`: stores the part in shared storage under
 * `attachments/<tableId>/<fieldId>/<id>/<name>` and returns its TableAttachment.
 */
export async function saveAttachmentTo(storage: FileStorage | undefined, appId: string, tableId: string, fieldId: string, part: UploadedPart, signal?: AbortSignal): Promise<TableAttachment> {
  if (!storage) throw new ApiError('FILES_NOT_CONFIGURED', 'saveAttachment needs shared storage (`storage` or `storageDir`) or an `attachments` service');
  const id = randomUUID();
  const name = safeFileName(part.fileName, 'file');
  const rel = `attachments/${segment(tableId, 'tableId')}/${segment(fieldId, 'fieldId')}/${id}/${name}`;
  const saved = await savePart(storage, appId, rel, part, signal);
  return { id, name, size: saved.size, contentType: part.contentType, tableId, fieldId, path: saved.path, createTime: Date.now() };
}

/** The part as an `attachments` service receives it. */
export function attachmentFileOf(part: UploadedPart): AttachmentFile {
  let data: Buffer | undefined;
  return {
    fieldName: part.fieldName,
    fileName: part.fileName,
    contentType: part.contentType,
    size: part.size,
    path: part.path,
    stream: () => fs.createReadStream(part.path),
    get data() {
      return (data ??= fs.readFileSync(part.path));
    },
  };
}
