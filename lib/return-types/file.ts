/**
 * File: streams `{ path | storagePath, name, contentDisposition }`. `path` (the app's local
 * sandbox) wins over `storagePath` (shared storage); an empty path or a missing file is a 404;
 * no path may leave its sandbox.
 */
import * as fs from 'node:fs';
import * as path from 'node:path';
import { pipeline } from 'node:stream/promises';
import { ApiError } from '../errors';
import { resolveAppPath } from '../files/sandbox-path';
import { contentTypeOf } from '../response/apply';
import type { ReturnTypeHandler } from './index';

const MIME: Record<string, string> = {
  '.txt': 'text/plain;charset=UTF-8', '.csv': 'text/csv;charset=UTF-8', '.html': 'text/html;charset=UTF-8', '.htm': 'text/html;charset=UTF-8',
  '.json': 'application/json;charset=UTF-8', '.xml': 'application/xml', '.pdf': 'application/pdf', '.zip': 'application/zip',
  '.png': 'image/png', '.jpg': 'image/jpeg', '.jpeg': 'image/jpeg', '.gif': 'image/gif', '.svg': 'image/svg+xml', '.webp': 'image/webp',
  '.mp3': 'audio/mpeg', '.mp4': 'video/mp4', '.js': 'text/javascript;charset=UTF-8', '.css': 'text/css;charset=UTF-8',
  '.xlsx': 'application/vnd.openxmlformats-officedocument.spreadsheetml.sheet',
  '.docx': 'application/vnd.openxmlformats-officedocument.wordprocessingml.document',
};

export function mimeOf(name: string): string {
  return MIME[path.extname(name).toLowerCase()] ?? 'application/octet-stream';
}

/** `attachment; filename="a.txt"; filename*=UTF-8''%E2%82%AC.txt` (RFC 6266 / 5987). */
export function contentDisposition(kind: 'inline' | 'attachment', name: string): string {
  const fallback = name.replace(/[^\x20-\x7e]|["\\]/g, '_');
  const encoded = encodeURIComponent(name).replace(/['()*]/g, (c) => `%${c.charCodeAt(0).toString(16).toUpperCase()}`);
  return `${kind}; filename="${fallback}"; filename*=UTF-8''${encoded}`;
}

export const sendFile: ReturnTypeHandler<'File'> = async (output, { res, state, appId, files, method }) => {
  const { file } = output;
  const local = file.path !== null && file.path !== '';
  const userPath = local ? file.path! : file.storagePath;
  if (!userPath) throw new ApiError('FILE_NOT_FOUND', 'The file result has no path');
  const abs = await resolveAppPath(local ? files.sandboxDir : files.storageDir, appId, userPath);
  const stat = await fs.promises.stat(abs).catch(() => null);
  if (!stat || !stat.isFile()) throw new ApiError('FILE_NOT_FOUND', `File '${userPath}' not found`);
  const stream = fs.createReadStream(abs);
  await new Promise<void>((resolve, reject) => {
    stream.once('open', () => resolve());
    stream.once('error', () => reject(new ApiError('FILE_NOT_FOUND', `File '${userPath}' cannot be read`)));
  });
  const name = file.name || path.basename(userPath);
  res.statusCode = state.status;
  res.setHeader('Content-Type', contentTypeOf(state) ?? mimeOf(name));
  res.setHeader('Content-Length', stat.size);
  res.setHeader('Content-Disposition', contentDisposition(file.contentDisposition === 'inline' ? 'inline' : 'attachment', name));
  res.setHeader('Last-Modified', stat.mtime.toUTCString());
  if (method === 'HEAD') {
    stream.destroy();
    res.end();
    return;
  }
  await pipeline(stream, res).catch(() => res.destroy());
};
