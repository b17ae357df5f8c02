/*
 * Sandbox adapter module: value helpers of ctx.response.
 *
 * Holds httpDate (RFC 1123 dates for set/addDateHeader), formatJava (the printf of
 * Writer.printf / format) and bytesOf (the bytes of an OutputStream.write argument).
 */
import { DateCtor, Num, Str, U8, fromCharCode, getTime, getUTCDate, getUTCDay, getUTCFullYear, getUTCHours, getUTCMinutes, getUTCMonth, getUTCSeconds, illegalArgument, isObj, jstr, makeError, mathMin, objToString, safeString, strSlice, toFixed, toInt, toUpperCase } from './prelude';
import { binaryString, utf8Binary } from './encoding';
import { typeName } from './serialize';

var DAYS = ['Sun', 'Mon', 'Tue', 'Wed', 'Thu', 'Fri', 'Sat'];
var MONTHS = ['Jan', 'Feb', 'Mar', 'Apr', 'May', 'Jun', 'Jul', 'Aug', 'Sep', 'Oct', 'Nov', 'Dec'];
function pad(n: number, w: number): string {
  var s = '' + n;
  while (s.length < w) s = '0' + s;
  return s;
}
/** RFC 1123 date, the format of Date.prototype.toUTCString(), built by hand for both engines. */
export function httpDate(ms: unknown): string {
  var d = new DateCtor(Num(ms));
  if (getTime(d) !== getTime(d)) throw illegalArgument('Invalid date: ' + safeString(ms));
  return (
    DAYS[getUTCDay(d)] + ', ' + pad(getUTCDate(d), 2) + ' ' + MONTHS[getUTCMonth(d)] + ' ' + pad(getUTCFullYear(d), 4) + ' ' +
    pad(getUTCHours(d), 2) + ':' + pad(getUTCMinutes(d), 2) + ':' + pad(getUTCSeconds(d), 2) + ' GMT'
  );
}
/** A small printf: %s %S %d %f %.Nf %n %%; other conversions are copied as written. */
export function formatJava(fmt: unknown, args: ArrayLike<unknown>, a: number): string {
  var s = Str(fmt);
  var out = '';
  for (var i = 0; i < s.length; i++) {
    if (s[i] !== '%' || i + 1 >= s.length) {
      out += s[i];
      continue;
    }
    var j = i + 1;
    var prec = -1;
    if (s[j] === '.') {
      var k = j + 1;
      while (k < s.length && s[k] >= '0' && s[k] <= '9') k++;
      if (k > j + 1) (prec = Num(strSlice(s, j + 1, k))), (j = k);
    }
    var conv = s[j];
    var arg = a < args.length ? args[a] : undefined;
    if (conv === '%') out += '%';
    else if (conv === 'n') out += '\n';
    else if (conv === 's') (out += jstr(arg)), a++;
    else if (conv === 'S') (out += toUpperCase(jstr(arg))), a++;
    else if (conv === 'd') (out += '' + toInt(arg)), a++;
    else if (conv === 'f') (out += toFixed(Num(arg), prec < 0 ? 6 : mathMin(prec, 100))), a++;
    else out += strSlice(s, i, j + 1);
    i = j;
  }
  return out;
}
/** The bytes of an OutputStream.write argument, as a binary string. */
export function bytesOf(b: unknown, off?: unknown, len?: unknown): string {
  if (typeof b === 'number') return fromCharCode(b & 255);
  if (typeof b === 'string') return utf8Binary(b);
  if (!isObj(b)) throw makeError('TypeError', 'write() needs bytes, got ' + typeName(b));
  if (objToString(b) === '[object ArrayBuffer]') b = new U8(b as unknown as ArrayBuffer);
  var n: unknown = (b as ArrayLike<unknown>).length;
  if (typeof n !== 'number') throw makeError('TypeError', 'write() needs an array of bytes');
  var start = 0;
  var end = n;
  if (off !== undefined) {
    start = toInt(off);
    end = len === undefined ? n : start + toInt(len);
    if (!(start >= 0 && end >= start && end <= n)) throw makeError('IndexOutOfBoundsException', 'Invalid offset or length');
  }
  return binaryString(b as ArrayLike<unknown>, start, end);
}
