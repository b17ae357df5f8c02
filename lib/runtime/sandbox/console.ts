/*
 * Sandbox adapter module: globalThis.console.
 *
 * Holds inspect / formatArgs (JSON-ish formatting, each message capped at CONSOLE_CAP = 8 KiB)
 * and defines globalThis.console = { log, info, warn, error, debug }: one host op 'console'
 * per call, best effort.
 */
import { CONSOLE_CAP, G, charCodeAt, defineHidden, indexOf, isArray, isNil, jsonStringify, objToString, objectKeys, push, safeString, splitOn, strSlice, toISOString } from './prelude';
import { dateValue, isHigh } from './encoding';
import { active, hostSync } from './host';
import { thrownInfo } from './serialize';

/** `budget.left`: what is left of the message's CONSOLE_CAP as inspect walks nested values. */
function inspect(v: unknown, top: boolean, seen: unknown[], budget: { left: number }): string {
  var t = typeof v;
  if (t === 'string') return top ? (v as string) : jsonStringify(v);
  if (isNil(v) || t === 'number' || t === 'boolean') return '' + v;
  if (t === 'bigint') return '' + v + 'n';
  if (t === 'symbol') return safeString(v);
  if (t === 'function') return '[Function: ' + (typeof (v as Function).name === 'string' && (v as Function).name ? (v as Function).name : 'anonymous') + ']';
  var d = dateValue(v);
  if (d !== undefined) return d === null ? 'Invalid Date' : toISOString(v);
  if (objToString(v) === '[object Error]') {
    var info = thrownInfo(v);
    var head = info.name + ': ' + info.message;
    return top && info.stack !== undefined ? stackText(head, info.stack) : head;
  }
  for (var i = 0; i < seen.length; i++) if (seen[i] === v) return '[Circular]';
  var arr = isArray(v);
  if (seen.length >= 4) return arr ? '[Array]' : '[Object]';
  push(seen, v);
  var s = '';
  var keys = arr ? null : objectKeys(v as object);
  var n = arr ? (v as unknown[]).length : keys!.length;
  // (what is left of the message once this value's text so far is in it: its parts count once)
  var left = budget.left;
  for (var j = 0; j < n; j++) {
    if (left <= s.length) {
      s += (j ? ',' : '') + '…';
      break;
    }
    s +=
      (j ? ',' : '') +
      (arr
        ? inspect((v as unknown[])[j], false, seen, budget)
        : jsonStringify(keys![j]) + ':' + inspect((v as Record<string, unknown>)[keys![j]], false, seen, budget));
    budget.left = left - s.length;
  }
  seen.length = seen.length - 1;
  budget.left = left - s.length;
  return arr ? '[' + s + ']' : '{' + s + '}';
}
/** The file name the engines give the adapter (see the drivers): its frames are ours, not the script's. */
var ADAPTER_FILE = 'scriptable-api:adapter.js';
/**
 * An error's stack as V8 prints it, `Name: message` first (a QuickJS stack holds only the
 * frames), without the adapter's own frames.
 */
function stackText(head: string, stack: string): string {
  var out = indexOf(stack, head) === 0 ? '' : head;
  var lines = splitOn(stack, '\n');
  for (var i = 0; i < lines.length; i++) {
    if (indexOf(lines[i], ADAPTER_FILE) >= 0 || (lines[i] === '' && i === lines.length - 1)) continue;
    out += (out === '' ? '' : '\n') + lines[i];
  }
  return out;
}
function formatArgs(args: ArrayLike<unknown>): string {
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
/** The console method of `level`, the level it sends to the host op 'console'. */
function logger(level: 'log' | 'info' | 'warn' | 'error' | 'debug'): (...args: unknown[]) => void {
  return function () {
    try {
      // (no active stage: the module's top-level code, logged for the call that loads it)
      hostSync(active, 'console', { level: level, message: formatArgs(arguments) });
    } catch (e) {
      /* console output is best effort */
    }
  };
}
defineHidden(G, 'console', { log: logger('log'), info: logger('info'), warn: logger('warn'), error: logger('error'), debug: logger('debug') });
