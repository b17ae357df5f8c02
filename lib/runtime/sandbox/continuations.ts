/*
 * Sandbox adapter module: which call the code running now acts for, across its waits.
 *
 * The calls of one context run at once while they wait on the host, and `active` (host.ts) names
 * the call whose code runs: platform helpers, console lines and request or response methods
 * called detached act for it. A host reply makes its call active, and the promise jobs that run
 * then may resume other calls as well (two calls waiting on one promise of the module, say a
 * lookup they share). So each place where a call's code resumes makes its own call active first:
 *   - every `await` of a script in async mode, written by the host-call rewrite
 *     (lib/runtime/rewrite/edits.ts) as `__resume(__current(), await x)`: the call is taken
 *     before the wait and made active again right after it (the await itself unchanged: no
 *     promise tick or `then` lookup more); a rejection thrown there reaches a `catch` or
 *     `finally` of the same function, which the rewrite heads with `__resume(__callToken)`, the
 *     call taken as its `try` began; or it leaves the function, whose caller's await resumes it;
 *   - every callback handed to a promise's `then` (also through `catch` and `finally`): it runs
 *     for the call that handed it (QuickJS; vm2 keeps Promise.prototype frozen).
 * Code of a call that resumes after its call ended acts for none: the platform helpers throw as
 * they do outside a call, and its console lines are dropped. The two functions are global
 * `const`s of the context (CONTINUATION_SCRIPT in lib/runtime/protocol.ts), not properties of
 * the global object.
 */
import { G, PromiseCtor, defineHidden, freeze, getOwnDescriptor, isObj, promiseThen, wmGet } from './prelude';
import { active, setActive } from './host';
import { apiStage } from './entry';
import { CONTINUATION_GLOBALS } from '../protocol';
import type { StageRecord } from './types';

/** The call whose code runs now, as a value a script may hold: its request object (null: none). */
function current(): object | null {
  return active === null ? null : active.requestApi;
}

/** The call that `token` (from current()) names while it runs; null once it ended, or for anything else. */
function callOf(token: unknown): StageRecord | null {
  var st = isObj(token) ? wmGet(apiStage, token) : undefined;
  return st === undefined || st.done ? null : st;
}

/** After an `await` (or at the head of a `catch` or `finally`): the call of `token` is active again; `v` as it is. */
function resume(token: unknown, v?: unknown): unknown {
  setActive(callOf(token));
  return v;
}

/** `f`, run for call `st` (for none when st is null or has ended); anything else as it is. */
function forCall(f: unknown, st: StageRecord | null): unknown {
  if (typeof f !== 'function') return f;
  return function (v: unknown) {
    setActive(st !== null && st.done ? null : st);
    return f(v);
  };
}

// (a method: as the built-in one, it has no prototype and cannot be newed)
var then = {
  then(this: unknown, onFulfilled?: unknown, onRejected?: unknown) {
    var st = active;
    return promiseThen(this, forCall(onFulfilled, st) as (v: unknown) => unknown, forCall(onRejected, st) as (e: unknown) => unknown);
  },
}.then;
// (vm2 freezes Promise.prototype: there a callback acts for the call whose code ran last, as
// docs/script-engine.md says)
if (getOwnDescriptor(PromiseCtor.prototype, 'then')?.configurable === true) defineHidden(PromiseCtor.prototype, 'then', then);
// (bound as global consts by CONTINUATION_SCRIPT, which the engine runs next and which deletes this)
defineHidden(G, CONTINUATION_GLOBALS.handoff, freeze({ __proto__: null, current: current, resume: resume }));
