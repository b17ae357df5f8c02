/**
 * Reads the request body once, within `bodyLimit`: raw text for ctx.body, form fields for
 * getParameter, and uploaded files (multipart, within the `upload` limits: multipart.ts) kept on
 * the host as Parts.
 */
import * as zlib from 'node:zlib';
import type { Request, Response } from 'express';
import { ApiError } from '../errors';
import { ownGet, ownSet } from './own-map';
import { decodeBody, formInUtf8, rawBodyOf } from './charset';
import { readMultipart, type UploadFolders, type UploadedPart } from './multipart';
import type { UploadLimits } from './upload-options';

export type { UploadedPart };

export interface RequestBody {
  text: string;
  form: Record<string, string[]>;
  parts: UploadedPart[];
}

const EMPTY: RequestBody = Object.freeze({ text: '', form: Object.freeze({}) as Record<string, string[]>, parts: [] }) as RequestBody;

export function parseForm(text: string, into: Record<string, string[]> = {}): Record<string, string[]> {
  for (const [k, v] of new URLSearchParams(text)) {
    const list = ownGet(into, k);
    if (list) list.push(v);
    else ownSet(into, k, [v]);
  }
  return into;
}

function hasBody(req: Request): boolean {
  const len = req.headers['content-length'];
  return req.headers['transfer-encoding'] !== undefined || (len !== undefined && len !== '0');
}

const tooLarge = (limit: number) => new ApiError('BODY_TOO_LARGE', `Request body is larger than ${limit} bytes`);

function readRaw(req: Request, limit: number): Promise<Buffer> {
  const declared = Number(req.headers['content-length']);
  if (Number.isFinite(declared) && declared > limit) return Promise.reject(tooLarge(limit));
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    let size = 0;
    const fail = (e: ApiError) => {
      req.removeListener('data', onData);
      req.resume();
      reject(e);
    };
    const onData = (chunk: Buffer) => {
      size += chunk.length;
      if (size > limit) return fail(tooLarge(limit));
      chunks.push(chunk);
    };
    req.on('data', onData);
    req.once('end', () => resolve(chunks.length === 1 ? chunks[0] : Buffer.concat(chunks, size)));
    req.once('error', () => fail(new ApiError('BAD_REQUEST', 'The request body could not be read')));
  });
}

type Inflate = (buf: Buffer, options: zlib.ZlibOptions | zlib.BrotliOptions, cb: (err: Error | null, out: Buffer) => void) => void;

/** The codings a body may arrive in (RFC 9110 8.4.1, as body-parser inflates them); identity is none. */
const CODINGS: Record<string, Inflate | undefined> = Object.assign(Object.create(null), {
  gzip: zlib.gunzip,
  'x-gzip': zlib.gunzip,
  deflate: zlib.inflate,
  br: zlib.brotliDecompress,
});

/**
 * The codings a header lists, lower-case, in the order they were applied, leaving out `skip`
 * (identity, and chunked, which Node.js undid).
 */
function listed(header: string | undefined, skip: string[]): string[] {
  return header === undefined ? [] : header.split(',').map((c) => c.trim().toLowerCase()).filter((c) => c !== '' && !skip.includes(c));
}

/**
 * The codings of the request's body in the order they were applied: its `Content-Encoding`, then
 * the transfer codings before `chunked` (`Transfer-Encoding: gzip, chunked`: Node.js undoes only
 * the chunked framing). 415 UNSUPPORTED_ENCODING for one the router does not decode.
 */
function codingsOf(req: Request): string[] {
  const content = listed(req.headers['content-encoding'], ['identity']);
  const transfer = listed(req.headers['transfer-encoding'], ['identity', 'chunked']);
  for (const [header, codings] of [['Content-Encoding', content], ['Transfer-Encoding', transfer]] as const) {
    const unknown = codings.find((c) => CODINGS[c] === undefined);
    if (unknown !== undefined) throw new ApiError('UNSUPPORTED_ENCODING', `Unsupported ${header} '${unknown}' (gzip, deflate, br or identity)`);
  }
  return [...content, ...transfer];
}

/**
 * A body's bytes with its codings undone, last applied first: what the client compressed, held to
 * `limit` once inflated (a small compressed body can inflate to gigabytes), else BODY_TOO_LARGE;
 * bytes that do not decode are a 400.
 */
async function decoded(raw: Buffer, codings: string[], limit: number): Promise<Buffer> {
  let bytes = raw;
  for (let i = codings.length - 1; i >= 0; i--) {
    const inflate = CODINGS[codings[i]]!;
    bytes = await new Promise<Buffer>((resolve, reject) => {
      inflate(bytes, { maxOutputLength: Math.max(1, limit) }, (err, out) => {
        if (!err) return resolve(out);
        if ((err as NodeJS.ErrnoException).code === 'ERR_BUFFER_TOO_LARGE') return reject(tooLarge(limit));
        reject(new ApiError('BAD_REQUEST', `The request body is not valid ${codings[i]} data (Content-Encoding / Transfer-Encoding)`));
      });
    });
  }
  return within(bytes, limit);
}

/**
 * Throws 413 when a form has more than `max` fields (its non-empty `&`-separated pairs, those
 * URLSearchParams reads), counted before any is parsed: a 1 MB form of 120,000 short fields held
 * the event loop for about a second (parsed, copied, sent to a worker). A multipart form is held
 * to the same `upload.fields` by busboy.
 */
function checkFieldCount(text: string, max: number): void {
  let fields = 0;
  for (let start = 0; start <= text.length; ) {
    const end = text.indexOf('&', start);
    const stop = end < 0 ? text.length : end;
    if (stop > start && ++fields > max) throw new ApiError('BODY_TOO_LARGE', `The form has more than upload.fields (${max}) fields`);
    start = stop + 1;
  }
}

/** The text of a body and, for an urlencoded one, its form fields (at most `maxFields`). */
function fromText(text: string, type: string, maxFields = Infinity): RequestBody {
  if (!/^application\/x-www-form-urlencoded/i.test(type)) return { text, form: {}, parts: [] };
  checkFieldCount(text, maxFields);
  return { text, form: parseForm(formInUtf8(text, type)), parts: [] };
}

/** The body's bytes (a Buffer, or text as UTF-8) within `limit`, else BODY_TOO_LARGE. */
function within<T extends Buffer | string>(body: T, limit: number): T {
  if ((typeof body === 'string' ? Buffer.byteLength(body) : body.length) > limit) throw tooLarge(limit);
  return body;
}

/**
 * A body a host parser read first (express.json(), express.text()...): the raw bytes it kept
 * (`req.rawBody`), else a Buffer or text body as it is; otherwise the parsed value written back as
 * JSON or a form, which may differ from what the client sent (`onReparsed` is told). Each is held
 * to `limit` as a body the router reads is: a host parser's own limit does not lift bodyLimit.
 */
function fromParsed(req: Request, limit: number, onReparsed?: (kind: Reparsed) => void): RequestBody {
  const type = req.headers['content-type'] ?? '';
  const raw = rawBodyOf(req);
  if (raw !== undefined) return fromText(typeof raw === 'string' ? within(raw, limit) : decodeBody(within(raw, limit), type), type);
  const b = req.body as unknown;
  if (b === undefined || b === null) return EMPTY;
  if (typeof b === 'string') return { text: within(b, limit), form: {}, parts: [] };
  if (Buffer.isBuffer(b)) return { text: decodeBody(within(b, limit), type), form: {}, parts: [] };
  if (/^multipart\/form-data/i.test(type)) return fromMultipart(b, limit, onReparsed);
  onReparsed?.('value');
  const isForm = /^application\/x-www-form-urlencoded/i.test(req.headers['content-type'] ?? '');
  if (!isForm || typeof b !== 'object') return { text: within(JSON.stringify(b), limit), form: {}, parts: [] };
  const text = within(new URLSearchParams(formPairs(b)).toString(), limit);
  return { text, form: parseForm(text), parts: [] };
}

/**
 * A multipart body a host parser read (multer, busboy): its form fields (req.body) are the form, and
 * ctx.body is empty as for any multipart request; the files are the host's (`onReparsed` is told).
 * The fields together are held to `limit`, as the router's own reading holds them.
 */
function fromMultipart(fields: unknown, limit: number, onReparsed?: (kind: Reparsed) => void): RequestBody {
  onReparsed?.('multipart');
  const pairs = typeof fields === 'object' && fields !== null ? formPairs(fields) : [];
  let size = 0;
  const form: Record<string, string[]> = {};
  for (const [k, v] of pairs) {
    size += Buffer.byteLength(k) + Buffer.byteLength(v);
    if (size > limit) throw new ApiError('UPLOAD_TOO_LARGE', `The form fields together are larger than bodyLimit (${limit} bytes)`);
    const list = ownGet(form, k);
    if (list) list.push(v);
    else ownSet(form, k, [v]);
  }
  return { text: '', form, parts: [] };
}

/**
 * A form a host parser read (express.urlencoded()) as the fields it was sent as: a repeated name
 * (`a=1&a=2`, parsed into a list) once per value, and a nested object or list of the extended
 * parser (`b[c]=3`, parsed into `{ b: { c: '3' } }`) under its bracketed name, as the router's own
 * reading of the form names it.
 */
function formPairs(value: object, prefix?: string, into: Array<[string, string]> = []): Array<[string, string]> {
  const name = (k: string) => (prefix === undefined ? k : `${prefix}[${k}]`);
  const repeated = Array.isArray(value) && prefix !== undefined && value.every((v) => typeof v !== 'object' || v === null);
  for (const [k, v] of Object.entries(value)) {
    const key = repeated ? prefix : name(k);
    if (typeof v === 'object' && v !== null) formPairs(v as object, key, into);
    else into.push([key, v === undefined || v === null ? '' : String(v)]);
  }
  return into;
}

/** What a host parser that ran first left the router: a parsed value, or a multipart body's fields without its files. */
export type Reparsed = 'value' | 'multipart';

/**
 * `onReparsed` is called when a host body parser ran before the router without keeping the raw
 * body, so ctx.body is rebuilt from the parsed value ('value'), or when a host multipart parser
 * read an upload, whose files the scripts do not get ('multipart').
 */
export async function readBody(req: Request, res: Response, limit: number, upload: UploadLimits, onReparsed?: (kind: Reparsed) => void, folders?: UploadFolders): Promise<RequestBody> {
  // (a request without a body has none, also when a host parser ran and made one up: express.json()'s {})
  if (!hasBody(req)) return EMPTY;
  if (req.readableEnded || (req as { _body?: boolean })._body) return fromParsed(req, limit, onReparsed);
  // a client that left while the request waited (a registry lookup): its stream is destroyed
  // and will never emit again, so a read would wait for ever
  if (req.destroyed) throw new ApiError('BAD_REQUEST', 'The client went away before its body was read');
  const type = req.headers['content-type'] ?? '';
  const codings = codingsOf(req);
  if (/^multipart\/form-data/i.test(type)) {
    // (an upload streams to its files as it arrives: it is read as sent)
    if (codings.length > 0) throw new ApiError('UNSUPPORTED_ENCODING', `A multipart upload is read as sent: its coding '${codings.join(', ')}' (Content-Encoding / Transfer-Encoding) is not supported`);
    return { text: '', ...(await readMultipart(req, res, upload, limit, folders)) };
  }
  const raw = await readRaw(req, limit);
  return fromText(decodeBody(codings.length > 0 ? await decoded(raw, codings, limit) : raw, type), type, upload.fields);
}
