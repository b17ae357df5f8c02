/*
 * Sandbox adapter module: the entry point of the bundle, and the entry object it hands the engine.
 *
 * Holds the stage records (one per stage in flight: a context may run many at once while they
 * wait on the host), start / reply / drain / cancel (see prelude.ts for the contract), collect
 * (a settled stage -> its StageOutput JSON, with only the state it touched), snapField (one
 * field of a stage's request, the snapshot parsed on first use) and apiRec (the stage of a
 * request or response object).
 */
import { AFTER_END, G, OUTSIDE_CALL, PromiseCtor, Str, WeakMapCtor, defineHidden, freeze, getOwn, hasOwn, illegalState, isArray, isObj, jsonParse, nameCache, objectCreate, objectKeys, promiseThen, push, setPrototypeOf, typeError, wmGet, wmSet } from './prelude';
import { enc, keyJson, quote, stringifyUser } from './encoding';
import { active, bridge, hostCancel, hostReply, setActive, waitingCalls } from './host';
import { encResponse, responseFromInput } from './response-state';
import { makeCtx } from './ctx';
import { serializeOutput, thrownInfo } from './serialize';
import { platform } from './platform';
import './console'; // (defines globalThis.console)
import './finalization'; // (makes globalThis.FinalizationRegistry inert)
import './buffers'; // (ArrayBuffers keep their size: no resize, transfer)
import './arrays'; // (Array.prototype.with, toReversed, toSorted, toSpliced of the adapter's own)
import './then-lock'; // (Object.prototype.then cannot be redefined)
import './continuations'; // (a call's code acts for its call across its waits: __resume, Promise.prototype.then)
import type { Attributes, Fields, ResState, StageRecord } from './types';
import type { AdapterEntry, ChainedHead, RequestSnapshot, StageHead } from '../protocol';
import { chainField, goesOn } from './chain';

/** What apiStage maps a request or response object to once its stage is over. */
type Ended = { readonly done: true };

/**
 * A stage's request and response objects -> the stage (apiRec); once the stage is over,
 * -> ENDED (an entry whose value leads back to its key is never freed by QuickJS).
 */
export var apiStage: WeakMap<object, StageRecord | Ended> = new WeakMapCtor();
var ENDED: Ended = freeze({ __proto__: null, done: true });
/**
 * The stage of a request or response object (`what`: 'ctx.request' or 'ctx.response'). A method
 * called detached from its object (`const { getHeader } = ctx.request`), or on any other object,
 * acts on the active stage.
 */
export function apiRec(self: unknown, what: string): StageRecord {
  var st = wmGet(apiStage, self as object); // (undefined for a primitive: WeakMap.prototype.get never throws for a key it cannot hold)
  if (st !== undefined) {
    if (st.done) throw illegalState(what + AFTER_END);
    return st;
  }
  if (active !== null) return active;
  throw illegalState(what + OUTSIDE_CALL);
}
/** Stages in flight, by id; `settled` holds the ones drain() has not reported yet. */
var stages: { [id: number]: StageRecord } = objectCreate(null);
var settled: StageRecord[] = [];
var inEntry = false;
var REENTRY = 'the adapter entry is not re-entrant';

/**
 * The snapshot's fields that come with the stage (CtxFields from ctxJson, CtxMaps from mapsJson),
 * each text parsed once on first use, without a prototype (snapField reads them as plain
 * properties). ctx's own maps are a parse of their own (ctx.ts).
 */
function carried(st: StageRecord, json: string | undefined, keys: { readonly [key: string]: unknown }): Fields {
  var v = ownParse(json);
  if (v === null) {
    // none given: those fields of the snapshot (parsed once, for every getter)
    var req = st.req;
    v = objectCreate(null) as Fields;
    for (var k in keys) v[k] = getOwn(req, k);
  }
  return v;
}
/** The object of a JSON text itself, without a prototype (read and written as a plain map, never seen by a script); null for none. */
function ownParse(json: string | undefined): Fields | null {
  var v = json ? jsonParse(json) : null;
  if (!isObj(v) || isArray(v)) return null;
  setPrototypeOf(v, null);
  return v;
}
/**
 * A stage record's carried state is parsed on first use: a stage that never reads the request,
 * the attributes or the response pays for none of them, and collect() sends back only what was
 * touched (absent = unchanged).
 * (The getters of a frozen literal without a prototype: a record is never seen by a script.)
 */
var StageProto = freeze({
  __proto__: null,
  get req(): Fields {
    if (this.reqObj === null) {
      var v = this.requestJson !== '' ? jsonParse(this.requestJson) : hostRequest(this);
      this.reqObj = isObj(v) ? v : {};
    }
    return this.reqObj!;
  },
  get fields(): Fields {
    if (this.fieldsObj === null) this.fieldsObj = carried(this, this.ctxJson, IN_FIELDS);
    return this.fieldsObj;
  },
  get maps(): Fields {
    if (this.mapsObj === null) this.mapsObj = carried(this, this.mapsJson, IN_MAPS);
    return this.mapsObj;
  },
  get attrs(): Attributes {
    if (this.attrsObj === null) this.attrsObj = (this.attrsJson === '{}' ? null : ownParse(this.attrsJson)) ?? objectCreate(null);
    return this.attrsObj!;
  },
  get res(): ResState {
    if (this.resObj === null) this.resObj = responseFromInput(this.responseJson !== '' ? jsonParse(this.responseJson) : null, this.chunksJson);
    return this.resObj!;
  },
} satisfies ThisType<StageRecord> & Partial<StageRecord> & { __proto__: null });

/** The stage's request snapshot from the host (start was given none): null when it has none to give. */
function hostRequest(st: StageRecord): unknown {
  try {
    return jsonParse(Str(bridge(st, 'stage.request', null, false)));
  } catch (e) {
    return null;
  }
}

/** The snapshot fields CtxFields and CtxMaps carry: reading them needs no more of the snapshot. */
var IN_FIELDS: { readonly [key: string]: unknown } = freeze({ __proto__: null, url: true, appId: true, path: true, method: true });
var IN_MAPS: { readonly [key: string]: unknown } = freeze({ __proto__: null, headers: true, headerLists: true, cookies: true, query: true });

/** A field of the stage's request snapshot, or `dflt` when it has none. */
export function snapField<K extends keyof RequestSnapshot, D>(st: StageRecord, key: K, dflt: D): RequestSnapshot[K] | D {
  // (the snapshot is the host's own: its fields have the types RequestSnapshot gives them)
  var v = (IN_MAPS[key] === true ? st.maps[key] : IN_FIELDS[key] === true ? st.fields[key] : getOwn(st.req, key)) as RequestSnapshot[K] | undefined;
  return v === undefined ? dflt : v;
}

function settle(st: StageRecord, status: 'value' | 'error', v: unknown): void {
  if (st.status !== 'pending' || st.done) return;
  st.status = status;
  if (status === 'error') st.error = thrownInfo(v);
  else st.value = v;
  push(settled, st);
}

/** A stage head's fields, by its JSON text (a worker sends a handful of distinct heads). */
var stageHead = nameCache(64, function (headJson): Readonly<StageHead> & { next: ReadonlyArray<Readonly<ChainedHead>> | undefined } {
  var head = jsonParse(headJson);
  if (!isObj(head)) throw typeError('start: the stage head must be a JSON object');
  var next = getOwn(head, 'next');
  var chain: Readonly<ChainedHead>[] | undefined;
  if (isArray(next) && next.length > 0) {
    chain = [];
    for (var i = 0; i < next.length; i++) push(chain, freeze({ __proto__: null, ...headFields(next[i]), fn: Str(getOwn(next[i], 'fn')) }));
    freeze(chain);
  }
  return freeze({ __proto__: null, ...headFields(head), next: chain });
});

/** The fields every stage head has, from its parsed JSON. */
function headFields(head: unknown): StageHead {
  var module = getOwn(head, 'module');
  return {
    stage: getOwn(head, 'stage') as StageHead['stage'],
    returnType: getOwn(head, 'returnType') as StageHead['returnType'],
    wantValue: getOwn(head, 'wantValue') === true,
    async: getOwn(head, 'async') === true,
    module: typeof module === 'number' ? module : 0,
  };
}

/** The body given as JSON (a text QuickJS could not take as it is), else undefined: the snapshot's. */
function bodyText(json: string | undefined): string | undefined {
  var v = typeof json === 'string' ? jsonParse(json) : undefined;
  return typeof v === 'string' ? v : undefined;
}

/** Its arguments: see the contract in prelude.ts. */
function start(id: number, ns: unknown, fnName: string, headJson: unknown, requestJson: string, attrsJson: string, responseJson: string, valueJson: string, ctxJson?: string, mapsJson?: string, body?: string | null, bodyJson?: string, chunksJson?: string): void {
  if (inEntry) throw illegalState(REENTRY);
  var head = stageHead(Str(headJson));
  if (G.platform !== platform) {
    // QuickJS lets a script redefine a non-writable, non-configurable global: put ours back
    defineHidden(G, 'platform', platform, true);
  }
  var st = {
    __proto__: StageProto,
    id: id,
    ns: ns,
    chain: head.next,
    at: 0,
    chainOut: '',
    carried: '',
    out: null,
    requestJson: requestJson,
    ctxJson: ctxJson,
    mapsJson: mapsJson,
    body: typeof body === 'string' || body === null ? body : bodyText(bodyJson),
    fieldsObj: null,
    mapsObj: null,
    attrsJson: attrsJson,
    responseJson: responseJson,
    chunksJson: typeof chunksJson === 'string' ? chunksJson : '',
    reqObj: null,
    attrsObj: null,
    attrsChanged: false,
    resObj: null,
    buffered: null,
  } satisfies Omit<StageRecord, 'req' | 'fields' | 'maps' | 'attrs' | 'res' | StageOwn> & { __proto__: object } as unknown as StageRecord; // (the getters come from StageProto)
  begin(st, head);
  stages[id] = st;
  invoke(st, fnName, valueJson);
}

/** The fields of a record that are its stage's own: a stage run on to gets them anew (goOn). */
type StageOwn = 'head' | 'status' | 'done' | 'waiting' | 'parts' | 'requestApi' | 'responseApi' | 'writer' | 'stream' | 'value' | 'error' | 'abort' | 'answered';

/** Sets the fields of record `st` that are its stage's own, as the stage starts. */
function begin(st: StageRecord, head: StageRecord['head']): void {
  var own: Pick<StageRecord, StageOwn> = st;
  own.head = head;
  own.status = 'pending';
  own.done = false;
  own.waiting = 0;
  own.parts = null;
  own.requestApi = null;
  own.responseApi = null;
  own.writer = null;
  own.stream = null;
  own.value = undefined;
  own.error = null;
  own.abort = null;
  own.answered = false;
}

/** The namespace of module `i` of the context (`ns` holds them by module when it has several). */
function moduleNs(ns: unknown, i: number | undefined): unknown {
  return isArray(ns) ? ns[i === undefined ? 0 : i] : ns;
}

/**
 * Calls the function of the stage `st` runs now, with a fresh ctx (and valueJson parsed: after's
 * result, onError's API error); what it returns or throws settles the stage, or runs it on to the
 * next one of its chain (chain.ts).
 */
function invoke(st: StageRecord, fnName: string, valueJson: string): void {
  setActive(st);
  var ctx = makeCtx(st);
  var r: unknown;
  inEntry = true;
  try {
    var ns = moduleNs(st.ns, st.head.module);
    var fn = isObj(ns) && hasOwn(ns, fnName) ? ns[fnName] : undefined;
    if (typeof fn !== 'function') throw typeError('The exported value is not a function');
    if (st.head.stage === 'after') {
      r = fn(ctx, valueJson !== '' ? jsonParse(valueJson) : undefined);
    } else if (st.head.stage === 'onError') {
      var err = valueJson !== '' ? jsonParse(valueJson) : null;
      r = fn(ctx, { requestId: getOwn(err, 'requestId'), message: getOwn(err, 'message'), code: getOwn(err, 'code') });
    } else {
      r = fn(ctx);
    }
  } catch (e) {
    inEntry = false;
    settle(st, 'error', e);
    return;
  }
  inEntry = false;
  var then;
  try {
    then = isObj(r) ? r.then : undefined;
  } catch (e) {
    settle(st, 'error', e);
    return;
  }
  if (typeof then !== 'function') {
    settle(st, 'value', r);
    return;
  }
  var onValue = (v: unknown) => settle(st, 'value', v);
  var onError = (e: unknown) => settle(st, 'error', e);
  try {
    promiseThen(r, onValue, onError); // a native promise, whatever Promise.prototype.then is now
  } catch (notAPromise) {
    try {
      promiseThen(new PromiseCtor((resolve) => resolve(r)), onValue, onError); // adopts any thenable
    } catch (e) {
      settle(st, 'error', e);
    }
  }
}

function reply(callId: number, replyJson: string): void {
  if (inEntry) throw illegalState(REENTRY);
  hostReply(callId, replyJson);
}

/** The stage is over: its objects stop acting for it, and it stops being reachable from here. */
function finish(st: StageRecord): void {
  st.done = true;
  delete stages[st.id];
  hostCancel(st);
  if (st.requestApi !== null) wmSet(apiStage, st.requestApi, ENDED);
  if (st.responseApi !== null) wmSet(apiStage, st.responseApi, ENDED);
  // (the writer's and stream's methods hold the record: dropping them here leaves no cycle for
  // QuickJS's cycle collection to find; theirs throw from now on)
  st.writer = null;
  st.stream = null;
}

function cancel(id: number): void {
  var st = stages[id];
  if (st !== undefined) finish(st);
}

function at(id: number): string {
  var st = stages[id];
  return st === undefined ? '' : '{"at":' + st.at + st.carried + '}';
}

/**
 * The outputs of the stages settled since the last drain. A stage that goes on to the next of its
 * chain (chain.ts) does so here, once the promise jobs it left behind ran (they may still change
 * its state): `"more":true` asks for another drain, once the jobs of the stages it started ran.
 */
function drain(): string {
  if (inEntry) throw illegalState(REENTRY);
  var out = '';
  var more = false;
  var list = settled;
  settled = []; // (a stage settling from here on is drained next time: its promise jobs have yet to run)
  for (var i = 0; i < list.length; i++) {
    var st = list[i];
    if (st.done) continue;
    if (st.status === 'value' && st.chain !== undefined && goOn(st)) {
      more = true;
      continue;
    }
    // (writing its result and attributes runs its code, getters and toJSON: they act for it)
    setActive(st);
    out += (out === '' ? '' : ',') + collect(st);
    finish(st);
  }
  setActive(null);
  return '{"waiting":' + waitingCalls + ',"outputs":[' + out + ']' + (more ? ',"more":true}' : '}');
}

/**
 * Runs stage `st` on to the next stage of its chain, if it goes on (chain.ts); false when it
 * settled here. The next stage gets a record of its own, with the request, attributes and
 * response state `st` holds (parsed or not): `st` ends, and the objects of it a script kept (its
 * ctx, request and response objects, writer, parts, outbound responses) with it, as a stage's
 * do in an entry of its own.
 */
function goOn(st: StageRecord): boolean {
  setActive(st);
  var next = goesOn(st, st.value, function (e) {
    st.status = 'error';
    st.value = undefined;
    st.error = thrownInfo(e);
  });
  if (next === null) return false;
  finish(st);
  var head = st.chain![st.at];
  var nst = { __proto__: StageProto, ...st, at: st.at + 1 } as unknown as StageRecord;
  begin(nst, head);
  stages[nst.id] = nst;
  invoke(nst, head.fn, next);
  return true;
}

/** Attributes as JSON: copies of their values; a value with no JSON form (function, cycle, BigInt) is dropped. */
export function attributesJson(attrs: Attributes): string {
  var s = '';
  for (var keys = objectKeys(attrs), i = 0; i < keys.length; i++) {
    var json;
    try {
      json = stringifyUser(attrs[keys[i]]); // (Dates as ms; cycles and BigInts throw)
    } catch (e) {
      json = undefined;
    }
    if (json !== undefined) s += (s ? ',' : '') + keyJson(keys[i]) + ':' + json;
  }
  return '{' + s + '}';
}

/** The StageOutput JSON of a settled stage, with its id. */
function collect(st: StageRecord): string {
  var status = st.status;
  var hasValue = false;
  var valueJson;
  var output;
  var error;
  if (st.abort !== null) {
    // (aborted already: nothing of the result is written)
  } else if (status === 'error') {
    error = st.error;
  } else if (st.value === undefined && st.head.stage !== 'call') {
    // a hook that returned nothing: its output is never used (only the call's is, value or not)
  } else {
    hasValue = st.value !== undefined;
    try {
      output = st.out !== null ? st.out : serializeOutput(st.head.returnType, st.value);
    } catch (e) {
      status = 'error';
      hasValue = false;
      error = thrownInfo(e);
    }
    if (st.head.wantValue && hasValue) {
      try {
        valueJson = output!.type === 'JSON' ? output!.json : stringifyUser(st.value); // (set: a failed serializeOutput cleared hasValue)
      } catch (e) {
        valueJson = undefined; // no JSON form: `value` is left out
      }
    }
  }
  var attrs = st.attrsChanged ? (st.attrsObj !== null ? attributesJson(st.attrsObj) : st.attrsJson) : undefined;
  if (st.abort !== null) {
    // platform.app.abort wins, even when the script caught it, also when it ran as the result or
    // the attributes were written (a getter, a toJSON)
    status = 'error';
    hasValue = false;
    valueJson = undefined;
    output = undefined;
    error = st.abort;
  }
  // (the id is the host's stage number, hasValue a boolean: each prints as its JSON)
  var s = '{"id":' + st.id + ',"status":"' + status + '","hasValue":' + hasValue;
  if (valueJson !== undefined) s += ',"value":' + valueJson;
  if (output !== undefined) {
    // (a JSON result, the common case, without enc's walk over the output object)
    s += ',"output":' + (output.type === 'JSON' ? '{"type":"JSON","json":' + quote(output.json) + '}' : enc(output));
  }
  if (error !== undefined) s += ',"error":' + enc(error);
  if (attrs !== undefined) s += ',"attributes":' + attrs;
  if (st.resObj !== null) s += encResponse(st.resObj, ',"response":');
  if (st.answered) s += ',"answered":true';
  return s + chainField(st) + '}';
}

var entry: AdapterEntry = freeze({ start: freeze(start), reply: freeze(reply), drain: freeze(drain), cancel: freeze(cancel), at: freeze(at) });
__adapterEntry = entry;
