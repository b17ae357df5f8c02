/**
 * The job message from the pool to a worker, and its template table.
 *
 * Most of a job is the same from one request to the next of an API: app, path, return type, the
 * stages' script refs and the scripts' names and hashes. That part (the job's template) crosses to
 * each worker once, into a numbered slot, and later jobs name the slot. A job message is
 *
 *   {"type":"job","jobId":N,"cell":C,"t":SLOT,"requestId":..,"phase":..,"deadline":..
 *    [,"def":TEMPLATE][,"src":{hash:source,..}][,"state":CARRIED_STATE]}  '\n'  REQUEST_SNAPSHOT
 *
 * `def` puts a template in slot SLOT before the job reads it; `src` carries the sources the worker
 * does not hold; `state` is absent when it is the state every job starts with. Messages to one
 * worker arrive in the order sent and the worker reads each template slot on arrival (not when
 * the job starts), so the pool's table and the worker's agree message by message, even for jobs
 * sent ahead and taken back. Texts only: one string copy is much cheaper than a structured clone,
 * and the request snapshot goes to the sandbox as the text it is.
 */
import type { AutomationRef, ScriptRef } from '../types';
import type { ScriptJob } from './engine';
import type { WorkerJob } from './worker/pipeline';
import { isPristineState, newResponseState, type CarriedState } from './protocol';

/** Template slots per worker: the pool reuses the oldest when an app set needs more. */
export const TEMPLATE_SLOTS = 256;

/** The part of a job that repeats from request to request of an API (sources travel apart). */
export type JobTemplate = Pick<ScriptJob, 'appId' | 'apiPath' | 'returnType' | 'before' | 'call' | 'after' | 'onError'> & {
  scripts: Record<string, { name: string; hash: string }>;
};

type Ref = ScriptRef | AutomationRef | undefined;

function isAutomationRef(ref: ScriptRef | AutomationRef): ref is AutomationRef {
  return typeof (ref as AutomationRef).automation === 'string';
}

/** The ref as the template holds it: only the fields a stage reads. */
function plainRef(ref: Ref): Ref {
  if (ref === undefined || ref === null) return undefined;
  return isAutomationRef(ref) ? { automation: ref.automation } : { script: String(ref.script), function: String(ref.function) };
}

/** A text with its length in front: keys made of such parts cannot be read two ways. */
function part(s: string): string {
  return `${s.length}:${s}`;
}

function refKey(ref: Ref): string {
  if (ref === undefined || ref === null) return '-';
  return isAutomationRef(ref) ? `a${part(ref.automation)}` : `s${part(String(ref.script))}${part(String(ref.function))}`;
}

/**
 * The job's template key: every field the template holds, as plainRef and the script list write
 * them, so two jobs with one key have the same template. Much cheaper to build than the JSON.
 */
function templateKey(job: ScriptJob): string {
  let key = part(String(job.appId)) + part(String(job.apiPath)) + part(String(job.returnType));
  key += refKey(job.before) + refKey(job.call) + refKey(job.after) + refKey(job.onError);
  for (const name of Object.keys(job.scripts)) {
    const s = job.scripts[name];
    key += part(name) + part(String(s.name)) + part(String(s.hash));
  }
  return key;
}

function templateOf(job: ScriptJob): JobTemplate {
  const scripts: JobTemplate['scripts'] = {};
  for (const name of Object.keys(job.scripts)) {
    const s = job.scripts[name];
    Object.defineProperty(scripts, name, { value: { name: String(s.name), hash: String(s.hash) }, enumerable: true, writable: true, configurable: true });
  }
  return {
    appId: String(job.appId),
    apiPath: String(job.apiPath),
    returnType: String(job.returnType) as ScriptJob['returnType'],
    before: plainRef(job.before) as ScriptRef | undefined,
    call: plainRef(job.call) as ScriptRef | AutomationRef,
    after: plainRef(job.after),
    onError: plainRef(job.onError) as ScriptRef | undefined,
    scripts,
  };
}

/** The pool's view of one worker's template slots. */
export class TemplateTable {
  private readonly slots = new Map<string, number>();
  private readonly keys: Array<string | undefined> = [];
  private next = 0;

  /** The slot of the job's template, and the template's JSON when the worker does not hold it yet. */
  slotFor(job: ScriptJob): { slot: number; def?: string } {
    const key = templateKey(job);
    const known = this.slots.get(key);
    if (known !== undefined) return { slot: known };
    const slot = this.next;
    this.next = (slot + 1) % TEMPLATE_SLOTS;
    const old = this.keys[slot];
    if (old !== undefined) this.slots.delete(old);
    this.keys[slot] = key;
    this.slots.set(key, slot);
    return { slot, def: JSON.stringify(templateOf(job)) };
  }
}

/** A number as JSON writes it (null for NaN and the infinities). */
function num(n: number): string {
  return Number.isFinite(n) ? String(n) : 'null';
}

/**
 * The message for one job. `sendSource(hash)` is asked for each of the job's scripts: true sends
 * its source along (the worker lacks it).
 */
export function encodeJob(jobId: number, cell: number, job: ScriptJob, templates: TemplateTable, sendSource: (hash: string) => boolean): string {
  const { slot, def } = templates.slotFor(job);
  let text = `{"type":"job","jobId":${num(jobId)},"cell":${num(cell)},"t":${slot},"requestId":${JSON.stringify(String(job.requestId))},"phase":${JSON.stringify(String(job.phase))},"deadline":${num(job.deadline)}`;
  if (def !== undefined) text += `,"def":${def}`;
  let src = '';
  for (const name of Object.keys(job.scripts)) {
    const s = job.scripts[name];
    if (sendSource(s.hash) && typeof s.source === 'string') src += `${src ? ',' : ''}${JSON.stringify(String(s.hash))}:${JSON.stringify(s.source)}`;
  }
  if (src) text += `,"src":{${src}}`;
  if (!isPristineState(job.state)) text += `,"state":${JSON.stringify(job.state)}`;
  if (job.automations !== undefined) text += `,"auto":${JSON.stringify(job.automations)}`; // [automation]
  return `${text}}\n${JSON.stringify(job.request)}`;
}

/** The state every job starts with, shared by the jobs that carry none (nothing changes it in place). */
function deepFreeze<T>(o: T): T {
  if (o && typeof o === 'object') {
    for (const v of Object.values(o)) deepFreeze(v);
    Object.freeze(o);
  }
  return o;
}
const PRISTINE_STATE: CarriedState = deepFreeze({ attributes: {}, response: newResponseState() });

function withSources(scripts: JobTemplate['scripts'], src: Record<string, string>): WorkerJob['scripts'] {
  const out: WorkerJob['scripts'] = {};
  for (const name of Object.keys(scripts)) {
    const s = scripts[name];
    const source = Object.prototype.hasOwnProperty.call(src, s.hash) ? src[s.hash] : undefined;
    Object.defineProperty(out, name, { value: source === undefined ? s : { ...s, source }, enumerable: true, writable: true, configurable: true });
  }
  return out;
}

/**
 * Worker side: reads one job message, keeping a template it defines (in `templates`) and the
 * sources it carries (through `keepSource`) whether or not the job then runs. Returns null for
 * another kind of message; `job` is null when the message names a template slot never defined
 * (a pool and worker out of step: the job fails rather than run with another API's template).
 */
export function decodeJob(
  raw: string,
  templates: Array<JobTemplate | undefined>,
  keepSource: (hash: string, source: string) => void,
): { jobId: number; cell: number; job: WorkerJob | null } | null {
  // '<job JSON>\n<request snapshot JSON>' (JSON text never holds a raw newline)
  const cut = raw.indexOf('\n');
  const msg = JSON.parse(cut < 0 ? raw : raw.slice(0, cut)) as {
    type: string;
    jobId: number;
    cell: number;
    t: number;
    requestId: string;
    phase: ScriptJob['phase'];
    deadline: number;
    def?: JobTemplate;
    src?: Record<string, string>;
    state?: CarriedState;
    auto?: Record<string, string>; // [automation]
  };
  if (msg.type !== 'job') return null;
  if (msg.def !== undefined) templates[msg.t] = msg.def;
  if (msg.src !== undefined) for (const hash of Object.keys(msg.src)) keepSource(hash, msg.src[hash]);
  const template = templates[msg.t];
  if (template === undefined) return { jobId: msg.jobId, cell: msg.cell, job: null };
  // (field by field: spreading an object JSON.parse made is ~2 µs in V8, this ~0.02)
  const job: WorkerJob = {
    requestId: msg.requestId,
    appId: template.appId,
    apiPath: template.apiPath,
    returnType: template.returnType,
    phase: msg.phase,
    before: template.before,
    call: template.call,
    after: template.after,
    onError: template.onError,
    // (sources sent along stay with their job too, so the worker's source cache cannot lose them before it starts)
    scripts: msg.src === undefined ? template.scripts : withSources(template.scripts, msg.src),
    state: msg.state ?? PRISTINE_STATE,
    deadline: msg.deadline,
    requestJson: undefined,
    automations: msg.auto, // [automation]
  };
  if (cut >= 0) job.requestJson = raw.slice(cut + 1);
  return { jobId: msg.jobId, cell: msg.cell, job };
}
