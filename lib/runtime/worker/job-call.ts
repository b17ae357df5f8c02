/**
 * A job's stages in one call into the sandbox, when the engine can (SandboxDriver.loadJob and
 * invokeJob: QuickJS). The pipeline (pipeline.ts) then takes each stage's output from here
 * instead of calling the engine for it, so its rules and results are the same either way.
 *
 * Why: a hook stage of its own costs a call into the sandbox, a stage record, a ctx, an output
 * parsed on the host and the attributes encoded and parsed again on the way to the next stage,
 * in a second context. In one call, in one context holding the hooks' and the call's modules, the
 * stages pass the attributes, the call's result and the response to each other inside the
 * sandbox.
 *
 * When: before and/or after are scripts, the call is a script, and no script involved uses
 * promises, as far as its text shows (see ASYNC): a stage's leftover promise jobs run before the
 * next stage starts, and only the host can run them, between two calls into the sandbox. A
 * script that hides them anyway only changes when its own leftover jobs run (after the job's last
 * stage), never what another app sees. Anything else, and any failure to set the job up (a
 * compile error, a missing export), runs stage by stage, which reports it as usual.
 */
import type { AutomationRef, ScriptRef } from '../../types';
import type { CarriedState, StageOutput, StageHead } from '../protocol';
import { EngineError, type JobStage, type SandboxDriver } from './driver';
import { ownGet } from '../../context/own-map';
import type { WorkerJob } from './pipeline';

/** Words a script that makes or waits on promise jobs contains (`await`, `.then`, `Promise`, timers, dynamic import). */
const ASYNC = /\b(?:async|await|then|Promise|import|queueMicrotask|FinalizationRegistry|WeakRef|setTimeout|setInterval|setImmediate)\b/;
const MAX_CHECKED = 1024;
const checked = new Map<string, boolean>();

/** True when the script's text shows no promise use (cached per source hash). */
export function showsNoPromises(hash: string, source: string): boolean {
  let ok = checked.get(hash);
  if (ok === undefined) {
    ok = !ASYNC.test(source);
    if (checked.size >= MAX_CHECKED) checked.clear();
    checked.set(hash, ok);
  }
  return ok;
}

export interface JobCallEnv {
  driver: SandboxDriver;
  sourceOf(hash: string): string | undefined;
  setScript(name: string, byStage?: Record<string, string>): void;
}

/** What runJobCall found: the stages' outputs, an engine failure that ends the job, or null (run stage by stage). */
export type JobCallResult = { outs: StageOutput[] } | { error: EngineError } | null;

function isAutomation(ref: ScriptRef | AutomationRef): ref is AutomationRef {
  return typeof (ref as AutomationRef).automation === 'string';
}

/**
 * Runs the job's before, call and after stages in one call into the sandbox when it can.
 * `texts` gives the request, attributes and response JSON texts the first stage gets.
 */
export async function runJobCall(
  job: WorkerJob,
  env: JobCallEnv,
  texts: () => { request: string; attributes: string; response: string },
  headText: (stage: StageHead['stage'], returnType: StageHead['returnType'], wantValue: boolean) => string,
): Promise<JobCallResult> {
  const { driver } = env;
  if (!driver.loadJob || !driver.invokeJob || job.phase === 'before' || isAutomation(job.call)) return null;
  const before = job.phase !== 'rest' ? job.before : undefined;
  if (job.after && isAutomation(job.after)) return null;
  const after = job.after as ScriptRef | undefined;
  if (!before && !after) return null;
  const refs = [before, job.call, after];
  const scripts: { name: string; hash: string; source: string }[] = [];
  for (const ref of refs) {
    if (!ref) continue;
    const src = ownGet(job.scripts, ref.script);
    const source = src && (src.source ?? env.sourceOf(src.hash));
    if (!src || source === undefined || !showsNoPromises(src.hash, source)) return null;
    scripts.push({ name: ref.script, hash: src.hash, source });
  }
  try {
    const { mod, modules } = driver.loadJob(job.appId, scripts, job.deadline);
    let m = 0;
    const stage = (ref: ScriptRef | undefined, name: StageHead['stage'], wantValue: boolean): JobStage | undefined =>
      ref ? { module: modules[m++], fn: ref.function, head: headText(name, job.returnType, wantValue) } : undefined;
    const stages: [JobStage | undefined, JobStage, JobStage | undefined] = [
      stage(before, 'before', false),
      stage(job.call, 'call', Boolean(job.after))!,
      stage(after, 'after', false),
    ];
    env.setScript(job.call.script, { before: before?.script ?? '', call: job.call.script, after: after?.script ?? '' });
    return { outs: await driver.invokeJob(mod, stages, texts(), job.deadline) };
  } catch (e) {
    if (!(e instanceof EngineError)) throw e;
    // no time or memory left, or a broken engine: the job ends as it would have stage by stage
    if (e.errorName === 'SCRIPT_TIMEOUT' || e.errorName === 'SCRIPT_OUT_OF_MEMORY' || e.errorName === 'ENGINE_FAILURE' || driver.poisoned) return { error: e };
    return null;
  }
}

/**
 * The carried state after a stage whose output came from runJobCall: its `response` holds the
 * fields changed since the job's input (`base`), absent when none differ.
 */
export function stateAfterJobStage(state: CarriedState, base: CarriedState['response'], out: StageOutput): CarriedState {
  return {
    attributes: out.attributes ?? state.attributes,
    response: out.response ? { ...base, ...out.response } : base,
  };
}
