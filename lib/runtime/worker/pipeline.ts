/**
 * The processing order of the spec, run inside a worker so a request costs the main thread one
 * round trip whatever hooks it has:
 *   1. before(ctx): a value other than undefined is the response; a throw or abort is an error.
 *   2. the call (script or automation).
 *   3. after(ctx, result): a value other than undefined replaces the result; a throw is an error.
 *   4. on an error in step 2 only: onError(ctx, apiError) may write its own response.
 * A response written by a script (body, sendError, sendRedirect) is sent as written.
 */
import type { AutomationRef, ScriptRef } from '../../types';
import { ERRORS, thrownCode } from '../../errors';
import type { JobOutcome, JobResult, ScriptJob } from '../engine';
import { ctxFields, ctxMaps, newResponseState, type CarriedState, type Stage, type StageHead, type StageOutput, type ThrownError } from '../protocol';
import { fittedOutput, serializeForReturnType, unfitRedirect } from '../serialize';
import { EngineError } from './driver';
import type { ChainedFailure } from './stages';
import { ownGet } from '../../context/own-map';
import { thrownDetail, type ErrorDetail } from '../../error-location';
import { clock } from '../../timers';
// [automation] the interpreter is loaded on a worker's first automation: other workers never pay for it
let automationStage: typeof import('../../automation/pipeline-stage') | undefined;

/** The stage's texts for the adapter (see lib/runtime/sandbox/prelude.ts, entry.start). */
export interface StageTexts {
  /** The head without `async`: the script's mode is the engine's to tell. */
  head: Omit<StageHead, 'async'>;
  /** The RequestSnapshot JSON without its body, made on first use: most stages never ask for it. */
  request: () => string;
  /** The CtxFields JSON (the same for every stage of a job). */
  ctx: string;
  /** The request body (ctx.body). */
  body: string;
  /** The CtxMaps JSON (the same for every stage of a job). */
  maps: string;
  attributes: string;
  /** The ResponseState JSON without its chunks, '' for the response as it starts. */
  response: string;
  /** The response body's chunks, JSON ('' for none). */
  chunks: string;
  value: string;
}

/** A stage the adapter may run on to in the same entry (StageHead.next): its script and head. */
export interface ChainLink {
  ref: ScriptRef;
  source: string;
  hash: string;
  head: Omit<StageHead, 'async' | 'module' | 'next'>;
}

export interface PipelineEnv {
  /**
   * Runs `ref.function` of the script (source from the job), and may run on to the stages of
   * `next` (StageOutput.chain holds the outputs of those it ran from); throws EngineError (a
   * ChainedFailure when the run had gone on).
   */
  stage(ref: ScriptRef, source: string, hash: string, texts: StageTexts, next?: ChainLink[]): Promise<StageOutput>;
  /** An async host call of the job (automations); rejects with an Error carrying `code` / `status`. */
  callHost(op: 'automation.run' | 'http.request' | 'http.body' | 'http.release', args: Record<string, unknown>): Promise<unknown>;
  /** Ms on the monotonic clock (lib/timers.ts) by which the job must end (its limit counts from its first stage). */
  deadline(): number;
  /** Time the job spent on the worker's own preparation (loading the interpreter, compiling an automation): moves its deadline, as preparing a script does. */
  notCounted(ms: number): void;
  /** Runs synchronous work of the job outside any script (an automation's expressions) as a slice the pool sees. */
  compute<T>(work: () => T): T;
  /** The column (from 1) in script `script` as written of a column of the code the engine ran (the rewrite inserts text). */
  sourceColumn(script: string, line: number, column: number): number;
  /** The stage the job runs from now on, and its script (or automation id): where a failure found outside it (its deadline passing while it waits on the host) is. */
  entering(stage: Stage, script: string): void;
}

type Fail = Extract<JobOutcome, { kind: 'error' }>;

/** The response as it starts, as JSON, without its body: a stage is sent '' for it (the adapter builds it itself). */
const INITIAL_RESPONSE = JSON.stringify({ ...newResponseState(), chunks: undefined });

/**
 * The response as a stage is sent it: its state without the body ('' as it starts), and the
 * body's chunks apart ('' for none), which the adapter parses only if the stage writes to the
 * body or clears it (an after hook setting a header on a written body never parses it).
 */
function responseTexts(response: CarriedState['response']): { response: string; chunks: string } {
  const text = JSON.stringify({ ...response, chunks: undefined });
  // (a job of an engine user's own may carry a partial state: no chunks is none)
  const chunks = response.chunks as CarriedState['response']['chunks'] | undefined;
  return { response: text === INITIAL_RESPONSE ? '' : text, chunks: chunks === undefined || chunks.length === 0 ? '' : JSON.stringify(chunks) };
}

function isAutomation(ref: ScriptRef | AutomationRef): ref is AutomationRef {
  return typeof (ref as AutomationRef).automation === 'string';
}

/** The script, or the automation's id, a stage runs (as failures name it). */
function refName(ref: ScriptRef | AutomationRef): string {
  return isAutomation(ref) ? ref.automation : ref.script;
}

function fromThrown(e: ThrownError): Fail {
  if (e.name === 'AbortError' && e.code === ERRORS.ABORTED.code) {
    // (an error status, 400 to 599, whatever the adapter passed on: the host frames the response)
    const status = Number.isInteger(e.status) && e.status! >= 400 && e.status! <= 599 ? e.status! : ERRORS.ABORTED.status;
    return { kind: 'error', message: e.message, code: e.code, status };
  }
  return {
    kind: 'error',
    message: e.message || ERRORS.SCRIPT_ERROR.message,
    code: thrownCode(e.code),
    status: ERRORS.SCRIPT_ERROR.status,
  };
}

function fromEngine(e: EngineError): Fail {
  const entry = ERRORS[e.errorName];
  return { kind: 'error', message: e.message, code: entry.code, status: entry.status, ...(e.detail ? { detail: { ...e.detail } } : {}) };
}

/** Adds where a stage failed: the stage, its script, and the script frames of a thrown error. */
function located(fail: Fail, job: ScriptJob, stage: Stage, script: string, thrown?: ThrownError, env?: PipelineEnv): Fail {
  const detail: ErrorDetail = { ...fail.detail, stage, script };
  if (thrown) {
    detail.name = thrown.name;
    Object.assign(detail, thrownDetail(thrown.stack, (file) => ownGet(job.scripts, file) !== undefined, env?.sourceColumn.bind(env)));
  }
  fail.detail = detail;
  return fail;
}

function wrote(state: CarriedState): boolean {
  const r = state.response;
  return r.written || r.error !== null || r.redirect !== null;
}

/** The body part of a response (what it wrote, sendError, sendRedirect), as text to compare. */
function answerText(r: CarriedState['response']): string {
  return JSON.stringify([r.written, r.chunks, r.error, r.redirect]);
}

interface StageResult {
  out?: StageOutput;
  fail?: Fail;
  /** Engine failures that leave no time (timeout, out of memory) skip onError. */
  fatal?: boolean;
}

/** The after hook's `result` as JSON text ('' = undefined): a JSON output is that text already. */
function afterInput(call: StageOutput): string {
  if (!call.hasValue) return '';
  if (call.output?.type === 'JSON') return call.output.json;
  return call.value === undefined ? '' : JSON.stringify(call.value);
}

/** Whether the call stage must send its value back as well as its output (an after stage needs it). */
function callValueWanted(job: ScriptJob): boolean {
  return job.after !== undefined && (isAutomation(job.after) || job.returnType !== 'JSON');
}

export async function runPipeline(job: ScriptJob, env: PipelineEnv): Promise<JobResult> {
  let state = job.state;
  // the carried state as the next stage gets it, written again when a stage runs after one
  // changed it (undefined until then: the state the last stage leaves is never written)
  let attributesText: string | undefined;
  let responseIn: ReturnType<typeof responseTexts> | undefined;
  const result = (outcome: JobOutcome): JobResult => ({ state, outcome });
  let requestJson: string | undefined;
  // (the rest of the snapshot, asked for by a stage that reads more of the request than ctx
  // carries, say getRemoteAddr(): without the body, which every stage is given as it is)
  const request = () => (requestJson ??= JSON.stringify({ ...job.request, body: undefined }));
  const ctx = JSON.stringify(ctxFields(job.request));
  const maps = JSON.stringify(ctxMaps(job.request));

  /** The stages after `stage` the adapter may run on to in its entry: the job's script stages that follow it. */
  const chainAfter = (stage: 'before' | 'call'): ChainLink[] => {
    const links: ChainLink[] = [];
    const link = (ref: ScriptRef, head: ChainLink['head']): boolean => {
      const src = ownGet(job.scripts, ref.script);
      if (src) links.push({ ref, source: src.source, hash: src.hash, head });
      return src !== undefined;
    };
    if (stage === 'before') {
      if (job.phase === 'before' || isAutomation(job.call) || !link(job.call, { stage: 'call', returnType: job.returnType, wantValue: callValueWanted(job) })) return links;
    }
    if (job.after !== undefined && !isAutomation(job.after)) link(job.after, { stage: 'after', returnType: job.returnType, wantValue: false });
    return links;
  };

  const runScript = async (ref: ScriptRef, stage: Stage, wantValue: boolean, value = '', returnType = job.returnType): Promise<StageResult> => {
    const r = await runScriptStage(ref, stage, wantValue, value, returnType);
    if (r.fail) located(r.fail, job, stage, ref.script, r.out?.status === 'error' ? r.out.error : undefined, env);
    return r;
  };

  // (the outputs of the stages the adapter ran on to, each read when the pipeline gets to its stage)
  let ahead: Array<{ stage: Stage; out?: StageOutput; error?: EngineError }> = [];
  const runScriptStage = async (ref: ScriptRef, stage: Stage, wantValue: boolean, value: string, returnType: ScriptJob['returnType']): Promise<StageResult> => {
    const src = ownGet(job.scripts, ref.script); // (a script named e.g. 'toString' is just a name)
    if (!src) return { fail: { kind: 'error', ...ERRORS.SCRIPT_NOT_FOUND, message: `Script '${ref.script}' not found` } };
    try {
      let out: StageOutput;
      if (ahead.length > 0) {
        // the adapter ran on to this stage only where the pipeline goes on to it (sandbox/chain.ts)
        const got = ahead.shift()!;
        if (got.stage !== stage) throw new Error(`a chained run went on to ${got.stage}, the pipeline to ${stage}`);
        if (got.error) throw got.error;
        out = got.out!;
      } else {
        const next = stage === 'call' || stage === 'before' ? chainAfter(stage) : [];
        attributesText ??= JSON.stringify(state.attributes);
        responseIn ??= responseTexts(state.response);
        try {
          out = await env.stage(
            ref,
            src.source,
            src.hash,
            {
              head: { stage, returnType, wantValue },
              request,
              ctx,
              maps,
              body: typeof job.request.body === 'string' ? job.request.body : '', // (an engine user's own job may have none)
              attributes: attributesText,
              response: responseIn.response,
              chunks: responseIn.chunks,
              value,
            },
            next,
          );
        } catch (e) {
          const at = (e as ChainedFailure).chainAt;
          if (!(e instanceof EngineError) || at === undefined) throw e;
          // (it failed in a stage it ran on to: the stages before that one went on)
          ahead = next.slice(0, at).map((l, i) => (i === at - 1 ? { stage: l.head.stage, error: e } : { stage: l.head.stage, out: { status: 'value', hasValue: false } }));
          out = { status: 'value', hasValue: false };
        }
        if (out.chain !== undefined) {
          // (this output is the last stage's: the ones before it are read first)
          const outs = out.chain;
          out.chain = undefined;
          outs.push(out);
          ahead = outs.slice(1).map((o, i) => ({ stage: next[i].head.stage, out: o }));
          out = outs[0];
        }
      }
      if (out.attributes || out.response) {
        // out.response holds only the fields the stage changed
        state = { attributes: out.attributes ?? state.attributes, response: out.response ? { ...state.response, ...out.response } : state.response };
        if (out.attributes) attributesText = undefined;
        if (out.response) responseIn = undefined;
      }
      if (out.status === 'pending') return { fail: { kind: 'error', ...ERRORS.SCRIPT_STALLED } };
      if (out.output) out.output = fittedOutput(out.output);
      if (out.status === 'error') return { out, fail: fromThrown(out.error ?? { name: 'Error', message: '' }) };
      // (a sendRedirect to no http(s) or relative URL: the stage's INVALID_RESULT, as such a Redirect
      // result is, and its redirect void, so that onError's answer or the error body can go out)
      const redirectProblem = typeof out.response?.redirect === 'string' ? unfitRedirect(out.response.redirect) : null;
      if (redirectProblem !== null) {
        state = { ...state, response: { ...state.response, redirect: null, status: 200 } };
        responseIn = undefined;
        return { out, fail: { kind: 'error', ...ERRORS.INVALID_RESULT, message: redirectProblem } };
      }
      if (out.output?.type === 'invalid' && out.hasValue) {
        return { out, fail: { kind: 'error', ...ERRORS.INVALID_RESULT, message: out.output.message } };
      }
      return { out };
    } catch (e) {
      if (e instanceof EngineError) {
        const fatal = e.errorName === 'SCRIPT_TIMEOUT' || e.errorName === 'SCRIPT_OUT_OF_MEMORY' || e.errorName === 'ENGINE_FAILURE';
        return { fail: fromEngine(e), fatal };
      }
      throw e;
    }
  };

  const runAutomation = async (ref: AutomationRef, stage: 'call' | 'after', value?: unknown): Promise<StageResult> => {
    const r = await runAutomationStage(ref, stage, value);
    // (a script step's failure keeps where its script failed: its error name, location and stack)
    if (r.fail) r.fail.detail = { ...r.fail.detail, stage, script: ref.automation };
    return r;
  };

  const runAutomationStage = async (ref: AutomationRef, stage: 'call' | 'after', value?: unknown): Promise<StageResult> => {
    // [automation] the built-in interpreter (lib/automation) unless the host passed its own runner
    if (job.automations !== undefined) {
      if (automationStage === undefined) {
        const t0 = clock();
        // eslint-disable-next-line @typescript-eslint/no-require-imports
        automationStage = require('../../automation/pipeline-stage') as typeof import('../../automation/pipeline-stage');
        env.notCounted(clock() - t0);
      }
      return automationStage.runAutomationStage(
        {
          appId: job.appId,
          returnType: job.returnType,
          deadline: env.deadline,
          notCounted: env.notCounted,
          automations: job.automations,
          request: () => job.request,
          attributes: () => state.attributes,
          // a script step is `fn(ctx, state)`: the after stage's shape, its value wanted back as JSON
          runScript: (ref, valueJson) => runScript(ref, 'after', true, valueJson, 'JSON'),
          callHost: (op, args) => env.callHost(op, args),
          compute: env.compute,
        },
        ref.automation,
        stage,
        value,
      );
    }
    try {
      const v = await env.callHost('automation.run', {
        automation: ref.automation,
        stage,
        input: { request: job.request, attributes: state.attributes, ...(stage === 'after' ? { result: value } : {}) },
      });
      const output = serializeForReturnType(v, job.returnType);
      const out: StageOutput = { status: 'value', hasValue: v !== undefined && v !== null, value: v, output };
      if (output.type === 'invalid' && out.hasValue) return { out, fail: { kind: 'error', ...ERRORS.INVALID_RESULT, message: output.message } };
      return { out };
    } catch (e) {
      if (e instanceof EngineError) return { fail: fromEngine(e), fatal: true };
      const err = e as { message?: string; code?: number; status?: number };
      return {
        fail: {
          kind: 'error',
          message: err.message || ERRORS.AUTOMATION_UNAVAILABLE.message,
          code: thrownCode(err.code),
          // (an error status only: a 1xx, 2xx or 3xx from the runner's own dependencies would frame the error body as something else)
          status: typeof err.status === 'number' && Number.isInteger(err.status) && err.status >= 400 && err.status <= 599 ? err.status : ERRORS.SCRIPT_ERROR.status,
        },
      };
    }
  };

  // 1. before
  if (job.phase !== 'rest' && job.before) {
    env.entering('before', job.before.script);
    const r = await runScript(job.before, 'before', false);
    if (r.fail) return result(r.fail);
    if (wrote(state)) return result({ kind: 'written' });
    if (r.out!.hasValue) return result({ kind: 'output', output: r.out!.output! });
  }
  if (job.phase === 'before') return result({ kind: 'continue' });

  // 2. the call
  env.entering('call', refName(job.call));
  const call = isAutomation(job.call) ? await runAutomation(job.call, 'call') : await runScript(job.call, 'call', callValueWanted(job));
  // (a call that returned nothing where its return type needs a value (Redirect, File), and wrote
  // no answer, failed as one returning null would: with no after hook to give one, onError runs
  // now; with one, once it gave none either (below))
  if (!call.fail && !job.after && !wrote(state) && call.out!.output?.type === 'invalid') {
    call.fail = located({ kind: 'error', ...ERRORS.INVALID_RESULT, message: call.out!.output.message }, job, 'call', refName(job.call));
  }

  /** 4. onError, on an error of the call only: runs it, and answers with its answer or the call's failure. */
  const callFailed = async (fail: Fail, fatal?: boolean): Promise<JobResult> => {
    if (!job.onError || fatal) return result(fail);
    const apiError = { requestId: job.requestId, message: fail.message, code: fail.code };
    // (the body the failed call wrote is not onError's: onError starts from an empty body, so a body
    // it writes goes out alone, as its return value or a status alone does. Nothing of the failed
    // call's response was sent: what it committed (a flush, a body past the buffer, sendError,
    // sendRedirect) is dropped with it, so onError can still set its status and content type, and
    // write its body; the status sendError or sendRedirect set goes with them)
    const r0 = state.response;
    if (r0.written || r0.chunks.length > 0 || r0.committed || r0.error !== null || r0.redirect !== null) {
      const status = r0.error !== null || r0.redirect !== null ? 200 : r0.status;
      state = { ...state, response: { ...r0, status, chunks: [], written: false, committed: false, error: null, redirect: null } };
      responseIn = undefined;
    }
    const before = answerText(state.response);
    const { status, contentType } = state.response;
    env.entering('onError', job.onError.script);
    const r = await runScript(job.onError, 'onError', false, JSON.stringify(apiError));
    const d = fail.detail;
    const callFailure = { code: fail.code, message: fail.message, script: d?.script, location: d?.location };
    if (r.fail) {
      // (the client gets onError's failure; the log keeps what it was handling)
      r.fail.detail = { ...r.fail.detail, callFailure };
      return result(r.fail);
    }
    // (the answer is onError's: should the host refuse it, its log line names what it was handling)
    const answered = (outcome: JobOutcome): JobResult => ({ ...result(outcome), handled: callFailure });
    // (what the failed call wrote, redirected or sent is not onError's answer: only a body it wrote is;
    // a header it set is not, whatever the call wrote before)
    if (wrote(state) && answerText(state.response) !== before) return answered({ kind: 'written' });
    if (r.out!.hasValue) return answered({ kind: 'output', output: r.out!.output! });
    // A status or content type set without a body is its answer, sent with an empty body (not the
    // failed call's); headers alone (an audit header) are not: the default error response goes
    // out, never a bare 200.
    if (r.out!.answered === true || state.response.status !== status || state.response.contentType !== contentType) {
      state = { ...state, response: { ...state.response, chunks: [], written: false } };
      return answered({ kind: 'written' });
    }
    return result(fail);
  };
  if (call.fail) return callFailed(call.fail, call.fatal);

  // 3. after
  let final = call.out!;
  if (job.after) {
    env.entering('after', refName(job.after));
    const a = isAutomation(job.after) ? await runAutomation(job.after, 'after', final.value) : await runScript(job.after, 'after', false, afterInput(final));
    if (a.fail) return result(a.fail);
    if (a.out!.hasValue) final = a.out!;
  }
  if (wrote(state)) return result({ kind: 'written' });
  if (final === call.out && final.output?.type === 'invalid' && !final.hasValue) {
    // (the call returned nothing where its return type needs a value, and the after hook gave
    // none either: it failed as one returning null would, and onError runs)
    return callFailed(located({ kind: 'error', ...ERRORS.INVALID_RESULT, message: final.output.message }, job, 'call', refName(job.call)));
  }
  return result({ kind: 'output', output: final.output! });
}
