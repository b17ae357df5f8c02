/*
 * Sandbox adapter fragment: reading the RequestSnapshot text, a part at a time.
 *
 * Holds requestRecord(json) (the parsed parts of one snapshot text, kept for the later stages of
 * the same job in this context) and snapField(st, key, dflt) (one field of the stage's request).
 *
 * The host writes the snapshot with its maps first, in this order, each an object whose values
 * are strings or arrays of strings (lib/context/request.ts):
 *
 *   {"headers":{..},"headerLists":{..},"cookies":{..},"query":{..},"form":{..},"requestId":..}
 *
 * A JSON string never holds an unescaped quote, and these maps hold no nested object, so the
 * first `},"` after a map's opening brace closes it. A stage then parses only the parts it reads:
 * a header costs the headers map, about a tenth of the text (JSON.parse of a whole snapshot is
 * ~8 µs in QuickJS), and ctx.url costs the fields after the maps. A text laid out any other way
 * (or a part that fails to parse) is parsed whole, with the same results.
 *
 * Expects from prelude.js: jsonParse, isObj, getOwn, strSlice, indexOf, charCodeAt, objectCreate.
 */
var REQUEST_MAPS = ['headers', 'headerLists', 'cookies', 'query', 'form'];
var REQUEST_MAP_KEYS = ['"headers":{', '"headerLists":{', '"cookies":{', '"query":{', '"form":{'];

/** [start, end) of each map's `{..}`, then where the other fields start; null for another layout. */
function requestLayout(json) {
  if (charCodeAt(json, 0) !== 123) return null; // '{'
  var bounds = [];
  var pos = 1;
  for (var i = 0; i < REQUEST_MAP_KEYS.length; i++) {
    var key = REQUEST_MAP_KEYS[i];
    if (strSlice(json, pos, pos + key.length) !== key) return null;
    var start = pos + key.length - 1;
    var end = indexOf(json, '},"', start);
    if (end < 0) return null;
    bounds[2 * i] = start;
    bounds[2 * i + 1] = end + 1;
    pos = end + 2;
  }
  bounds[2 * REQUEST_MAPS.length] = pos;
  return bounds;
}

// The record of the last snapshot text read in this context: the later stages of a job get the
// same text again. Its parts are only read, never handed out (ctx fields are copies).
var lastRequestJson = null;
var lastRequestRec = null;

function requestRecord(json) {
  if (typeof json === 'string' && json === lastRequestJson) return lastRequestRec;
  var rec = { json: typeof json === 'string' ? json : null, bounds: null, maps: [], rest: null, all: null };
  if (rec.json !== null) rec.bounds = requestLayout(rec.json);
  lastRequestJson = rec.json;
  lastRequestRec = rec;
  return rec;
}

/** The whole snapshot, parsed (the fallback for any other layout, and for a part that failed). */
function requestAll(rec) {
  if (rec.all === null) {
    var v = rec.json === null ? null : jsonParse(rec.json);
    rec.all = isObj(v) ? v : {};
    rec.bounds = null;
  }
  return rec.all;
}

function parsedPart(rec, text) {
  var v;
  try {
    v = jsonParse(text);
  } catch (e) {
    v = undefined;
  }
  return isObj(v) ? v : null;
}

/** A field of the request snapshot; undefined when absent. */
function requestField(rec, key) {
  var b = rec.bounds;
  if (b !== null) {
    for (var i = 0; i < REQUEST_MAPS.length; i++) {
      if (REQUEST_MAPS[i] !== key) continue;
      var map = rec.maps[i];
      if (map === undefined) map = rec.maps[i] = parsedPart(rec, strSlice(rec.json, b[2 * i], b[2 * i + 1]));
      if (map !== null) return map;
      return getOwn(requestAll(rec), key);
    }
    if (rec.rest === null) rec.rest = parsedPart(rec, '{' + strSlice(rec.json, b[2 * REQUEST_MAPS.length]));
    if (rec.rest !== null) return getOwn(rec.rest, key);
  }
  return getOwn(requestAll(rec), key);
}

/** A field of the stage's request, or `dflt` when the snapshot has none. */
function snapField(st, key, dflt) {
  var v = requestField(st.req, key);
  return v === undefined ? dflt : v;
}
