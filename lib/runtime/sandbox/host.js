/*
 * Sandbox adapter fragment: host calls.
 *
 * Holds hostCall(op, args): one synchronous call through the captured bridge; returns the
 * host's value or throws an Error with the host's name / message / code.
 *
 * Expects from prelude.js: hostFn (the captured globalThis.__host), jsonParse, Str, getOwn,
 * isObj, isNil, safeString, makeError; from encoding.js: enc.
 */
function hostCall(op, args) {
  var raw;
  var res;
  try {
    raw = hostFn(op, enc(args));
  } catch (e) {
    throw makeError('HostError', 'Host operation ' + op + ' failed: ' + safeString(isObj(e) ? e.message : e));
  }
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
  );
}
