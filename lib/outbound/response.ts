/**
 * The response side of the outbound client: the deadline shared by a whole call, safe error
 * messages, and reading the body (text or streamed to a file) under the size cap and, for a body
 * read whole, within the call's budget (lib/outbound/budget.ts).
 */
import * as fs from 'node:fs';
import type * as http from 'node:http';
import { Readable, Transform } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import { ApiError } from '../errors';
import { tempPathFor } from '../files/sandbox-path';
import type { BodyAccount } from './budget';

/** The answer to an outbound call; the body is read at most once (bytes() and text() may be repeated). */
export interface OutboundResponse {
  status: number;
  /** Lower-case names, repeated values joined with `, `. */
  headers: Record<string, string>;
  /** Final URL, after redirects (without credentials). */
  url: string;
  /** The body's length as the upstream declared it (0 for the answer to a HEAD, a 204 or a 304), else undefined. */
  readonly declaredSize: number | undefined;
  /**
   * The whole body, kept for later reads; OUTBOUND_FAILED past maxBodyBytes, or when the call's
   * budget for bodies has no room for it (a declared length that does not fit: nothing is read,
   * and a later read or saveTo may still take it).
   */
  bytes(): Promise<Buffer>;
  /**
   * The whole body when it is at most `limit` bytes (read now, kept as bytes() keeps it), else
   * undefined: a body declared larger is not read, one of no declared length is read until it
   * passes `limit` and the rest left where it is, for bytes() or saveTo to go on with. A failure
   * is left to them too (undefined here).
   */
  head(limit: number): Promise<Buffer | undefined>;
  /** The body decoded by the content-type charset (default utf-8); OUTBOUND_FAILED past maxBodyBytes. */
  text(): Promise<string>;
  /** Streams the body to `absPath` (temp file + rename); returns its size. Past maxBodyBytes nothing is kept. Not counted in the budget. */
  saveTo(absPath: string): Promise<number>;
  /** Closes the connection if the body was not read; gives back the budget its body held. */
  discard(): void;
}

const failed = (message: string) => new ApiError('OUTBOUND_FAILED', message);

/**
 * One timer for a whole call (all hops and the body); on expiry, or when `signal` aborts, it
 * destroys the current stream.
 */
export class Deadline {
  private readonly timer: NodeJS.Timeout;
  private target: { destroy(err: Error): void } | undefined;
  private ended: 'timeout' | 'cancelled' | undefined;
  private readonly onAbort = () => this.end('cancelled');
  host = '';
  /** Whether the deadline has passed or the call was cancelled. */
  get over(): boolean {
    return this.ended !== undefined;
  }
  constructor(
    private readonly ms: number,
    private readonly signal?: AbortSignal,
  ) {
    this.timer = setTimeout(() => this.end('timeout'), ms);
    this.timer.unref();
    if (signal?.aborted) this.ended = 'cancelled';
    else signal?.addEventListener('abort', this.onAbort, { once: true });
  }
  error(): ApiError {
    if (this.ended === 'cancelled') return failed(`request to ${this.host} was cancelled: the call it was made for has ended`);
    return failed(`request to ${this.host} timed out after ${this.ms} ms`);
  }
  watch(target: { destroy(err: Error): void }): void {
    this.target = target;
    if (this.ended) target.destroy(this.error());
  }
  clear(): void {
    clearTimeout(this.timer);
    this.signal?.removeEventListener('abort', this.onAbort);
  }
  private end(why: 'timeout' | 'cancelled'): void {
    this.ended ??= why;
    this.target?.destroy(this.error());
  }
}

/** Wraps a network or file error as OUTBOUND_FAILED with a safe message (code, host; no stack, no paths). */
export function describe(err: unknown, host: string, during: string): ApiError {
  if (err instanceof ApiError) return err;
  const e = err as NodeJS.ErrnoException;
  const code = typeof e?.code === 'string' ? e.code : undefined;
  if (e?.syscall && ['open', 'write', 'rename', 'mkdir'].includes(e.syscall)) return failed(`could not write the response body to the file (${code ?? 'error'})`);
  if (code === 'ENOTFOUND' || code === 'EAI_AGAIN') return failed(`could not resolve host ${host} (${code})`);
  if (code === 'ECONNREFUSED') return failed(`connection to ${host} was refused`);
  if (code === 'ECONNRESET') return failed(`connection to ${host} was reset ${during}`);
  return failed(`request to ${host} failed ${during} (${code ?? (e?.message || 'error')})`);
}

function decode(buf: Buffer, contentType: string | undefined): string {
  const charset = /charset\s*=\s*"?([^";\s]+)/i.exec(contentType ?? '')?.[1] ?? 'utf-8';
  try {
    return new TextDecoder(charset).decode(buf);
  } catch {
    return new TextDecoder('utf-8').decode(buf);
  }
}

/** The OutboundResponse over one IncomingMessage; ends the call's deadline once the body is done. */
export class OutboundHttpResponse implements OutboundResponse {
  readonly status: number;
  readonly headers: Record<string, string> = {};
  readonly url: string;
  readonly declaredSize: number | undefined;
  private state: 'unread' | 'reading' | 'done' = 'unread';
  private buffered: Promise<Buffer> | undefined;
  /** Bytes of the body taken from `account`. */
  private held = 0;
  private discarded = false;
  /** The start of a body of no declared length that head() read (and took from the budget, but for a last chunk it had no room for), not yet passed on. */
  private ahead: Buffer[] = [];

  /** The answer to a HEAD, a 204 or a 304 has no body, whatever Content-Length it declares. */
  private readonly bodiless: boolean;

  constructor(
    private readonly res: http.IncomingMessage,
    url: URL,
    private readonly deadline: Deadline,
    private readonly max: number,
    method: string,
    /** The call's part of the router's budget for bodies read whole; none: not counted. */
    private readonly account?: BodyAccount,
  ) {
    this.status = res.statusCode ?? 0;
    this.bodiless = method === 'HEAD' || this.status === 204 || this.status === 304;
    const declared = Number(res.headers['content-length']);
    this.declaredSize = this.bodiless ? 0 : Number.isFinite(declared) ? declared : undefined;
    for (const [k, v] of Object.entries(res.headersDistinct)) if (v && k !== '__proto__') this.headers[k] = v.join(', ');
    const clean = new URL(url.href);
    clean.username = '';
    clean.password = '';
    this.url = clean.href;
  }

  bytes(): Promise<Buffer> {
    if (!this.buffered) {
      // A declared length is taken before anything is read, as is the part of what head() read ahead
      // that it had no room for: one that does not fit leaves the body unread (saveTo may stream it).
      const declared = this.declaredSize;
      let need = 0;
      if (this.state === 'unread' && declared === undefined) need = this.ahead.reduce((n, c) => n + c.length, 0) - this.held;
      else if (this.state === 'unread' && declared !== undefined && declared <= this.max) need = declared;
      if (need > 0) {
        try {
          this.take(need);
        } catch (err) {
          return Promise.reject(err);
        }
      }
      this.buffered = this.readAll();
    }
    return this.buffered;
  }

  head(limit: number): Promise<Buffer | undefined> {
    const declared = this.declaredSize;
    if (declared !== undefined || this.state !== 'unread' || this.buffered) {
      if (declared !== undefined && declared > limit && !this.buffered) return Promise.resolve(undefined);
      return this.bytes().then(
        (buf) => (buf.length <= limit ? buf : undefined),
        () => undefined,
      );
    }
    return new Promise((resolve) => {
      const res = this.res;
      let size = 0;
      const stop = () => {
        res.off('data', onData);
        res.off('end', onEnd);
        res.off('error', onFail);
        res.off('close', onClose);
      };
      // (a failure is the body's: bytes() and saveTo answer it)
      const onFail = (err: unknown) => {
        stop();
        res.destroy();
        this.ahead = [];
        this.giveBack();
        this.done();
        this.buffered = Promise.reject(describe(err, this.deadline.host, 'while reading the body'));
        this.buffered.catch(() => undefined);
        resolve(undefined);
      };
      const onData = (chunk: Buffer) => {
        size += chunk.length;
        this.ahead.push(chunk);
        if (size > this.max) return onFail(failed(`response body from ${this.deadline.host} is larger than ${this.max} bytes`));
        // (a chunk the budget has no room for ends the read ahead, not the body: saveTo, outside
        // the budget, still streams it; bytes() takes it first, and fails as it would have)
        let refused = false;
        try {
          this.take(chunk.length);
        } catch {
          refused = true;
        }
        if (refused || size > limit) {
          // the rest stays in the connection, for bytes() or saveTo
          stop();
          res.pause();
          resolve(undefined);
        }
      };
      const onEnd = () => {
        stop();
        this.done();
        const whole = Buffer.concat(this.ahead, size);
        this.ahead = [];
        this.buffered = Promise.resolve(whole);
        resolve(whole);
      };
      const onClose = () => onFail(new Error('aborted'));
      res.on('data', onData);
      res.once('end', onEnd);
      res.once('error', onFail);
      res.once('close', onClose);
    });
  }

  text(): Promise<string> {
    return this.bytes().then((buf) => decode(buf, this.headers['content-type']));
  }

  async saveTo(absPath: string): Promise<number> {
    const tmp = tempPathFor(absPath);
    if (this.buffered) {
      const buf = await this.buffered;
      return this.finishFile(tmp, absPath, () => fs.promises.writeFile(tmp, buf, { flag: 'wx' })).then(() => buf.length);
    }
    this.claim();
    // (what head() read goes to the file first; streamed bodies are not counted in the budget)
    const ahead = this.ahead;
    this.ahead = [];
    this.giveBack();
    let size = 0;
    const max = this.max;
    const host = this.deadline.host;
    const counter = new Transform({
      transform(chunk: Buffer, _enc, cb) {
        size += chunk.length;
        if (size > max) cb(failed(`response body from ${host} is larger than ${max} bytes`));
        else cb(null, chunk);
      },
    });
    const file = fs.createWriteStream(tmp, { flags: 'wx' });
    try {
      const res = this.res;
      const body = ahead.length === 0 ? res : Readable.from((async function* () {
        yield* ahead;
        yield* res;
      })());
      await this.finishFile(tmp, absPath, () => pipeline(body, counter, file), file);
      return size;
    } finally {
      this.done();
    }
  }

  discard(): void {
    this.ahead = [];
    if (this.state === 'unread') {
      this.res.destroy();
      this.done();
    }
    this.buffered = undefined;
    this.discarded = true;
    if (this.state !== 'reading') this.giveBack(); // (a body being read gives back when it ends)
  }

  /**
   * Writes `tmp` with `write`, renames it to `absPath`; removes `tmp` on any failure, once `file`
   * (the stream writing it) closed: a body failing before the stream opened its file would
   * otherwise see the file created after its removal.
   */
  private async finishFile(tmp: string, absPath: string, write: () => Promise<unknown>, file?: fs.WriteStream): Promise<void> {
    try {
      await write();
      await fs.promises.rename(tmp, absPath);
    } catch (err) {
      this.res.destroy();
      if (file !== undefined && !file.closed) await new Promise<void>((resolve) => file.destroy().once('close', () => resolve()));
      await fs.promises.rm(tmp, { force: true }).catch(() => undefined);
      throw describe(err, this.deadline.host, 'while reading the body');
    }
  }

  private claim(): void {
    if (this.state !== 'unread') throw failed('the response body was already read or discarded');
    this.state = 'reading';
    const declared = this.declaredSize;
    if (declared !== undefined && declared > this.max) {
      this.res.destroy();
      this.done();
      throw failed(`response body from ${this.deadline.host} is larger than ${this.max} bytes`);
    }
  }


  private async readAll(): Promise<Buffer> {
    this.claim();
    // (the start head() read, already taken from the budget: `held`)
    const chunks: Buffer[] = this.ahead;
    this.ahead = [];
    let size = 0;
    for (const c of chunks) size += c.length;
    try {
      for await (const chunk of this.res as AsyncIterable<Buffer>) {
        size += chunk.length;
        if (size > this.max) throw failed(`response body from ${this.deadline.host} is larger than ${this.max} bytes`);
        if (size > this.held) this.take(size - this.held);
        chunks.push(chunk);
      }
    } catch (err) {
      this.res.destroy();
      this.giveBack();
      throw describe(err, this.deadline.host, 'while reading the body');
    } finally {
      this.done();
    }
    if (this.discarded) this.giveBack();
    return Buffer.concat(chunks, size);
  }

  private take(bytes: number): void {
    this.account?.take(bytes, `response body from ${this.deadline.host}`);
    this.held += bytes;
  }

  private giveBack(): void {
    this.account?.give(this.held);
    this.held = 0;
  }

  private done(): void {
    this.state = 'done';
    this.deadline.clear();
  }
}

