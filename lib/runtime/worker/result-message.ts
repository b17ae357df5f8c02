/**
 * The worker's `result` message for a job that ran to its end, as JSON text: what
 * `JSON.stringify({ type: 'result', jobId, result: sent, poisoned, ms })` writes, built from the
 * texts of the shared parts of its stages' outputs (output-cache.ts: jsonOf) where it can. Writing
 * the message was about 1 µs of every hooked job, most of it the parts that repeat from job to job.
 */
import type { JobOutcome } from '../engine';
import type { StateDelta } from '../protocol';
import { jsonOf } from './output-cache';

export type SentResult = { outcome: JobOutcome } & StateDelta;

export function resultMessage(jobId: number, sent: SentResult, poisoned: boolean, ms: number): string {
  const o = sent.outcome;
  let s = '{"type":"result","jobId":' + JSON.stringify(jobId) + ',"result":{"outcome":';
  s += o.kind === 'output' && Object.keys(o).length === 2 ? '{"kind":"output","output":' + jsonOf(o.output) + '}' : JSON.stringify(o);
  if (sent.attributes !== undefined) s += ',"attributes":' + jsonOf(sent.attributes);
  const r = sent.response as Record<string, unknown> | undefined;
  if (r !== undefined) {
    let fields = '';
    for (const k of Object.keys(r)) {
      const v = r[k];
      if (v === undefined || typeof v === 'function' || typeof v === 'symbol') continue; // (as JSON.stringify leaves them out)
      fields += (fields === '' ? '' : ',') + JSON.stringify(k) + ':' + jsonOf(v);
    }
    s += ',"response":{' + fields + '}';
  }
  return s + '},"poisoned":' + (poisoned ? 'true' : 'false') + ',"ms":' + JSON.stringify(ms) + '}';
}
