/**
 * `Content-Disposition` of File responses (RFC 6266, via `content-disposition`): the name made
 * safe (no CR/LF or other control characters, no quotes, no path separators), an ASCII
 * `filename=` and, for any other name, `filename*=UTF-8''…` with the exact one.
 */
import { create } from 'content-disposition';
import { asciiFileName, safeFileName } from '../files/file-name';

/** `attachment; filename="__ 2026.pdf"; filename*=UTF-8''%E6%8A%A5%E5%91%8A%202026.pdf` */
export function contentDisposition(kind: 'inline' | 'attachment', name: string): string {
  const safe = safeFileName(name, 'download');
  return create(safe, { type: kind, fallback: asciiFileName(safe) });
}
