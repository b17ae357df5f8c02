/**
 * The worker's side of an automation stage (`call` or `after`): finds the definition the job
 * carries, compiles it once per definition text, and runs it with script steps in the job's
 * sandbox and http steps through the host's guarded client. lib/runtime/worker/pipeline.ts
 * calls runAutomationStage where the API's call or after hook is an automation.
 */
import { ConfigError, ERRORS } from '../errors';
import type { ErrorDetail } from '../error-location';
import type { ReturnType, ScriptRef } from '../types';
import type { RequestSnapshot, StageOutput } from '../runtime/protocol';
import { serializeForReturnType } from '../runtime/serialize';
import { compileAutomation } from './compile';
import type { AutomationExecutors, AutomationHttpResponse, CompiledAutomation } from './compiled';
import { automationContext } from './context';
import { StepFailure } from './errors';
import { runAutomation } from './interpreter';
import { mapsAsObjects } from './json';
import { clock } from '../timers';

type Fail = { kind: 'error'; message: string; code: number; status: number; detail?: ErrorDetail };

/** What the pipeline's script stage gives back (the fields read here). */
export interface ScriptStageResult {
  out?: { hasValue: boolean; value?: unknown };
  fail?: Fail;
  fatal?: boolean;
}

export interface AutomationStageEnv {
  appId: string;
  returnType: ReturnType;
  /** Ms on the monotonic clock (lib/timers.ts) by which the job must end, now (it moves while scripts are prepared and loaded). */
  deadline(): number;
  /** Time spent compiling (not the call's own): moves the job's deadline. */
  notCounted(ms: number): void;
  /** Definition texts by automation id, as the router put them in the job. */
  automations: Record<string, string>;
  request(): RequestSnapshot;
  /** The request attributes now (script steps may change them). */
  attributes(): Record<string, unknown>;
  /** Runs `ref(ctx, value)` as a stage of this job in its sandbox, wanting its value back as JSON. */
  runScript(ref: ScriptRef, valueJson: string): Promise<ScriptStageResult>;
  /** A host call of the job (rejects with an Error carrying `code` on failure). */
  callHost(op: 'http.request' | 'http.body' | 'http.release', args: Record<string, unknown>): Promise<unknown>;
  /** Marks synchronous expression work as the job's (see AutomationExecutors.compute). */
  compute?<T>(work: () => T): T;
}

/**
 * Compiled automations by definition text: each version is parsed once per worker. The oldest go
 * first past MAX_CACHED of them or past MAX_CACHED_BYTES held (a compiled form holds about 1 KiB
 * a step and 300 bytes a syntax node, on the worker's heap beside every call's values).
 */
const compiled = new Map<string, { c: CompiledAutomation | ConfigError; bytes: number }>();
const MAX_CACHED = 256;
const MAX_CACHED_BYTES = 32 * 1024 * 1024;
let cachedBytes = 0;

function compiledFor(text: string): CompiledAutomation {
  let entry = compiled.get(text);
  if (entry === undefined) {
    let c: CompiledAutomation | ConfigError;
    try {
      c = compileAutomation(JSON.parse(text), { validated: true }); // (the router validated it)
    } catch (e) {
      c = e instanceof ConfigError ? e : new ConfigError('automation', String((e as Error)?.message ?? e));
    }
    entry = { c, bytes: text.length + (c instanceof ConfigError ? 0 : c.heldBytes) };
    for (const [key, old] of compiled) {
      if (compiled.size < MAX_CACHED && cachedBytes + entry.bytes <= MAX_CACHED_BYTES) break;
      compiled.delete(key);
      cachedBytes -= old.bytes;
    }
    compiled.set(text, entry);
    cachedBytes += entry.bytes;
  }
  if (entry.c instanceof ConfigError) throw StepFailure.of('INVALID_AUTOMATION', entry.c.message);
  return entry.c;
}

function executors(env: AutomationStageEnv): AutomationExecutors {
  return {
    compute: env.compute,
    async runScript(ref, _ctx, state) {
      const r = await env.runScript(ref, JSON.stringify(state, mapsAsObjects));
      if (r.fail) throw new StepFailure(r.fail.message, r.fail.code, r.fail.status, r.fatal === true, r.fail.detail);
      return r.out?.hasValue ? r.out.value : undefined;
    },
    async http(request): Promise<AutomationHttpResponse> {
      try {
        const head = (await env.callHost('http.request', { ...request })) as { id: string; status: number; headers: Record<string, string>; url: string; body?: string };
        let text: string;
        try {
          // (a body of at most 1 MiB comes with the response; a larger one is asked for)
          text = typeof head.body === 'string' ? head.body : ((await env.callHost('http.body', { id: head.id })) as string);
        } finally {
          await env.callHost('http.release', { id: head.id }); // (a forEach of requests holds one open response at a time)
        }
        let body: unknown = text;
        if (/\bjson\b/i.test(head.headers['content-type'] ?? '') && text !== '') {
          try {
            body = JSON.parse(text);
          } catch {
            body = text;
          }
        }
        return { status: head.status, headers: head.headers, url: head.url, body };
      } catch (e) {
        if ((e as Error)?.name === 'TimeoutError') throw StepFailure.of('SCRIPT_TIMEOUT', 'The automation timed out while waiting for an http step', true);
        throw e;
      }
    },
  };
}

/** Runs the automation `id` as the job's `stage`; the result as a stage output, or the failure. */
export async function runAutomationStage(
  env: AutomationStageEnv,
  id: string,
  stage: 'call' | 'after',
  value?: unknown,
): Promise<{ out?: StageOutput; fail?: Fail; fatal?: boolean }> {
  try {
    const text = Object.prototype.hasOwnProperty.call(env.automations, id) ? env.automations[id] : undefined;
    if (text === undefined) throw StepFailure.of('AUTOMATION_NOT_FOUND', `Automation '${id}' not found in app '${env.appId}'`);
    const t0 = clock();
    const automation = compiledFor(text);
    env.notCounted(clock() - t0);
    const ctx = automationContext(env.request(), env.attributes);
    const v = await runAutomation(automation, { ctx, result: stage === 'after' ? value : undefined }, executors(env), env.deadline);
    const output = serializeForReturnType(v, env.returnType);
    const out: StageOutput = { status: 'value', hasValue: v !== undefined, value: v, output };
    if (output.type === 'invalid' && out.hasValue) return { out, fail: { kind: 'error', ...ERRORS.INVALID_RESULT, message: output.message } };
    return { out };
  } catch (e) {
    const f = e instanceof StepFailure ? e : StepFailure.of('AUTOMATION_STEP_FAILED', String((e as Error)?.message ?? e));
    return { fail: { kind: 'error', message: f.message, code: f.code, status: f.status, ...(f.detail ? { detail: f.detail } : {}) }, fatal: f.fatal };
  }
}
