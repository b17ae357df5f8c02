/**
 * The one contract between the pool (main thread) and its workers: every message either way, and
 * the table of host operations a script can reach. Messages travel as JSON text, the messages
 * of one turn of the sender's event loop together (encode / decode below: one flat string
 * crosses threads much faster than a structured clone of the same nested objects, and each
 * crossing costs both threads); a message carrying a long text (a response body, a large
 * result) crosses alone as a structured clone, which copies the text where JSON would escape
 * and unescape it. The sandbox boundary inside a worker is lib/runtime/protocol.ts.
 *
 *   pool -> worker, job port:     JobMessage, ReplyMessage (async host calls) (worker.postMessage)
 *   pool -> worker, reply port:   ReplyMessage (blocking host calls; read with receiveMessageOnPort
 *                                 after an Atomics.wait on the worker's shared flag)
 *   worker -> pool, results port: everything in FromWorker, in the order sent
 */
import type { MessagePort } from 'node:worker_threads';
import type { Account } from '../types';
import { thrownText } from '../errors';
import type { JobResult, ScriptJob } from './engine';

/**
 * A job for a worker. `seq` counts the jobs sent to that worker (see WorkerShared.started). A
 * script's `source` is left out when the worker holds it already (see HeldSources).
 */
export interface JobMessage {
  type: 'job';
  id: number;
  seq: number;
  job: Omit<ScriptJob, 'scripts'> & { scripts: Record<string, { name: string; hash: string; source?: string }> };
}

/** Sources a worker keeps: at most this many, and at most SOURCE_CHARS characters in all. */
export const SOURCE_SLOTS = 4096;
export const SOURCE_CHARS = 16 * 1024 * 1024;

/**
 * The sources a worker holds, by hash (or the pool's record of them). Both sides add the same
 * hashes with the same lengths in the same order (the worker every source a job message brings,
 * started or sent back), so they drop the same oldest ones and always agree on what it holds.
 */
export class HeldSources<V> {
  private readonly held = new Map<string, { value: V; chars: number }>();
  private chars = 0;

  get(hash: string): V | undefined {
    return this.held.get(hash)?.value;
  }

  has(hash: string): boolean {
    return this.held.has(hash);
  }

  add(hash: string, chars: number, value: V): void {
    if (this.held.has(hash)) return;
    this.held.set(hash, { value, chars });
    this.chars += chars;
    for (const [oldest, entry] of this.held) {
      if (this.held.size <= 1 || (this.held.size <= SOURCE_SLOTS && this.chars <= SOURCE_CHARS)) break;
      this.held.delete(oldest);
      this.chars -= entry.chars;
    }
  }
}

/** The answer to a host call. */
export interface ReplyMessage {
  type: 'reply';
  callId: number;
  reply: HostReply;
}

export type HostReply = { ok: true; value: unknown } | { ok: false; error: HostErrorInfo };

/** The answer to a host call of a job that ended first (a service that never answers leaves nothing waiting). */
export const CALL_OVER: HostReply = { ok: false, error: { name: 'Error', message: 'The call is over' } };

export interface HostErrorInfo {
  name: string;
  message: string;
  code?: number;
  status?: number;
}

/**
 * A host call's failure as the reply carries it, whatever was thrown (a host service may throw a
 * value that is not an Error): the name and message as strings, a numeric code and status. Never throws.
 */
export function hostErrorInfo(e: unknown): HostErrorInfo {
  let err: { name?: unknown; code?: unknown; status?: unknown } | undefined;
  try {
    err = typeof e === 'object' && e !== null ? { name: (e as Error).name, code: (e as { code?: unknown }).code, status: (e as { status?: unknown }).status } : undefined;
  } catch {
    err = undefined; // (a getter that throws)
  }
  const num = (v: unknown) => (typeof v === 'number' ? v : undefined);
  return { name: typeof err?.name === 'string' ? err.name : 'Error', message: thrownText(e), code: num(err?.code), status: num(err?.status) };
}

export type ToWorker = JobMessage | ReplyMessage;

export type FromWorker =
  /** The worker can take jobs. */
  | { type: 'ready' }
  /** The worker could not start its engine. */
  | { type: 'fatal'; message: string }
  /**
   * A host call of job `jobId`. `blocking`: the worker's thread waits for the reply (on its reply
   * port); otherwise the reply goes to the job port. `console` lines carry no callId and get no reply.
   */
  | { type: 'host'; jobId: number; callId: number; op: HostOp; args: Record<string, unknown>; blocking: boolean }
  /** Job `id` ended. */
  | { type: 'result'; id: number; result: JobResult }
  /** A script of app `appId` runs in blocking mode (prepared for the first time on this worker): the pool logs why, once. */
  | { type: 'blockingMode'; appId: string; script: string; reason: string }
  /** Jobs that arrived while a long slice held the worker: the pool gives them to another worker. */
  | { type: 'bounce'; ids: number[] }
  /**
   * The worker's engine is unusable (a full WebAssembly heap, a trap): it takes no more jobs, and
   * ends when its jobs have. `appId`: the app whose call or load left it so.
   */
  | { type: 'poisoned'; appId?: string };

/** Host operations: arguments and result of each. One table, served by lib/host/services.ts. */
export interface HostOps {
  /** A console line of a script (no reply). */
  console: { args: { level: string; message: string; script: string }; result: null };
  'system.getAccountByToken': { args: { token: string | null }; result: Account | null };
  'http.request': {
    /** `bytes`: a body of bytes (base64), sent as it is; else `body`, a text. */
    args: { url: string; method?: string; headers?: Record<string, string>; body?: string | null; bytes?: string | null; timeoutMs?: number };
    /** `body`: the response's text when it is at most 1 MiB (read in the sandbox without another call). */
    result: { id: string; status: number; headers: Record<string, string | string[]>; url: string; body?: string };
  };
  /** The body of an `http.request` response, as text (a body too large to come with the response). */
  'http.body': { args: { id: string }; result: string };
  /** Drops a response the script is done with (an automation's http step). */
  'http.release': { args: { id: string }; result: null };
  'http.saveBodyAsFile': { args: { id: string; path: string }; result: { path: string; size: number } };
  'part.save': { args: { id: string; path: string }; result: { path: string; size: number } };
  'part.saveStorage': { args: { id: string; path: string }; result: { path: string; size: number } };
  'part.saveAttachment': { args: { id: string; tableId: string; fieldId: string }; result: unknown };
  /** Bytes of a text in a charset other than UTF-8 (platform.utils.stringToBytes). */
  'utils.stringToBytes': { args: { text: string; charset: string }; result: number[] };
  /** Runs an automation (call or after stage). */
  'automation.run': {
    args: { automation: string; stage: 'call' | 'after'; input: { request: Record<string, unknown>; attributes: Record<string, unknown>; result?: unknown } };
    result: unknown;
  };
}

export type HostOp = keyof HostOps;

/**
 * Shared memory of one worker, read by the pool without a message:
 *   clock[0]   when the worker's current slice began (clock(): monotonic ms), 0 between slices. A slice is a
 *              synchronous stretch of one job's script work: a stage's start or a resume after a
 *              host reply, with the promise jobs it queues (QuickJS runs them within it).
 *   clock[1]   when the worker's current turn began, 0 between turns: from a message to the next
 *              turn of its event loop (everything the thread does for the messages it took,
 *              promise jobs included), and each next turn while entries into an engine that runs
 *              its promise jobs later (vm2) wait for a turn of their own: a job started there is
 *              not over before its script ran. A thread blocked in a host call is in neither.
 *   clock[2]   when the last entry into an engine that runs its promise jobs later (vm2) ended,
 *              0 once the event loop has turned since: those jobs (script code) may be running.
 *              The pool's watchdog counts it, whatever started the entry (a message, or the stage
 *              before settling); it does not make the worker unavailable.
 *   clock[3]   when QuickJS last called the worker's interrupt handler (between script steps,
 *              never inside a built-in call): a slice long past it is in one long built-in.
 *   ints[0]    the blocking host call flag (Atomics.wait / notify)
 *   ints[1]    the job of the current slice
 *   ints[2]    the `seq` of the last job the worker started (jobs start in the order sent)
 */
export interface WorkerShared {
  clock: SharedArrayBuffer;
  ints: SharedArrayBuffer;
}

export const SHARED_FLAG = 0;
export const SHARED_SLICE_JOB = 1;
export const SHARED_STARTED = 2;

/** A QuickJS worker's WebAssembly heap: at most this many MiB (wasm32 emscripten builds address 2 GiB)... */
export const QUICKJS_HEAP_MB = 2048;
/** ...of which this many are room for the allocator's own use, beside one call's limit and the contexts' budget. */
export const QUICKJS_HEAP_SLACK_MB = 32;

/** Why a QuickJS call's memory limit has a maximum (see maxQuickJsMemoryLimitMb). */
export const QUICKJS_HEAP_NOTE = `a QuickJS worker's heap holds at most ${QUICKJS_HEAP_MB} MiB: one call's limit, the contexts' budget and ${QUICKJS_HEAP_SLACK_MB} MiB for the allocator`;

/**
 * The part of `contextBudgetMb` a vm2 worker's contexts may hold. They live in the worker's V8
 * heap, next to the scripts' own data, so the heap has room for them beside one call's.
 */
export function vm2ContextBudgetMb(contextBudgetMb: number): number {
  return contextBudgetMb / 2;
}

/** The largest memory limit of one QuickJS call beside a contexts' budget of `contextBudgetMb`. */
export function maxQuickJsMemoryLimitMb(contextBudgetMb: number): number {
  return QUICKJS_HEAP_MB - QUICKJS_HEAP_SLACK_MB - contextBudgetMb;
}

/** What a worker is started with (workerData). */
export interface WorkerConfig {
  engine: 'quickjs' | 'vm2';
  memoryLimitMb: number;
  adapterSource: string;
  /** Slices running longer than this send the jobs waiting behind them back to the pool. */
  slowMs: number;
  /** Memory the worker's cached sandbox contexts may hold, MiB. */
  contextBudgetMb: number;
  shared: WorkerShared;
  /** Where the worker posts FromWorker messages. */
  results: MessagePort;
  /** Where replies to blocking host calls arrive. */
  replies: MessagePort;
  /** The QuickJS WebAssembly module, compiled once on the main thread (absent: loaded from its file). */
  wasmModule?: object;
}

/** Messages as they cross between threads: the JSON text of a batch, or one message cloned (see longText). */
export function encode(msgs: Array<ToWorker | FromWorker>): string {
  return JSON.stringify(msgs);
}

export function decode<T extends ToWorker | FromWorker>(data: unknown): T[] {
  return typeof data === 'string' ? (JSON.parse(data) as T[]) : [data as T];
}

/** A text at least this long makes its message cross as a structured clone of its own. */
export const CLONE_TEXT_CHARS = 64 * 1024;

const isLong = (v: unknown): boolean => typeof v === 'string' && v.length >= CLONE_TEXT_CHARS;

/**
 * Whether `msg` carries a long text where texts grow with the traffic: a host reply's value (a
 * body) or the `body` in it, a host call's `body` argument, a result's JSON or text output or a
 * chunk of the body its scripts wrote.
 */
export function longText(msg: ToWorker | FromWorker): boolean {
  switch (msg.type) {
    case 'reply': {
      const v = msg.reply.ok ? msg.reply.value : undefined;
      return isLong(v) || (typeof v === 'object' && v !== null && isLong((v as { body?: unknown }).body));
    }
    case 'host':
      return isLong(msg.args.body);
    case 'result': {
      const o = msg.result.outcome;
      if (o.kind === 'output' && (isLong((o.output as { json?: unknown }).json) || isLong((o.output as { text?: unknown }).text))) return true;
      // (a body the script wrote: its text, or its bytes as base64)
      const chunks = msg.result.state?.response?.chunks;
      return Array.isArray(chunks) && chunks.some((c) => isLong('t' in c ? c.t : c.b));
    }
    default:
      return false;
  }
}

/** `msg` as it crosses on its own (a blocking call's reply). */
export function crossing(msg: ToWorker | FromWorker): unknown {
  return longText(msg) ? msg : encode([msg]);
}

/**
 * Most messages sent together: a long turn sends its messages in batches of this many as it goes,
 * so the receiving thread starts on the first ones while this one works on the rest (one batch
 * per turn would keep the two threads taking turns, each idle while the other works).
 */
export const OUTBOX_BATCH = 16;

/**
 * Messages to send together at the end of this turn of the event loop (or at once with `now`);
 * one carrying a long text goes at once as a clone of its own, after the ones held before it.
 */
export class Outbox<T extends ToWorker | FromWorker> {
  private held: T[] = [];
  private scheduled = false;
  constructor(private readonly send: (data: unknown) => void) {}

  post(msg: T, now = false): void {
    if (longText(msg)) {
      this.flush();
      this.send(msg);
      return;
    }
    this.held.push(msg);
    if (now || this.held.length >= OUTBOX_BATCH) this.flush();
    else if (!this.scheduled) {
      this.scheduled = true;
      setImmediate(() => this.flush());
    }
  }

  flush(): void {
    this.scheduled = false;
    if (this.held.length === 0) return;
    const msgs = this.held;
    this.held = [];
    this.send(encode(msgs));
  }

  /** Drops what was not sent (the receiver is gone). */
  clear(): void {
    this.held = [];
  }
}

export { clock } from '../timers';
