/**
 * The host side of a request's host calls: the one table of host operations (HostOps in
 * lib/runtime/messages.ts): accounts, outbound HTTP, uploaded parts, automations, charsets and
 * console output. One HostServices per request; `dispose()` drops the outbound responses it kept
 * (their bodies, held for `saveBodyAsFile`, giving back the router's budget for them) and ends
 * its outbound calls still in flight.
 */
import { setMaxListeners } from 'node:events';
import { stat } from 'node:fs/promises';
import { inspect } from 'node:util';
import { ApiError, thrownText } from '../errors';
import type { UploadedPart } from '../context/body';
import type { HostBridge } from '../runtime/engine';
import type { HostOp, HostOps } from '../runtime/messages';
import type { OutboundClient, OutboundResponse } from '../outbound/client';
import type { BodyAccount } from '../outbound/budget';
import { namesDirectory, normalizeAppPath, resolveAppPath } from '../files/sandbox-path';
import { attachmentFileOf, checkPartFile, saveAttachmentTo, savePart } from '../files/part-files';
import type { FileStorage } from '../files/storage';
import { LocalFileStorage } from '../files/local-storage';
import { nativeEncoding } from '../context/charset';
import { hostJson } from '../runtime/serialize';
import type { ApiRouterOptions, AutomationDefinition, Logger, RegistryStage } from '../types';

/** What the router shares with every request's host services. */
export interface HostShared {
  options: ApiRouterOptions;
  outbound: OutboundClient;
  logger: Logger | undefined;
  /** The apps' local sandboxes (`sandboxDir`) and shared storage (`storage` / `storageDir`). */
  files: { sandbox?: FileStorage; storage?: FileStorage };
  /** The writes into folders on this machine still under way, for router.close() to wait for. */
  writes?: LocalWrites;
  /**
   * The memory a script's call has (MiB) and the option that sets it: the router's
   * `scriptMemoryLimitMb`, or a WorkerPool's `memoryLimitMb` when it was given one; undefined for an
   * engine of one's own (its limits are its own: a body's read is not checked against one).
   */
  scriptMemory?: { mb: number; option: string };
}

/**
 * Writes into the apps' folders on this machine (`saveBodyAsFile`, `part.save`, a `saveStorage` into
 * a LocalFileStorage) still under way. One may outlive its call (a script that timed out, a call
 * ended by close({ force: true })): it then fails and removes its temporary file, a moment later.
 * `settled()` waits for them, so that a process exiting after router.close() leaves no half-written
 * `.<name>.<random>.tmp` in an app's folder. (A storage or attachments service of one's own is not
 * waited for: it may not end when its signal aborts.)
 */
export class LocalWrites {
  private readonly pending = new Set<Promise<void>>();

  add(work: Promise<unknown>): void {
    const settled: Promise<void> = work.then(
      () => undefined,
      () => undefined,
    );
    this.pending.add(settled);
    void settled.then(() => this.pending.delete(settled));
  }

  /** Resolves once no write is under way (also those begun meanwhile). */
  async settled(): Promise<void> {
    while (this.pending.size > 0) await Promise.all(this.pending);
  }
}

export interface RequestInfo {
  appId: string;
  apiPath: string;
  requestId: string;
  parts: UploadedPart[];
  /** The registry stage the request is served from (preview path: `preview`). */
  stage?: RegistryStage;
  /**
   * [automation] The definitions of the automations the API names, as the router read them with
   * its scripts (for the host's runner): by id, the registry's answer or what its lookup threw.
   */
  automations?: ReadonlyMap<string, ReadAutomation>;
  /**
   * The connection the call answers on: once it is destroyed the client has gone (HostBridge.gone).
   * (The socket, not the response: a connection outlives its requests, so holding it keeps nothing
   * alive longer; holding each response cost the trivial bench 5-7%, in garbage collection.)
   */
  connection?: { readonly destroyed: boolean } | null;
}

/** What `registry.getAutomation` answered for one id, or what it threw. */
export type ReadAutomation = { ok: true; value: unknown } | { ok: false; error: unknown };

/**
 * Most outbound responses a call holds, in flight or kept (for `saveBodyAsFile`, or a body over
 * INLINE_BODY_BYTES not read yet): a new request releases the oldest kept one that is not being
 * saved, or is refused when there is none.
 */
const MAX_OPEN_RESPONSES = 32;
/**
 * Why a request's end signal aborts: one AbortError for all (`abort()` without a reason makes a
 * DOMException, with its stack, for every request that made an outbound call).
 */
const REQUEST_ENDED = new DOMException('The request has ended', 'AbortError');
/** The end signal of a request disposed before any outbound call: calls made after that end at once. */
const DISPOSED = new AbortController();
DISPOSED.abort(REQUEST_ENDED);
/**
 * What a save needs when the router has not got it: the option to set (the sandbox and shared storage
 * are two areas, two options; "file storage" alone sent people to set `storageDir` for part.save).
 */
const NOT_CONFIGURED = {
  'part.save': 'part.save needs the router option `sandboxDir` (the apps\' local sandboxes)',
  'part.saveStorage': 'part.saveStorage needs shared storage (the router option `storage` or `storageDir`)',
  'http.saveBodyAsFile': 'saveBodyAsFile needs the router option `sandboxDir` (the apps\' local sandboxes)',
} as const;
/** Largest body sent to the script with its response; a larger one crosses only when read. */
export const INLINE_BODY_BYTES = 1024 * 1024;
/** Console lines one request may log; the rest are counted and reported in one line. */
export const MAX_LOG_LINES = 200;

/**
 * A body of at most INLINE_BODY_BYTES goes back with the response, so the script reads `.body`
 * without a second host call: the host reads it whole (within the router's budget for bodies) and
 * keeps it. A larger one is not read past its first INLINE_BODY_BYTES (none when its length is
 * declared): the script's first read (`http.body`) reads it whole, or `saveBodyAsFile` streams it
 * to its file, never held in memory. One that failed (too large, over the budget, timed out,
 * reset) is left to `http.body`, which answers that failure.
 */
async function inlineBody(res: OutboundResponse): Promise<string | undefined> {
  return (await res.head(INLINE_BODY_BYTES)) === undefined ? undefined : res.text();
}

/**
 * A response body's text, when a script's memory (`memory.mb`) can hold it as it crosses: its copy
 * into the sandbox and the string made of it take about twice its length when it is ASCII, up to
 * five times when not. A larger one fails its read with OUTBOUND_FAILED naming saveBodyAsFile (it
 * would fail the script's memory, or the engine, halfway through).
 */
function fitsScript(text: string, memory: { mb: number; option: string }, from: string): string {
  const limit = memory.mb * 1024 * 1024;
  if (text.length * 5 <= limit) return text;
  // eslint-disable-next-line no-control-regex
  if (text.length * (/[^\x00-\x7f]/.test(text) ? 5 : 2) <= limit) return text;
  throw tooLargeForScript(text.length, 'characters', memory, from);
}

/**
 * The least a body's byte takes in a script as it crosses (fitsScript): an ASCII byte 2 bytes,
 * three bytes of one UTF-8 character 5, so at least 1.5 a byte whatever the text.
 */
const MIN_CROSSING_BYTES_PER_BYTE = 1.5;

function tooLargeForScript(size: number, unit: string, memory: { mb: number; option: string }, from: string): ApiError {
  return new ApiError('OUTBOUND_FAILED', `response body from ${new URL(from).host} is ${size} ${unit}: more than a script's memory (${memory.option}: ${memory.mb}) holds; stream it to a file with saveBodyAsFile`);
}

/**
 * What a host service threw, for its log line: an error's stack, else the value as inspect shows it
 * (errors.ts's thrownText, the message alone, when even that throws: a hostile proxy).
 */
function failureText(e: unknown): string {
  try {
    const stack = (e as Error | null)?.stack;
    if (typeof stack === 'string') return stack;
    return typeof e === 'string' ? e : inspect(e);
  } catch {
    return thrownText(e);
  }
}

/** What an accounts lookup answered, as JSON, when it is neither null nor an account (an object with a string `id`). */
function notAnAccount(v: unknown): string | undefined {
  if (v === null) return undefined;
  if (Array.isArray(v)) return 'an array';
  if (typeof v !== 'object') return `a ${typeof v}`;
  const id = (v as { id?: unknown }).id;
  if (typeof id !== 'string') return `an object whose id is ${id === undefined ? 'missing' : `a ${id === null ? 'null' : typeof id}`}`;
  return undefined;
}

function str(v: unknown, field: string): string {
  if (typeof v !== 'string' || v === '') throw new ApiError('SCRIPT_ERROR', `${field} must be a non-empty string`);
  return v;
}

/** The last code point of the one-byte encodings `platform.utils.stringToBytes` writes. */
const ONE_BYTE_MAX: Partial<Record<BufferEncoding, number>> = { latin1: 0xff, ascii: 0x7f };
/**
 * Most bytes `platform.utils.stringToBytes` encodes on the host (charsets other than UTF-8). Its
 * answer is an array of numbers, built and serialized on the host's event loop (about 4 bytes of
 * JSON a byte) and parsed again in the worker: a few MB held every app for seconds, 16M aborted
 * the process. 256 KiB crosses about as much as a response body sent with its response.
 */
export const MAX_ENCODED_BYTES = 256 * 1024;

export class HostServices implements HostBridge {
  private readonly responses = new Map<string, OutboundResponse>();
  /** Responses with a `saveBodyAsFile` running (how many each): not released from the window meanwhile. */
  private readonly saving = new Map<string, number>();
  /** This request's part of the router's budget for outbound bodies (taken on the first request). */
  private bodies: BodyAccount | undefined;
  /** Kept responses whose body did not come with them (not read whole: it may hold its connection), counted in the app's open requests. */
  private readonly holding = new Set<string>();
  /** `http.request` calls waiting for their response and its body. */
  private opening = 0;
  /** Aborted by `dispose()`: outbound calls still in flight end with the request (made by the first). */
  private ended: AbortController | undefined;
  private nextId = 1;
  private logLines = 0;

  constructor(
    private readonly shared: HostShared,
    private readonly info: RequestInfo,
  ) {}

  /** Whether the client has gone (the response's connection closed): a call still waiting for a worker is dropped. */
  gone(): boolean {
    return this.info.connection?.destroyed === true;
  }

  /** The signal that ends this request's outbound and storage calls (aborted already once it is disposed). */
  private endSignal(): AbortSignal {
    if (this.ended === undefined) {
      this.ended = new AbortController();
      // (each request in flight listens for the end of its call: up to MAX_OPEN_RESPONSES at once)
      setMaxListeners(MAX_OPEN_RESPONSES, this.ended.signal);
    }
    return this.ended.signal;
  }

  /** The host operations (HostOps in lib/runtime/messages.ts), one handler each, for request `s`. */
  private static readonly OPS: { [K in HostOp]: (s: HostServices, args: HostOps[K]['args']) => Promise<HostOps[K]['result']> | HostOps[K]['result'] } = {
    console: (s, args) => {
      s.log(String(args.level ?? 'log'), String(args.message ?? ''), String(args.script ?? ''));
      return null;
    },
    'system.getAccountByToken': async (s, args) => {
      const { accounts } = s.shared.options;
      if (!accounts || args.token == null || args.token === '') return null;
      let account: unknown;
      try {
        const { appId, requestId } = s.info;
        account = hostJson(await accounts.getAccountByToken(String(args.token), { appId, requestId, preview: s.info.stage === 'preview', signal: s.endSignal() }));
      } catch (e) {
        s.shared.logger?.error(`scriptable-api: accounts.getAccountByToken failed: ${failureText(e)}`, { appId: s.info.appId, requestId: s.info.requestId });
        throw new ApiError('HOST_ERROR', 'Account lookup failed');
      }
      // (what a script checks is `account == null`: a false, 0 or '' for "no account" would pass as one)
      const wrong = notAnAccount(account);
      if (wrong !== undefined) {
        s.shared.logger?.error(`scriptable-api: accounts.getAccountByToken returned ${wrong}, not an account (an object with a string id) or null`, { appId: s.info.appId, requestId: s.info.requestId });
        throw new ApiError('HOST_ERROR', 'Account lookup failed');
      }
      return account as HostOps['system.getAccountByToken']['result'];
    },
    'http.request': async (s, args) => {
      // (requests in flight count: a script's calls at once must not each pass the check)
      if (s.opening >= MAX_OPEN_RESPONSES) throw new ApiError('OUTBOUND_FAILED', `At most ${MAX_OPEN_RESPONSES} outbound requests at once per call`);
      if (s.responses.size + s.opening >= MAX_OPEN_RESPONSES) {
        // (a body saveBodyAsFile is streaming to its file keeps its connection: it stays until saved)
        const oldest = [...s.responses.keys()].find((id) => !s.saving.has(id));
        if (oldest === undefined) throw new ApiError('OUTBOUND_FAILED', `At most ${MAX_OPEN_RESPONSES} outbound requests at once per call`);
        s.release(oldest);
      }
      const { outbound } = s.shared;
      outbound.hold(s.info.appId); // (given back once its body is in, or when a response kept unread is released)
      s.opening++;
      let res: OutboundResponse;
      let body: string | undefined;
      try {
        res = await outbound.request({
          url: str(args.url, 'url'),
          method: typeof args.method === 'string' ? args.method : undefined,
          headers: args.headers && typeof args.headers === 'object' ? args.headers : undefined,
          body: typeof args.bytes === 'string' ? Buffer.from(args.bytes, 'base64') : args.body == null ? undefined : typeof args.body === 'string' ? args.body : JSON.stringify(args.body),
          timeoutMs: typeof args.timeoutMs === 'number' ? args.timeoutMs : undefined,
          signal: s.endSignal(),
          appId: s.info.appId,
          account: (s.bodies ??= outbound.account()),
        });
        // (in flight until its body is in: one released from the window while it arrives would
        // go on reading, its connection open, beside 32 others)
        body = await inlineBody(res);
      } catch (e) {
        outbound.release(s.info.appId);
        throw e;
      } finally {
        s.opening--;
      }
      const id = String(s.nextId++);
      s.responses.set(id, res);
      // (a body that came with its response was read whole: its connection is free again)
      if (body === undefined) s.holding.add(id);
      else outbound.release(s.info.appId);
      if (s.ended?.signal.aborted) s.release(id); // (the call ended while the body arrived)
      return { id, status: res.status, headers: res.headers, url: res.url, body };
    },
    'http.body': (s, args) => {
      const res = s.response(args.id);
      const memory = s.shared.scriptMemory;
      if (memory === undefined) return res.text();
      // (a length declared past what any text of it could fit is refused before it is read into memory)
      if (res.declaredSize !== undefined && res.declaredSize * MIN_CROSSING_BYTES_PER_BYTE > memory.mb * 1024 * 1024) {
        throw tooLargeForScript(res.declaredSize, 'bytes', memory, res.url);
      }
      return res.text().then((text) => fitsScript(text, memory, res.url));
    },
    // an automation's http step has read the body: the handle goes
    'http.release': (s, args) => {
      s.release(String(args.id));
      return null;
    },
    'http.saveBodyAsFile': (s, args) => s.writing(s.shared.files.sandbox, s.saveBody(args)),
    'part.save': (s, args) => s.writing(s.shared.files.sandbox, s.savePartTo('part.save', s.shared.files.sandbox, args)),
    'part.saveStorage': (s, args) => s.writing(s.shared.files.storage, s.savePartTo('part.saveStorage', s.shared.files.storage, args)),
    // (an attachments service of one's own stores them where it likes)
    'part.saveAttachment': (s, args) => s.writing(s.shared.options.attachments ? undefined : s.shared.files.storage, s.saveAttachment(args)),
    'utils.stringToBytes': (s, args) => {
      const encoding = nativeEncoding(String(args.charset ?? 'utf-8').toLowerCase());
      if (encoding === undefined) throw Object.assign(new RangeError(`Unsupported charset '${String(args.charset)}'`), { code: undefined });
      const text = String(args.text ?? '');
      const max = ONE_BYTE_MAX[encoding];
      // (one-byte charsets: at most one byte per UTF-16 unit, so the length bounds the size)
      const size = max === undefined ? Buffer.byteLength(text, encoding) : text.length;
      if (size > MAX_ENCODED_BYTES) {
        throw Object.assign(new RangeError(`stringToBytes: the text takes more than ${MAX_ENCODED_BYTES} bytes in '${String(args.charset)}'`), { code: undefined });
      }
      if (max === undefined) return Buffer.from(text, encoding).toJSON().data;
      // one byte per character; one it cannot encode (a surrogate pair counts as one) becomes '?', as in Java
      const out: number[] = [];
      for (let i = 0; i < text.length; i++) {
        const c = text.charCodeAt(i);
        if (c >= 0xd800 && c <= 0xdbff && (text.charCodeAt(i + 1) & 0xfc00) === 0xdc00) i++;
        out.push(c <= max ? c : 63);
      }
      return out;
    },
    'automation.run': (s, args) => s.runAutomation(args),
  };

  async call(op: string, args: Record<string, unknown>): Promise<unknown> {
    if (!Object.prototype.hasOwnProperty.call(HostServices.OPS, op)) throw new ApiError('SCRIPT_ERROR', `Unknown host operation '${op}'`);
    return HostServices.OPS[op as HostOp](this, args as never);
  }

  /** `work`, a write into `target`, counted among the router's local writes (HostShared.writes) until it settles when `target` is a folder on this machine. */
  private writing<T>(target: FileStorage | undefined, work: Promise<T>): Promise<T> {
    if (target instanceof LocalFileStorage) this.shared.writes?.add(work);
    return work;
  }

  private async saveBody(args: HostOps['http.saveBodyAsFile']['args']): Promise<{ path: string; size: number }> {
    const target = str(args.path, 'path');
    const res = this.response(args.id); // (before any folder is made for it)
    if (!this.shared.options.sandboxDir) throw new ApiError('FILES_NOT_CONFIGURED', NOT_CONFIGURED['http.saveBodyAsFile']);
    const abs = await resolveAppPath(this.shared.options.sandboxDir, this.info.appId, target, { forWrite: true });
    // (as part.save answers it: the script's mistake, not an outbound failure)
    if ((await stat(abs).catch(() => undefined))?.isDirectory()) throw namesDirectory(target);
    const id = String(args.id);
    this.saving.set(id, (this.saving.get(id) ?? 0) + 1);
    try {
      return { path: normalizeAppPath(target), size: await res.saveTo(abs) };
    } finally {
      const left = this.saving.get(id)! - 1;
      if (left > 0) this.saving.set(id, left);
      else this.saving.delete(id);
    }
  }

  private async saveAttachment(args: HostOps['part.saveAttachment']['args']): Promise<unknown> {
    const part = this.part(args.id);
    const tableId = str(args.tableId, 'tableId');
    const fieldId = str(args.fieldId, 'fieldId');
    const { attachments } = this.shared.options;
    if (!attachments) return this.storing('part.saveAttachment', saveAttachmentTo(this.shared.files.storage, this.info.appId, tableId, fieldId, part, this.endSignal()));
    await checkPartFile(part);
    const saved = await this.storing('part.saveAttachment', (async () => attachments.save(this.info.appId, tableId, fieldId, attachmentFileOf(part)))());
    return this.fromService('attachments.save', saved);
  }

  private async savePartTo(op: 'part.save' | 'part.saveStorage', target: FileStorage | undefined, args: HostOps['part.save']['args']): Promise<{ path: string; size: number }> {
    if (!target) throw new ApiError('FILES_NOT_CONFIGURED', NOT_CONFIGURED[op]);
    const saved = await this.storing(op, savePart(target, this.info.appId, str(args.path, 'path'), this.part(args.id), this.endSignal()));
    return { path: saved.path, size: saved.size };
  }

  private async runAutomation(args: HostOps['automation.run']['args']): Promise<unknown> {
    const { options } = this.shared;
    const id = str(args.automation, 'automation');
    let def: AutomationDefinition | null | undefined;
    // (read with the request's scripts: a definition changed since is for the next request)
    const read = this.info.automations?.get(id);
    try {
      if (read !== undefined && !read.ok) throw read.error;
      if (read !== undefined) def = read.value as AutomationDefinition | null | undefined;
      else def = options.registry.getAutomation ? await options.registry.getAutomation(this.info.appId, id, this.info.stage ?? 'published') : undefined;
    } catch (e) {
      // (as when the router looks a definition up: logged, and the caller gets no internals)
      this.shared.logger?.error(`scriptable-api: registry.getAutomation failed: ${failureText(e)}`, { appId: this.info.appId, requestId: this.info.requestId });
      throw new ApiError('HOST_ERROR');
    }
    if (!options.registry.getAutomation) throw new ApiError('AUTOMATION_UNAVAILABLE', `The registry has no getAutomation: automation '${id}' cannot be loaded`);
    if (!def) throw new ApiError('AUTOMATION_NOT_FOUND', `Automation '${id}' not found in app '${this.info.appId}'`);
    if (!options.automations) throw new ApiError('AUTOMATION_UNAVAILABLE', 'This router has no `automations` runner');
    const result = await options.automations.run({
      appId: this.info.appId,
      requestId: this.info.requestId,
      automation: def,
      stage: args.stage === 'after' ? 'after' : 'call',
      preview: this.info.stage === 'preview',
      input: args.input,
      signal: this.endSignal(),
    });
    return this.fromService('automations.run', result);
  }

  /** A service's answer as JSON (hostJson); one JSON cannot hold is logged, and the call gets a host error. */
  private fromService(service: string, value: unknown): unknown {
    try {
      return hostJson(value);
    } catch (e) {
      this.shared.logger?.error(`scriptable-api: ${service} returned a value that is not JSON: ${(e as Error)?.message}`, { appId: this.info.appId, requestId: this.info.requestId });
      throw new ApiError('HOST_ERROR', `${service} returned a value that is not JSON`);
    }
  }

  /**
   * A storage's (or the attachments service's) own failure is logged and reaches the script as a
   * host error, without its details; an ApiError it throws reaches the script as it is.
   */
  private async storing<T>(op: string, work: Promise<T>): Promise<T> {
    try {
      return await work;
    } catch (e) {
      if (e instanceof ApiError) throw e;
      // (ended by the request's end, dispose(): nothing failed in the storage, and nobody waits for the answer)
      if (this.ended?.signal.aborted) throw new ApiError('HOST_ERROR', 'The file could not be stored: the request has ended');
      this.shared.logger?.error(`scriptable-api: ${op} failed in storage: ${failureText(e)}`, { appId: this.info.appId, requestId: this.info.requestId });
      throw new ApiError('HOST_ERROR', 'The file could not be stored');
    }
  }

  private release(id: string): void {
    const res = this.responses.get(id);
    if (!res) return;
    res.discard();
    this.responses.delete(id);
    if (this.holding.delete(id)) this.shared.outbound.release(this.info.appId);
  }

  private response(id: unknown): OutboundResponse {
    const res = this.responses.get(String(id));
    if (!res) throw new ApiError('OUTBOUND_FAILED', 'That response body is no longer available');
    return res;
  }

  private part(id: unknown): UploadedPart {
    const part = typeof id === 'string' && /^(0|[1-9][0-9]*)$/.test(id) ? this.info.parts[Number(id)] : undefined;
    if (!part) throw new ApiError('SCRIPT_ERROR', 'Unknown part');
    return part;
  }

  private log(level: string, message: string, script: string): void {
    const logger = this.shared.logger;
    if (!logger || ++this.logLines > MAX_LOG_LINES) return;
    const preview = this.info.stage === 'preview'; // (marked as a preview call's failure line is)
    const meta = { appId: this.info.appId, script, requestId: this.info.requestId, ...(preview ? { preview: true } : {}) };
    const line = `[${preview ? 'preview/' : ''}${this.info.appId}/${script}] ${message}`;
    if (level === 'error') logger.error(line, meta);
    else if (level === 'warn') logger.warn(line, meta);
    else if (level === 'debug') (logger.debug ?? logger.info).call(logger, line, meta);
    else logger.info(line, meta);
  }

  /** Drops the outbound responses of this request and ends its outbound calls still in flight. */
  dispose(): void {
    if (this.ended) this.ended.abort(REQUEST_ENDED);
    else this.ended = DISPOSED;
    if (this.logLines > MAX_LOG_LINES) {
      this.shared.logger?.warn(`[${this.info.appId}] ${this.logLines - MAX_LOG_LINES} more console lines of request ${this.info.requestId} were dropped`, {
        appId: this.info.appId,
        requestId: this.info.requestId,
      });
    }
    for (const r of this.responses.values()) r.discard();
    this.shared.outbound.release(this.info.appId, this.holding.size);
    this.holding.clear();
    this.responses.clear();
    this.bodies?.close();
  }
}

