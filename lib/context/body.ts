/**
 * Reads the request body once, within `bodyLimit`: raw text for ctx.body, form fields for
 * getParameter, and uploaded files (multipart, via multer) kept on the host as Parts.
 */
import type { Request, Response } from 'express';
import multer from 'multer';
import { ApiError } from '../errors';
import { ownGet, ownSet } from './own-map';
import { decodeBody, formInUtf8, rawBodyOf } from './charset';

export interface UploadedPart {
  fieldName: string;
  fileName: string | null;
  contentType: string;
  size: number;
  data: Buffer;
}

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

function readRaw(req: Request, limit: number): Promise<Buffer> {
  const declared = Number(req.headers['content-length']);
  if (Number.isFinite(declared) && declared > limit) {
    return Promise.reject(new ApiError('BODY_TOO_LARGE', `Request body is larger than ${limit} bytes`));
  }
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
      if (size > limit) return fail(new ApiError('BODY_TOO_LARGE', `Request body is larger than ${limit} bytes`));
      chunks.push(chunk);
    };
    req.on('data', onData);
    req.once('end', () => resolve(chunks.length === 1 ? chunks[0] : Buffer.concat(chunks, size)));
    req.once('error', () => fail(new ApiError('BAD_REQUEST', 'The request body could not be read')));
  });
}

/**
 * `limit` bounds the whole multipart body (declared or counted as it streams), not only each part:
 * an upload is held in memory until the script ends.
 */
function readMultipart(req: Request, res: Response, limit: number): Promise<RequestBody> {
  const declared = Number(req.headers['content-length']);
  if (Number.isFinite(declared) && declared > limit) {
    return Promise.reject(new ApiError('BODY_TOO_LARGE', `Request body is larger than ${limit} bytes`));
  }
  const upload = multer({ storage: multer.memoryStorage(), limits: { fileSize: limit, fieldSize: limit } }).any();
  return new Promise((resolve, reject) => {
    let settled = false;
    let size = 0;
    const onData = (chunk: Buffer) => {
      size += chunk.length;
      if (size <= limit || settled) return;
      // over the limit (a body without Content-Length): stop parsing, drain the rest, answer 413
      settled = true;
      req.removeListener('data', onData);
      req.unpipe();
      req.resume();
      reject(new ApiError('BODY_TOO_LARGE', `Request body is larger than ${limit} bytes`));
    };
    upload(req, res, (err?: unknown) => {
      req.removeListener('data', onData);
      if (settled) return;
      settled = true;
      if (err) {
        const e = err as { code?: string; message?: string };
        if (e.code === 'LIMIT_FILE_SIZE' || e.code === 'LIMIT_FIELD_VALUE') return reject(new ApiError('BODY_TOO_LARGE', `An upload is larger than ${limit} bytes`));
        return reject(new ApiError('BAD_REQUEST', `Malformed multipart body: ${e.message ?? String(err)}`));
      }
      const files = (req.files ?? []) as Express.Multer.File[];
      const form: Record<string, string[]> = {};
      for (const [k, v] of Object.entries((req.body ?? {}) as Record<string, unknown>)) ownSet(form, k, Array.isArray(v) ? v.map(String) : [String(v)]);
      resolve({
        text: '',
        form,
        parts: files.map((f) => ({ fieldName: f.fieldname, fileName: f.originalname || null, contentType: f.mimetype, size: f.size, data: f.buffer })),
      });
    });
    // (after multer piped the request: a 'data' listener added first could start the flow early)
    req.on('data', onData);
  });
}

/** The text of a body and, for an urlencoded one, its form fields. */
function fromText(text: string, type: string): RequestBody {
  return { text, form: /^application\/x-www-form-urlencoded/i.test(type) ? parseForm(formInUtf8(text, type)) : {}, parts: [] };
}

/**
 * A body a host parser read first (express.json(), express.text()...): the raw bytes it kept
 * (`req.rawBody`), else a Buffer or text body as it is; otherwise the parsed value written back as
 * JSON or a form, which may differ from what the client sent (`onReparsed` is told).
 */
function fromParsed(req: Request, onReparsed?: () => void): RequestBody {
  const type = req.headers['content-type'] ?? '';
  const raw = rawBodyOf(req);
  if (raw !== undefined) return fromText(typeof raw === 'string' ? raw : decodeBody(raw, type), type);
  const b = req.body as unknown;
  if (b === undefined || b === null) return EMPTY;
  if (typeof b === 'string') return { text: b, form: {}, parts: [] };
  if (Buffer.isBuffer(b)) return { text: decodeBody(b, type), form: {}, parts: [] };
  onReparsed?.();
  const isForm = /^application\/x-www-form-urlencoded/i.test(req.headers['content-type'] ?? '');
  const form: Record<string, string[]> = {};
  if (isForm && typeof b === 'object') for (const [k, v] of Object.entries(b as Record<string, unknown>)) ownSet(form, k, Array.isArray(v) ? v.map(String) : [String(v)]);
  return { text: isForm ? new URLSearchParams(form as unknown as Record<string, string>).toString() : JSON.stringify(b), form, parts: [] };
}

/**
 * `onReparsed` is called when a host body parser ran before the router without keeping the raw
 * body, so ctx.body is rebuilt from the parsed value.
 */
export async function readBody(req: Request, res: Response, limit: number, onReparsed?: () => void): Promise<RequestBody> {
  if (req.readableEnded || (req as { _body?: boolean })._body) return fromParsed(req, onReparsed);
  if (!hasBody(req)) return EMPTY;
  const type = req.headers['content-type'] ?? '';
  if (/^multipart\/form-data/i.test(type)) return readMultipart(req, res, limit);
  const raw = await readRaw(req, limit);
  return fromText(decodeBody(raw, type), type);
}
