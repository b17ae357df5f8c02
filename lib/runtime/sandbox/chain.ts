/*
 * Sandbox adapter module: running on from one stage to the next within one entry.
 *
 * A stage's head may name the stages after it (StageHead.next: the call after a before hook, the
 * after hook after the call), each a function of a module of the same context. When a stage ends
 * as the pipeline (lib/runtime/worker/pipeline.ts) would go on from it, the adapter starts the next
 * one when it drains the stage (entry.ts: goOn), once the promise jobs the stage left behind ran,
 * in a record of its own that takes over what the stage's holds: the request, attributes and
 * response state stay parsed, and the worker gets one output for them all (StageOutput.chain).
 * Where the pipeline might decide otherwise, the stage settles as it would alone and the pipeline
 * runs the rest as usual:
 *   before -> call   it returned undefined, wrote nothing (body, sendError, sendRedirect), was not
 *                    aborted;
 *   call -> after    it returned (no throw), was not aborted, sent no redirect, and its result
 *                    fits the return type (a Redirect result's location is the host's to check).
 * Each stage gets a fresh ctx, as it would in an entry of its own.
 */
import { enc, quote, stringifyUser } from './encoding';
import { serializeOutput } from './serialize';
import { encResponse } from './response-state';
import type { SerializedOutput } from '../protocol';
import type { StageRecord } from './types';
import { attributesJson } from './entry';

/** The output of a call as the chain records it (the worker reads it as the call's StageOutput). */
function outputJson(output: SerializedOutput): string {
  return output.type === 'JSON' ? '{"type":"JSON","json":' + quote(output.json) + '}' : enc(output);
}

/**
 * Whether stage `st`, which returned `v`, runs on to the next stage of its chain: the argument
 * JSON of the next stage ('' = none) when it does, null when it settles here. A call's result is
 * serialized here once (st.out), whether it goes on or not; a throw doing it is the stage's error
 * (`error` is called with it, and null returned).
 */
export function goesOn(st: StageRecord, v: unknown, error: (e: unknown) => void): string | null {
  var next = nextArgument(st, v, error);
  // the next stage gets the attributes as JSON copies, as from another entry (the last stage's
  // output carries them all)
  if (next === null) return null;
  if (st.attrsObj !== null) {
    st.attrsJson = attributesJson(st.attrsObj);
    st.attrsObj = null;
  }
  // (the state as it goes on: what a later stage that never settles leaves, as one that runs apart does)
  st.carried = (st.attrsChanged ? ',"attributes":' + st.attrsJson : '') + (st.resObj !== null ? encResponse(st.resObj, ',"response":') : '');
  return next;
}

function nextArgument(st: StageRecord, v: unknown, error: (e: unknown) => void): string | null {
  var chain = st.chain;
  if (chain === undefined || st.at >= chain.length || st.abort !== null) return null;
  var r = st.resObj;
  if (st.head.stage === 'before') {
    if (v !== undefined || (r !== null && (r.written || r.error !== null || r.redirect !== null))) return null;
    st.chainOut += (st.chainOut === '' ? '' : ',') + '{"status":"value","hasValue":false}';
    return '';
  }
  if (st.head.stage !== 'call' || (r !== null && r.redirect !== null)) return null;
  var output: SerializedOutput;
  try {
    output = serializeOutput(st.head.returnType, v);
  } catch (e) {
    error(e);
    return null;
  }
  st.out = output;
  var hasValue = v !== undefined;
  if (output.type === 'Redirect' || (output.type === 'invalid' && hasValue)) return null;
  st.chainOut += (st.chainOut === '' ? '' : ',') + '{"status":"value","hasValue":' + hasValue + ',"output":' + outputJson(output) + '}';
  st.out = null;
  if (!hasValue) return '';
  // the after hook's result: a JSON copy of the call's, as when it crosses from another entry
  if (output.type === 'JSON') return output.json;
  try {
    return stringifyUser(v) ?? '';
  } catch (e) {
    return ''; // (no JSON form: the hook gets undefined)
  }
}

/** The StageOutput JSON fields of the stages a settled stage ran before it ('' for none). */
export function chainField(st: StageRecord): string {
  return st.chainOut === '' ? '' : ',"chain":[' + st.chainOut + ']';
}
