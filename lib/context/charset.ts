/**
 * ctx.body is the bytes the client sent, decoded by the charset the request declares
 * (`Content-Type: text/plain; charset=shift_jis`): UTF-8 when none is given, iconv-lite for the
 * charsets it knows, and 415 UNSUPPORTED_CHARSET for one it does not.
 */
import type { Request } from 'express';
import { ApiError } from '../errors';

const CHARSET = /;\s*charset\s*=\s*(?:"([^"]*)"|([^;\s]*))/i;

/** The charset parameter of a Content-Type as it was written (trimmed), or undefined when it names none. */
export function charsetParameter(contentType: string | undefined): string | undefined {
  const m = contentType ? CHARSET.exec(contentType) : null;
  const cs = m ? (m[1] ?? m[2]).trim() : '';
  return cs === '' ? undefined : cs;
}

/** The declared charset, lower-case, or undefined when the Content-Type names none. */
export function declaredCharset(contentType: string | undefined): string | undefined {
  return charsetParameter(contentType)?.toLowerCase();
}

/** Charsets Node decodes itself (no iconv-lite needed); no prototype: `constructor` is just unknown. */
const NATIVE: Record<string, BufferEncoding | undefined> = Object.assign(Object.create(null), {
  'utf-8': 'utf8',
  utf8: 'utf8',
  'iso-8859-1': 'latin1',
  latin1: 'latin1',
  'us-ascii': 'ascii',
  ascii: 'ascii',
  'utf-16le': 'utf16le',
  utf16le: 'utf16le',
  'ucs-2': 'utf16le',
});

let iconv: typeof import('iconv-lite') | undefined;
function iconvLite(): typeof import('iconv-lite') {
  // eslint-disable-next-line @typescript-eslint/no-require-imports
  return (iconv ??= require('iconv-lite') as typeof import('iconv-lite'));
}

/**
 * Names iconv-lite takes (as Node's Buffer encodings) that are not charsets: hex and base64 turn
 * bytes into their digits, binary cuts each character to its low byte. Compared as iconv-lite
 * compares names (lower case, letters and digits only, a year suffix dropped: `Base-64` is base64).
 */
const NOT_CHARSETS = new Set(['hex', 'base64', 'binary']);

/** A charset iconv-lite encodes and decodes (a name it knows that is a character encoding). */
function iconvCharset(cs: string): boolean {
  return !NOT_CHARSETS.has(cs.toLowerCase().replace(/:\d{4}$|[^0-9a-z]/g, '')) && iconvLite().encodingExists(cs);
}

/** Throws 415 UNSUPPORTED_CHARSET for a charset neither Node nor iconv-lite knows. */
export function checkCharset(contentType: string | undefined): void {
  const cs = declaredCharset(contentType);
  if (cs === undefined || NATIVE[cs] !== undefined) return;
  if (!iconvCharset(cs)) throw new ApiError('UNSUPPORTED_CHARSET', `Unsupported charset '${cs}' in the Content-Type`);
}

/** The body bytes as text, by the declared charset (UTF-8 by default). */
export function decodeBody(bytes: Buffer, contentType: string | undefined): string {
  const cs = declaredCharset(contentType);
  if (cs === undefined) return bytes.toString('utf8');
  const native = NATIVE[cs];
  if (native !== undefined) return bytes.toString(native);
  checkCharset(contentType);
  return iconvLite().decode(bytes, cs);
}

/** The Buffer encoding of a charset Node encodes itself (lower-case name), else undefined. */
export function nativeEncoding(charset: string): BufferEncoding | undefined {
  return NATIVE[charset];
}

/**
 * The charset a response's text goes out in, by its Content-Type: undefined for UTF-8 (also when
 * it names none, or one neither Node nor iconv-lite knows).
 */
export function responseCharset(contentType: string | null): string | undefined {
  const cs = declaredCharset(contentType ?? undefined);
  if (cs === undefined || NATIVE[cs] === 'utf8' || !iconvCharset(cs)) return undefined;
  return cs;
}

/** Text as bytes in `charset` (responseCharset; undefined: UTF-8); a character it lacks becomes `?`, as in Java. */
export function encodeText(text: string, charset: string | undefined): Buffer {
  return charset === undefined ? Buffer.from(text, 'utf8') : iconvLite().encode(text, charset);
}

/**
 * The raw body a host body parser kept (`express.json({ verify: (req, _res, buf) => { req.rawBody = buf } })`):
 * a Buffer, or text already decoded.
 */
export function rawBodyOf(req: Request): Buffer | string | undefined {
  const raw = (req as Request & { rawBody?: unknown }).rawBody;
  return Buffer.isBuffer(raw) || typeof raw === 'string' ? raw : undefined;
}

/**
 * An urlencoded form in a charset other than UTF-8 percent-encodes its bytes in that charset
 * (`name=Jos%E9` in ISO-8859-1): the same form with each name and value re-encoded as UTF-8,
 * which is what URLSearchParams decodes. A name or value is decoded whole, its escapes and its
 * plain characters together: a browser leaves bytes that are ASCII letters and digits unescaped,
 * also when they are the second byte of a character (`ア` in Shift_JIS is `%83A`). UTF-8 forms
 * are returned as they are.
 */
export function formInUtf8(text: string, contentType: string | undefined): string {
  const cs = declaredCharset(contentType);
  if (cs === undefined || cs === 'utf-8' || cs === 'utf8' || !text.includes('%')) return text;
  const native = NATIVE[cs];
  const encode = (s: string) => (native !== undefined ? Buffer.from(s, native) : iconvLite().encode(s, cs));
  return text.replace(/[^&=+]+/g, (run) => {
    if (!/%[0-9A-Fa-f]{2}/.test(run)) return run;
    const bytes: Buffer[] = [];
    // (escapes as their bytes; the text between them, decoded from the body, back to its bytes)
    for (const piece of run.split(/((?:%[0-9A-Fa-f]{2})+)/)) {
      if (piece !== '') bytes.push(piece.startsWith('%') && /^(?:%[0-9A-Fa-f]{2})+$/.test(piece) ? Buffer.from(piece.replace(/%/g, ''), 'hex') : encode(piece));
    }
    const all = Buffer.concat(bytes);
    const decoded = native !== undefined ? all.toString(native) : iconvLite().decode(all, cs);
    // (escaped as UTF-8 bytes: half a UTF-16 pair becomes U+FFFD, where encodeURIComponent throws)
    return Buffer.from(decoded, 'utf8').toString('hex').replace(/../g, '%$&');
  });
}
