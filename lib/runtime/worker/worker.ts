/**
 * Worker-thread entry: loads one engine, then runs jobs one at a time as the pool sends them.
 * Messages in:  job messages (lib/runtime/job-message.ts: the job's own fields and a template slot,
 *               then '\n' and the request snapshot, as JSON text); several of them in one message
 *               are separated by NUL.
 * Messages out: { type: 'ready' } | { type: 'fatal' }; on the results port, in order: { type:
 *               'host', jobId, seq, op, args, noReply? } (answered on the reply port) and { type:
 *               'result', jobId, result | needSources | failure, poisoned, ms } (`result.state` is
 *               absent when no stage changed the state the job came with; `ms`: how long the job
 *               ran here).
 */
import { parentPort, workerData, type MessagePort } from 'node:worker_threads';
import { performance } from 'node:perf_hooks';
import { ERRORS } from '../../errors';
import { HostChannel, HostTimeoutError } from './host-channel';
import { EngineError, Lru, type SandboxDriver } from './driver';
import { MissingSourceError, runPipeline, type WorkerJob } from './pipeline';
import { stateDelta } from '../protocol';
import { TEMPLATE_SLOTS, decodeJob, type JobTemplate } from '../job-message';
import { resultMessage } from './result-message';

interface WorkerConfig {
  engine: 'quickjs' | 'vm2';
  memoryLimitMb: number;
  adapterSource: string;
  flag: SharedArrayBuffer;
  /** Claim cells: jobId -> -jobId when this worker starts a job; the pool sets 0 when it took the job back. */
  claims: SharedArrayBuffer;
  /** When this worker started its current job (epoch ms, fractional), 0 when idle: read by the pool. */
  running: SharedArrayBuffer;
  replies: MessagePort;
  /** Where results go (their own channel: the pool drains every result waiting there at once). */
  results: MessagePort;
  /** The QuickJS WebAssembly module, compiled by the pool (absent: the driver loads it itself). */
  wasmModule?: object;
}

const config = workerData as WorkerConfig;
const port = parentPort!;
// host calls and console lines travel with the results, so the pool sees them in the order sent
const channel = new HostChannel((m) => config.results.postMessage(m), config.replies, new Int32Array(config.flag));
const sources = new Lru<string, string>(2000, () => undefined);
const keepSource = (hash: string, source: string): void => sources.set(hash, source);
/** The job templates the pool defined here, by slot (lib/runtime/job-message.ts). */
const templates = new Array<JobTemplate | undefined>(TEMPLATE_SLOTS);
const claims = new Int32Array(config.claims);
const running = new Float64Array(config.running);

let current: { jobId: number; deadline: number; script: string; abort: { message: string; status?: number } | null } | null = null;

const OK = '{"ok":true}';

function errorJson(name: string, message: string, code?: number): string {
  return JSON.stringify({ ok: false, error: { name, message, code } });
}

/** The one function a sandbox can call: `__host(op, argsJson) -> resultJson`. */
function host(op: string, argsJson: string): string {
  const job = current;
  if (!job) return errorJson('Error', 'No call in progress');
  let args: Record<string, unknown>;
  try {
    args = JSON.parse(argsJson) as Record<string, unknown>;
  } catch {
    return errorJson('TypeError', 'Host call arguments must be JSON');
  }
  switch (op) {
    case 'app.abort': {
      const status = typeof args.status === 'number' && args.status >= 400 && args.status <= 599 ? args.status : undefined;
      job.abort = { message: args.message == null ? ERRORS.ABORTED.message : String(args.message), status };
      return OK;
    }
    case 'console':
      channel.notify(job.jobId, 'console', { level: args.level, message: args.message, script: job.script });
      return OK;
    case 'utils.stringToBytes': {
      const charset = String(args.charset ?? 'utf8').toLowerCase().replace(/^iso-8859-1$/, 'latin1').replace(/^us-ascii$/, 'ascii');
      if (!Buffer.isEncoding(charset)) return errorJson('RangeError', `Unsupported charset '${String(args.charset)}'`);
      return JSON.stringify({ ok: true, value: Array.from(Buffer.from(String(args.text ?? ''), charset as BufferEncoding)) });
    }
    default:
      try {
        return JSON.stringify(channel.call(job.jobId, op, args, job.deadline));
      } catch (e) {
        if (e instanceof HostTimeoutError) return errorJson('TimeoutError', e.message, ERRORS.SCRIPT_TIMEOUT.code);
        return errorJson('Error', (e as Error).message);
      }
  }
}

async function createDriver(): Promise<SandboxDriver> {
  if (config.engine === 'vm2') {
    const { Vm2Driver } = await import('./vm2-driver');
    return new Vm2Driver({ adapterSource: config.adapterSource, host });
  }
  const { QuickJsDriver } = await import('./quickjs-driver');
  return QuickJsDriver.create({ memoryLimitMb: config.memoryLimitMb, adapterSource: config.adapterSource, host, wasmModule: config.wasmModule });
}

/**
 * Jobs sent ahead run back to back from a promise chain. V8 also posts tasks to this thread's event
 * loop that other threads wait for (another worker compiling the QuickJS WebAssembly module stalls
 * until every isolate has run its share of V8's WebAssembly code GC), so a worker busy with job
 * after job turns its event loop at least every YIELD_MS.
 */
const YIELD_MS = 2;
let lastTurn = performance.now();
function turn(): Promise<void> {
  return new Promise<void>((resolve) => setImmediate(resolve)).then(() => {
    lastTurn = performance.now();
  });
}

async function main(): Promise<void> {
  const driver = await createDriver();
  let queue = Promise.resolve();
  const accept = (raw: string): void => {
    // templates and sources are kept on arrival, even for a job taken back before it starts:
    // the pool now counts them as held here
    const msg = decodeJob(raw, templates, keepSource);
    if (msg === null) return;
    queue = queue.then(async () => {
      if (performance.now() - lastTurn >= YIELD_MS) await turn();
      // a job sent ahead may have been taken back by the pool: start it only if we claim it first
      // (a poisoned worker is about to be replaced: it leaves its jobs to the pool)
      if (driver.poisoned || Atomics.compareExchange(claims, msg.cell, msg.jobId, -msg.jobId) !== msg.jobId) return undefined;
      if (msg.job === null) return noTemplate(msg.jobId);
      return runOne(driver, msg.jobId, msg.job);
    });
  };
  port.on('message', (raw: string) => {
    lastTurn = performance.now(); // (a message is delivered from the event loop)
    // several jobs sent at once are separated by NUL (never raw in JSON text either)
    let from = 0;
    for (let at = raw.indexOf('\u0000'); at >= 0; at = raw.indexOf('\u0000', from)) {
      accept(raw.slice(from, at));
      from = at + 1;
    }
    accept(from === 0 ? raw : raw.slice(from));
  });
  port.postMessage({ type: 'ready' });
}

/** What the pipeline needs from the worker, for the job running now (`current`): made once. */
function pipelineEnv(driver: SandboxDriver) {
  return {
    driver,
    sourceOf: (hash: string) => sources.get(hash),
    setScript: (name: string) => {
      if (current) current.script = name;
    },
    takeAbort: () => {
      const a = current?.abort ?? null;
      if (current) current.abort = null;
      return a;
    },
    callHost: (op: string, args: Record<string, unknown>) => {
      if (!current) throw new Error('No call in progress');
      const reply = channel.call(current.jobId, op, args, current.deadline);
      if (!reply.ok) throw Object.assign(new Error(reply.error?.message ?? 'Host call failed'), reply.error);
      return reply.value;
    },
  };
}
let env: ReturnType<typeof pipelineEnv> | undefined;

/** A job naming a template slot never defined here: the pool and this worker are out of step. */
function noTemplate(jobId: number): void {
  config.results.postMessage({ type: 'result', jobId, failure: 'The job names a template the worker does not hold', poisoned: true });
}

async function runOne(driver: SandboxDriver, jobId: number, job: WorkerJob): Promise<void> {
  const started = performance.now();
  running[0] = performance.timeOrigin + started;
  // how long the job took here (ms, to the µs): the pool sizes the work it sends ahead by it
  const took = () => Math.round((performance.now() - started) * 1000) / 1000;
  current = { jobId, deadline: job.deadline, script: '', abort: null };
  if (env?.driver !== driver) env = pipelineEnv(driver);
  try {
    const result = await runPipeline(job, env);
    // a state no stage changed is the pool's own: it is not sent back; a changed one goes as
    // what changed (the pool lays it over the state it sent)
    const sent = result.state === job.state ? { outcome: result.outcome } : { outcome: result.outcome, ...stateDelta(job.state, result.state) };
    config.results.postMessage(resultMessage(jobId, sent, driver.poisoned, took()));
  } catch (e) {
    if (e instanceof MissingSourceError) {
      config.results.postMessage({ type: 'result', jobId, needSources: true });
    } else {
      const message = e instanceof EngineError || e instanceof Error ? e.message : String(e);
      config.results.postMessage({ type: 'result', jobId, failure: message, poisoned: driver.poisoned, ms: took() });
    }
  } finally {
    current = null;
    running[0] = 0;
  }
}

void main().catch((e) => {
  port.postMessage({ type: 'fatal', message: (e as Error)?.message ?? String(e) });
});
