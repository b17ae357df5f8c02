/**
 * Reads the request body once, within `bodyLimit`: raw text for ctx.body, form fields for
 * getParameter, and uploaded files (multipart, within the `upload` limits: multipart.ts) kept on
 * the host as Parts.
 */
import type { Request, Response } from 'express';
import { ApiError } from '../errors';
import { ownGet, ownSet } from './own-map';
import { decodeBody, formInUtf8, rawBodyOf } from './charset';
import { readMultipart, type UploadedPart } from './multipart';
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

/** The text of a body and, for an urlencoded one, its form fields. */
function fromText(text: string, type: string): RequestBody {
  return { text, form: /^application\/x-www-form-urlencoded/i.test(type) ? parseForm(formInUtf8(text, type)) : {}, parts: [] };
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
function fromParsed(req: Request, limit: number, onReparsed?: () => void): RequestBody {
  const type = req.headers['content-type'] ?? '';
  const raw = rawBodyOf(req);
  if (raw !== undefined) return fromText(typeof raw === 'string' ? within(raw, limit) : decodeBody(within(raw, limit), type), type);
  const b = req.body as unknown;
  if (b === undefined || b === null) return EMPTY;
  if (typeof b === 'string') return { text: within(b, limit), form: {}, parts: [] };
  if (Buffer.isBuffer(b)) return { text: decodeBody(within(b, limit), type), form: {}, parts: [] };
  onReparsed?.();
  const isForm = /^application\/x-www-form-urlencoded/i.test(req.headers['content-type'] ?? '');
  if (!isForm || typeof b !== 'object') return { text: within(JSON.stringify(b), limit), form: {}, parts: [] };
  const text = within(new URLSearchParams(formPairs(b)).toString(), limit);
  return { text, form: parseForm(text), parts: [] };
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

/**
 * `onReparsed` is called when a host body parser ran before the router without keeping the raw
 * body, so ctx.body is rebuilt from the parsed value.
 */
export async function readBody(req: Request, res: Response, limit: number, upload: UploadLimits, onReparsed?: () => void): Promise<RequestBody> {
  if (req.readableEnded || (req as { _body?: boolean })._body) return fromParsed(req, limit, onReparsed);
  if (!hasBody(req)) return EMPTY;
  // a client that left while the request waited (a registry lookup): its stream is destroyed
  // and will never emit again, so a read would wait for ever
  if (req.destroyed) throw new ApiError('BAD_REQUEST', 'The client went away before its body was read');
  const type = req.headers['content-type'] ?? '';
  if (/^multipart\/form-data/i.test(type)) return { text: '', ...(await readMultipart(req, res, upload, limit)) };
  const raw = await readRaw(req, limit);
  return fromText(decodeBody(raw, type), type);
}
