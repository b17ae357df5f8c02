/*
 * Sandbox adapter module: host calls.
 *
 * Holds `active` (the stage whose code runs now: set by entry.start and entry.reply, cleared by
 * entry.drain) and the two ways to reach the host through hostFn:
 *   hostSync(st, op, args)       the reply's value now, or a throw (blocking-mode stages, and the
 *                                operations that are synchronous in every mode);
 *   hostIo(st, op, args, then)   for I/O operations: in an async-mode stage a promise settled by
 *                                entry.reply (the stage holds no thread while it waits), in a
 *                                blocking-mode stage the value now. `then` maps the value.
 * hostReply / hostCancel / waitingCalls serve entry.ts.
 */
import { AFTER_END, ErrorCtor, OUTSIDE_CALL, PromiseCtor, Str, freeze, getOwn, illegalState, isNil, isObj, jsonParse, makeError, objectCreate, objectKeys, promiseThen, safeString } from './prelude';
import { enc } from './encoding';
import type { PendingCall, StageRecord } from './types';

export var active: StageRecord | null = null;
/** Async host calls in flight: call id -> { st, op, ok, fail, at }. */
var pendingCalls: { [id: string]: PendingCall } = objectCreate(null);
export var waitingCalls = 0;

function replyValue(op: string, raw: unknown, at?: Error): unknown {
  var res: unknown;
  try {
    res = jsonParse(Str(raw));
  } catch (e) {
    throw makeError('HostError', 'Invalid host reply for ' + op);
  }
  if (getOwn(res, 'ok') === true) return getOwn(res, 'value');
  var err = getOwn(res, 'error');
  var name = getOwn(err, 'name');
  var message = getOwn(err, 'message');
  var code = getOwn(err, 'code');
  throw makeError(
    typeof name === 'string' && name ? name : 'Error',
    isNil(message) ? 'Host operation ' + op + ' failed' : Str(message),
    typeof code === 'number' ? code : undefined,
    undefined,
    at,
  );
}

export function bridge(st: StageRecord | null, op: string, args: unknown, async: boolean): string | number {
  try {
    // (a stage that ran on to the next of its chain calls as its id plus how far it went: the
    // worker reserves those ids, and so knows which stage and script act)
    return hostFn(st === null ? 0 : st.id + st.at, op, enc(args), async);
  } catch (e) {
    throw makeError('HostError', 'Host operation ' + op + ' failed: ' + safeString(isObj(e) ? e.message : e));
  }
}

/** What a script calls, by the host operation of an outbound response, where it is not the op's name (see ended). */
var USED: { readonly [op: string]: unknown } = freeze({
  __proto__: null,
  'http.body': "a response's body",
  'http.saveBodyAsFile': 'saveBodyAsFile',
});

/**
 * A stage's own objects (its parts, its outbound responses) kept past its end act for nothing:
 * they throw as its ctx.request and ctx.response do, whichever call uses them.
 */
function ended(st: StageRecord | null, op: string): void {
  if (st !== null && st.done) throw illegalState((typeof USED[op] === 'string' ? USED[op] : op) + AFTER_END);
}

export function hostSync(st: StageRecord | null, op: string, args: unknown): unknown {
  ended(st, op);
  return replyValue(op, bridge(st, op, args, false));
}

export function hostIo(st: StageRecord | null, op: string, args: unknown, then?: (value: any) => unknown): unknown {
  if (st === null) throw illegalState('platform' + OUTSIDE_CALL);
  if (!st.head.async) {
    var v = hostSync(st, op, args); // (which refuses an ended stage's call)
    return then === undefined ? v : then(v);
  }
  ended(st, op);
  // (made now, under the script's frames: a failure is located at the call, not in the reply)
  var at = new ErrorCtor();
  var promise = new PromiseCtor(function (ok: (value: unknown) => void, fail: (error: unknown) => void) {
    var id = bridge(st, op, args, true);
    if (typeof id !== 'number') throw makeError('HostError', 'Host operation ' + op + ' could not start');
    pendingCalls[id] = { st: st, op: op, ok: ok, fail: fail, at: at };
    waitingCalls++;
    st.waiting++;
  });
  return then === undefined ? promise : promiseThen(promise, then);
}

/** The reply of an async call: its stage becomes the active one while its continuations run. */
export function hostReply(id: number, raw: unknown): void {
  var c = pendingCalls[id];
  if (c === undefined) return;
  delete pendingCalls[id];
  waitingCalls--;
  c.st.waiting--;
  if (c.st.done) return;
  active = c.st;
  var value;
  try {
    value = replyValue(c.op, raw, c.at);
  } catch (e) {
    c.fail(e);
    return;
  }
  c.ok(value);
}

/** Drops the calls a cancelled stage waits for: their promises never settle. */
export function hostCancel(st: StageRecord): void {
  if (st.waiting === 0) return; // (a stage that settled waits for nothing, as a rule)
  for (var ids = objectKeys(pendingCalls), i = 0; i < ids.length; i++) {
    if (pendingCalls[ids[i]].st === st) {
      delete pendingCalls[ids[i]];
      waitingCalls--;
      st.waiting--;
    }
  }
}

/** Sets the active stage (entry.start and entry.drain). */
export function setActive(st: StageRecord | null): void {
  active = st;
}
