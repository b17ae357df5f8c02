/**
 * File names that came from outside (an upload's name, a script's File result): made safe to use
 * as one path segment and in a `Content-Disposition` header.
 */
import * as path from 'node:path';

/** Longest name kept, in UTF-8 bytes (file systems allow 255 per segment). */
const MAX_NAME_BYTES = 200;

/** A lone surrogate: half of a UTF-16 pair, which no encoding (UTF-8, percent-encoding) can write. */
const LONE_SURROGATE = /[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/g;

/**
 * Control characters (CR, LF, NUL...) dropped; lone surrogates replaced by U+FFFD; `/`, `\` and
 * `"` replaced by `_`; leading and trailing spaces trimmed; shortened to 200 UTF-8 bytes keeping
 * the extension; `fallback` when nothing (or only dots) is left.
 */
export function safeFileName(name: string | null | undefined, fallback = 'file'): string {
  let s = String(name ?? '')
    .replace(/[\u0000-\u001f\u007f-\u009f\u2028\u2029]/g, '')
    .replace(LONE_SURROGATE, '\uFFFD')
    .replace(/[/\\"]/g, '_')
    .trim();
  if (Buffer.byteLength(s) > MAX_NAME_BYTES) {
    const ext = path.extname(s).length <= 16 ? path.extname(s) : '';
    // (the longest start of the name that fits beside the extension, whole characters, in one pass)
    const room = MAX_NAME_BYTES - Buffer.byteLength(ext);
    let kept = '';
    let bytes = 0;
    for (const ch of s.slice(0, s.length - ext.length)) {
      bytes += Buffer.byteLength(ch);
      if (bytes > room) break;
      kept += ch;
    }
    s = kept + ext;
  }
  return /^\.*$/.test(s) ? fallback : s;
}

/** An ASCII stand-in for a name (the `filename=` of Content-Disposition): accents dropped, other characters `_`. */
export function asciiFileName(name: string): string {
  return name
    .normalize('NFKD')
    .replace(/[\u0300-\u036f]/g, '')
    .replace(/[^\x20-\x7e]/g, '_')
    .replace(/[%\\"]/g, '_');
}
