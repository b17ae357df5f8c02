/*
 * Sandbox adapter fragment: __sa.invoke / __sa.collect (the last fragment).
 *
 * Holds the stage record (`current`), invoke(fn, inputJson) (StageInput -> ctx, calls the
 * tenant's function, follows a thenable), collect() (-> the StageOutput JSON string), and
 * defines globalThis.__sa = { invoke, collect } (non-writable/enumerable/configurable, frozen).
 *
 * Expects every earlier fragment: prelude.js (helpers, builtins), encoding.js (enc,
 * stringifyUser), response-state.js (responseFromInput, chunkByteLength, responseToPlain),
 * request.js (makeCtx), serialize.js (thrownInfo, serializeOutput).
 *
 * `current` / `inInvoke` are initialized here, after platform and console are defined: nothing
 * reads them at load time (platform.app.abort reads `current` when called).
 */
var current = null; // the stage being run, or the last one
var inInvoke = false;

function settle(st, status, v) {
  if (st.status !== 'pending') return;
  st.status = status;
  if (status === 'error') st.error = thrownInfo(v);
  else st.value = v;
}

function invoke(fn, inputJson) {
  if (inInvoke) throw illegalState('__sa.invoke is not re-entrant');
  var input = jsonParse(Str(inputJson));
  var state = getOwn(input, 'state');
  var attrsIn = getOwn(state, 'attributes');
  var attrs = objectCreate(null);
  if (isObj(attrsIn)) for (var keys = objectKeys(attrsIn), i = 0; i < keys.length; i++) setOwn(attrs, keys[i], attrsIn[keys[i]]);
  var st = {
    returnType: getOwn(input, 'returnType'),
    wantValue: getOwn(input, 'wantValue') === true,
    attrs: attrs,
    res: responseFromInput(getOwn(state, 'response')),
    buffered: 0,
    status: 'pending',
    value: undefined,
    error: null,
    abort: null,
  };
  for (var j = 0; j < st.res.chunks.length; j++) st.buffered += chunkByteLength(st.res.chunks[j], st.res.characterEncoding);
  current = st;
  var ctx = makeCtx(st, getOwn(input, 'request'));
  var stage = getOwn(input, 'stage');
  var r;
  inInvoke = true;
  try {
    if (typeof fn !== 'function') throw makeError('TypeError', 'The exported value is not a function');
    if (stage === 'after') {
      r = fn(ctx, getOwn(input, 'hasResult') === true ? getOwn(input, 'result') : undefined);
    } else if (stage === 'onError') {
      var err = getOwn(input, 'error');
      r = fn(ctx, { requestId: getOwn(err, 'requestId'), message: getOwn(err, 'message'), code: getOwn(err, 'code') });
    } else {
      r = fn(ctx);
    }
  } catch (e) {
    inInvoke = false;
    settle(st, 'error', e);
    return;
  }
  inInvoke = false;
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
}

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
  // Attributes: JSON copies; a value with no JSON form (function, cycle, BigInt) is dropped.
  var attrs = '';
  for (var keys = objectKeys(st.attrs), i = 0; i < keys.length; i++) {
    var json;
    try {
      json = stringifyUser(st.attrs[keys[i]]);
    } catch (e) {
      json = undefined;
    }
    if (json !== undefined) attrs += (attrs ? ',' : '') + jsonStringify(keys[i]) + ':' + json;
  }
  var s = '{"status":' + jsonStringify(status) + ',"hasValue":' + (hasValue ? 'true' : 'false');
  if (valueJson !== undefined) s += ',"value":' + valueJson;
  if (output !== undefined && status === 'value') s += ',"output":' + enc(output);
  if (error !== undefined) s += ',"error":' + enc(error);
  return s + ',"state":{"attributes":{' + attrs + '},"response":' + enc(responseToPlain(st.res)) + '}}';
}

// ---------------------------------------------------------------------------------------------
// __sa, for the engine
// ---------------------------------------------------------------------------------------------
defineProperty(G, '__sa', {
  __proto__: null,
  value: freeze({ invoke: freeze(invoke), collect: freeze(collect) }),
  writable: false,
  enumerable: false,
  configurable: false,
});
