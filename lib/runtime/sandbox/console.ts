/*
 * Sandbox adapter module: globalThis.console.
 *
 * Holds inspect / formatArgs (JSON-ish formatting, each message capped at CONSOLE_CAP = 8 KiB)
 * and defines globalThis.console = { log, info, warn, error, debug }: one host op 'console'
 * per call, best effort.
 */
import { CONSOLE_CAP, G, charCodeAt, defineProperty, isArray, isNil, jsonStringify, objToString, objectKeys, push, safeString, strSlice, toISOString } from './prelude';
import { dateValue, isHigh } from './encoding';
import { active, hostSync } from './host';
import { thrownInfo } from './serialize';

export function inspect(v, top, seen, budget) {
  var t = typeof v;
  if (t === 'string') return top ? v : jsonStringify(v);
  if (isNil(v) || t === 'number' || t === 'boolean') return '' + v;
  if (t === 'bigint') return '' + v + 'n';
  if (t === 'symbol') return safeString(v);
  if (t === 'function') return '[Function: ' + (typeof v.name === 'string' && v.name ? v.name : 'anonymous') + ']';
  var d = dateValue(v);
  if (d !== undefined) return d === null ? 'Invalid Date' : toISOString(v);
  if (objToString(v) === '[object Error]') {
    var info = thrownInfo(v);
    return top && info.stack !== undefined ? info.stack : info.name + ': ' + info.message;
  }
  for (var i = 0; i < seen.length; i++) if (seen[i] === v) return '[Circular]';
  var arr = isArray(v);
  if (seen.length >= 4) return arr ? '[Array]' : '[Object]';
  push(seen, v);
  var s = '';
  var keys = arr ? null : objectKeys(v);
  var n = arr ? v.length : keys.length;
  for (var j = 0; j < n; j++) {
    if (budget.left <= s.length) {
      s += (j ? ',' : '') + '…';
      break;
    }
    s += (j ? ',' : '') + (arr ? inspect(v[j], false, seen, budget) : jsonStringify(keys[j]) + ':' + inspect(v[keys[j]], false, seen, budget));
  }
  seen.length = seen.length - 1;
  budget.left -= s.length;
  return arr ? '[' + s + ']' : '{' + s + '}';
}
export function formatArgs(args) {
  var out = '';
  var budget = { left: CONSOLE_CAP };
  for (var i = 0; i < args.length && out.length <= CONSOLE_CAP; i++) {
    var part;
    try {
      part = inspect(args[i], true, [], budget);
    } catch (e) {
      part = '[Uninspectable]';
    }
    out += (i ? ' ' : '') + part;
  }
  if (out.length > CONSOLE_CAP) {
    var cut = CONSOLE_CAP - 1;
    if (isHigh(charCodeAt(out, cut - 1))) cut--;
    out = strSlice(out, 0, cut) + '…';
  }
  return out;
}
export function logger(level) {
  return function () {
    try {
      if (active !== null) hostSync(active, 'console', { level: level, message: formatArgs(arguments) });
    } catch (e) {
      /* console output is best effort */
    }
  };
}
defineProperty(G, 'console', {
  __proto__: null,
  value: { log: logger('log'), info: logger('info'), warn: logger('warn'), error: logger('error'), debug: logger('debug') },
  writable: true,
  enumerable: false,
  configurable: true,
});
