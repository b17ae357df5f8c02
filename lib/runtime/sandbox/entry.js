/*
 * Sandbox adapter fragment: __sa.invoke / __sa.collect (the last fragment).
 *
 * Holds the stage record (`current`, its carried state parsed on first use), invoke(fn, headJson,
 * requestJson, attributesJson, responseJson, valueJson) (-> ctx, calls the tenant's function, follows a
 * thenable), collect() (-> the StageOutput JSON string, with only the state that was touched), and
 * defines globalThis.__sa = { invoke, collect } (non-writable/enumerable/configurable, frozen).
 *
 * Expects every earlier fragment: prelude.js (helpers, builtins), encoding.js (enc,
 * stringifyUser), response-state.js (responseFromInput, chunkByteLength, encResponse),
 * request-snapshot.js (requestRecord), ctx.js (makeCtx, endStage), serialize.js (thrownInfo, serializeOutput).
 *
 * `current` / `inInvoke` are initialized here, after platform and console are defined: nothing
 * reads them at load time (platform.app.abort reads `current` when called).
 */
var current = null; // the stage being run, or the last one
var inInvoke = false;
// The stage heads parsed so far, by their JSON text (a head holds no per-request data: a context
// sees a handful of distinct ones, e.g. before and after of one hooks script). They are only
// read, never changed; nothing a script can reach or change is ever shared between stages.
var HEAD_CACHE = 4;
var headJsons = [];
var heads = [];

/**
 * The stage record's carried state is parsed on first use: a stage that never reads the request,
 * the attributes or the response pays for none of them, and collect() sends back only what was
 * touched (absent = unchanged).
 */
var StageProto = objectCreate(null);
// the defaults a QuickJS stage record reads until it writes its own (see invoke)
StageProto.reqObj = null;
StageProto.attrsObj = null;
StageProto.attrsChanged = false;
StageProto.resObj = null;
StageProto.bufferedN = 0;
StageProto.parts = null;
StageProto.requestApi = null;
StageProto.responseApi = null;
StageProto.writer = null;
StageProto.stream = null;
StageProto.value = undefined;
StageProto.error = null;
StageProto.abort = null;
defineProperty(StageProto, 'req', {
  __proto__: null,
  get: function () {
    if (this.reqObj === null) this.reqObj = requestRecord(this.requestJson); // see request-snapshot.js
    return this.reqObj;
  },
});
defineProperty(StageProto, 'attrs', {
  __proto__: null,
  get: function () {
    if (this.attrsObj === null) {
      // the parsed object itself, without a prototype: nothing inherited is ever read or called
      // (the request methods read and write it as a plain map; no script ever sees it)
      var src = this.attrsJson === undefined || this.attrsJson === '' || this.attrsJson === '{}' ? null : jsonParse(Str(this.attrsJson));
      if (isObj(src) && !isArray(src)) setPrototypeOf(src, null);
      else src = objectCreate(null);
      this.attrsObj = src;
    }
    return this.attrsObj;
  },
});
defineProperty(StageProto, 'res', {
  __proto__: null,
  get: function () {
    if (this.resObj === null) {
      // '' (or nothing): the response as it starts, with no parsing
      var json = this.responseJson === undefined || this.responseJson === '' ? null : Str(this.responseJson);
      var res = responseFromInput(json === null ? null : jsonParse(json));
      var buffered = 0;
      for (var j = 0; j < res.chunks.length; j++) buffered += chunkByteLength(res.chunks[j], res.characterEncoding);
      if (buffered !== 0) this.bufferedN = buffered; // (0: StageProto's default under QuickJS, the literal's under V8)
      this.resObj = res;
    }
    return this.resObj;
  },
});
defineProperty(StageProto, 'buffered', {
  __proto__: null,
  get: function () {
    return this.res === null ? 0 : this.bufferedN; // reading res parses the carried response first
  },
  set: function (v) {
    if (this.res !== null) this.bufferedN = v;
  },
});

function settle(st, status, v) {
  if (st.status !== 'pending') return;
  st.status = status;
  if (status === 'error') st.error = thrownInfo(v);
  else st.value = v;
}

/** The parsed StageHead for a head text, from the cache when this context has seen it. */
function headOf(headJson) {
  if (typeof headJson === 'string') {
    for (var i = 0; i < headJsons.length; i++) if (headJsons[i] === headJson) return heads[i];
  }
  var parsed = jsonParse(Str(headJson));
  if (!isObj(parsed)) throw makeError('TypeError', '__sa.invoke: the stage head must be a JSON object');
  var head = { stage: getOwn(parsed, 'stage'), returnType: getOwn(parsed, 'returnType'), wantValue: getOwn(parsed, 'wantValue') === true, proto: null };
  // Under QuickJS the stage record reads the head's fields from a prototype made once per head
  // (three fields fewer to write per stage; see invoke)
  head.proto = { __proto__: StageProto, stage: head.stage, returnType: head.returnType, wantValue: head.wantValue };
  if (typeof headJson === 'string') {
    if (headJsons.length >= HEAD_CACHE) {
      headJsons.length = 0;
      heads.length = 0;
    }
    push(headJsons, headJson);
    push(heads, head);
  }
  return head;
}

/**
 * invoke(fn, headJson, requestJson, attributesJson, responseJson, valueJson): headJson is the
 * StageHead (stage, returnType, wantValue); the next three are the RequestSnapshot, the
 * attributes and the ResponseState as JSON text, parsed on first use; valueJson is the stage's
 * second argument (after: the call's result, '' = undefined; onError: the API error), parsed
 * afresh for each stage so a script that changes it changes only its own copy.
 * Returns true when the stage settled synchronously (no promise to wait for).
 */
function invoke(fn, headJson, requestJson, attrsJson, responseJson, valueJson) {
  if (inInvoke) throw illegalState('__sa.invoke is not re-entrant');
  var head = headOf(headJson);
  if (G.platform !== platform) {
    // QuickJS lets a script redefine a non-writable, non-configurable global: put ours back
    defineProperty(G, 'platform', { __proto__: null, value: platform, writable: false, enumerable: false, configurable: false });
  }
  // the previous stage is over: its objects stop leading to it (and can be collected)
  if (current !== null && current.ctx !== null) {
    endStage(current);
    current.ctx = null;
  }
  // Laid out for the engine (see IS_QUICKJS): under QuickJS only the fields every stage sets are
  // own, the head's are read from its prototype and the rest from StageProto's defaults until
  // written; under V8 every field is an own one from the start.
  var st = IS_QUICKJS
    ? {
        __proto__: head.proto,
        requestJson: requestJson,
        attrsJson: attrsJson,
        responseJson: responseJson,
        status: 'pending',
        ctx: null,
      }
    : {
        __proto__: StageProto,
        stage: head.stage,
        returnType: head.returnType,
        wantValue: head.wantValue,
        requestJson: requestJson,
        attrsJson: attrsJson,
        responseJson: responseJson,
        status: 'pending',
        reqObj: null,
        attrsObj: null,
        attrsChanged: false,
        resObj: null,
        bufferedN: 0,
        parts: null,
        requestApi: null,
        responseApi: null,
        writer: null,
        stream: null,
        value: undefined,
        error: null,
        abort: null,
        ctx: null,
      };
  current = st;
  var ctx = makeCtx(st);
  var stage = st.stage;
  var r;
  inInvoke = true;
  try {
    if (typeof fn !== 'function') throw makeError('TypeError', 'The exported value is not a function');
    if (stage === 'after') {
      r = fn(ctx, typeof valueJson === 'string' && valueJson !== '' ? jsonParse(valueJson) : undefined);
    } else if (stage === 'onError') {
      var err = typeof valueJson === 'string' && valueJson !== '' ? jsonParse(valueJson) : null;
      r = fn(ctx, { requestId: getOwn(err, 'requestId'), message: getOwn(err, 'message'), code: getOwn(err, 'code') });
    } else {
      r = fn(ctx);
    }
  } catch (e) {
    inInvoke = false;
    settle(st, 'error', e);
    return true;
  }
  inInvoke = false;
  var then;
  try {
    then = isObj(r) ? r.then : undefined;
  } catch (e) {
    settle(st, 'error', e);
    return true;
  }
  if (typeof then !== 'function') {
    settle(st, 'value', r);
    return true;
  }
  var onValue = (v) => settle(st, 'value', v);
  var onError = (e) => settle(st, 'error', e);
  try {
    promiseThen(r, onValue, onError); // a native promise, whatever Promise.prototype.then is now
  } catch (notAPromise) {
    try {
      promiseThen(new PromiseCtor((resolve) => resolve(r)), onValue, onError); // adopts any thenable
    } catch (e) {
      settle(st, 'error', e);
    }
  }
  return st.status !== 'pending';
}

/** Attribute names as JSON strings (JSON.stringify of a short string is ~0.5 µs in QuickJS). */
var keyJson = nameCache(64, function (k) {
  return jsonStringify(k);
});

/** The StageOutput texts collect() starts from (QuickJS makes a new string for each concatenation). */
var OUT_VALUE = '{"status":"value","hasValue":true';
var OUT_NO_VALUE = '{"status":"value","hasValue":false';
var OUT_NO_VALUE_DONE = OUT_NO_VALUE + '}';
var OUT_ERROR = '{"status":"error","hasValue":false';

function collect() {
  var st = current;
  if (st === null) throw illegalState('__sa.collect() before __sa.invoke()');
  var status = st.status;
  var hasValue = false;
  var valueJson;
  var output;
  var error;
  if (st.abort !== null) {
    status = 'error'; // platform.app.abort wins, even when the script caught it
    error = st.abort;
  } else if (status === 'error') {
    error = st.error;
  } else if (status === 'value' && st.value === undefined && st.stage !== 'call') {
    // a hook that returned nothing: its output is never used (only the call's is, value or not)
  } else if (status === 'value') {
    hasValue = st.value !== undefined;
    try {
      output = serializeOutput(st.returnType, st.value);
    } catch (e) {
      status = 'error';
      hasValue = false;
      error = thrownInfo(e);
    }
    if (status === 'value' && st.wantValue && hasValue) {
      try {
        valueJson = output.type === 'JSON' ? output.json : stringifyUser(st.value);
      } catch (e) {
        valueJson = undefined; // no JSON form: `value` is left out
      }
    }
  }
  // (status: value | error | pending; hasValue only with value)
  var s = status === 'value' ? (hasValue ? OUT_VALUE : OUT_NO_VALUE) : status === 'error' ? OUT_ERROR : '{"status":"' + status + '","hasValue":false';
  if (valueJson !== undefined) s += ',"value":' + valueJson;
  if (output !== undefined && status === 'value') {
    s += ',"output":' + (output.type === 'JSON' ? '{"type":"JSON","json":' + jsonStringify(output.json) + '}' : enc(output));
  }
  if (error !== undefined) s += ',"error":' + enc(error);
  // Attributes: JSON copies; a value with no JSON form (function, cycle, BigInt) is dropped.
  if (st.attrsObj !== null && st.attrsChanged) {
    var attrs = '';
    for (var keys = objectKeys(st.attrsObj), i = 0; i < keys.length; i++) {
      var v = st.attrsObj[keys[i]];
      var json;
      if (typeof v === 'number') json = v === v && v !== 1 / 0 && v !== -1 / 0 ? '' + v : 'null';
      else if (typeof v === 'boolean') json = v ? 'true' : 'false';
      else if (typeof v === 'string') json = jsonStringify(v);
      else {
        try {
          json = stringifyUser(v); // (objects: Dates as ms, cycles and BigInts throw)
        } catch (e) {
          json = undefined;
        }
      }
      if (json !== undefined) attrs += (attrs ? ',' : '') + keyJson(keys[i]) + ':' + json;
    }
    s += ',"attributes":{' + attrs + '}';
  }
  if (st.resObj !== null) {
    var changed = encResponse(st.resObj, ',"response":');
    if (changed !== '') s += changed;
  }
  return s === OUT_NO_VALUE ? OUT_NO_VALUE_DONE : s + '}'; // (a hook that changed nothing: no new string)
}

/**
 * run(fn, headJson, requestJson, attributesJson, responseJson, valueJson): invoke, then, when the stage
 * settled synchronously, collect — one call into the sandbox for most stages. Returns the
 * StageOutput JSON string, or '' when the stage is waiting on a promise: the engine then runs
 * the sandbox's pending jobs and calls collect(). An engine that finds promise jobs pending
 * after a non-empty answer runs them and calls collect() again (what they changed counts).
 */
function run(fn, headJson, requestJson, attrsJson, responseJson, valueJson) {
  return invoke(fn, headJson, requestJson, attrsJson, responseJson, valueJson) ? collect() : '';
}

// ---------------------------------------------------------------------------------------------
// __sa, for the engine
// ---------------------------------------------------------------------------------------------
defineProperty(G, '__sa', {
  __proto__: null,
  value: freeze({ invoke: freeze(invoke), collect: freeze(collect), run: freeze(run) }),
  writable: false,
  enumerable: false,
  configurable: false,
});
