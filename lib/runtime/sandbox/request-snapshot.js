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
 * Expects from prelude.js: jsonParse, isObj, getOwn, push, strSlice, indexOf, charCodeAt.
 */
var REQUEST_MAPS = ['headers', 'headerLists', 'cookies', 'query', 'form'];
var REQUEST_MAP_KEYS = ['"headers":{', '"headerLists":{', '"cookies":{', '"query":{', '"form":{'];

/**
 * Finds maps up to the i-th (i = REQUEST_MAPS.length: where the other fields start), from where
 * the last one found ended: a header read locates the first two maps only. `bounds` holds each
 * map's [start, end) of its `{..}`; false once the text turns out to be laid out otherwise.
 */
function locate(rec, i) {
  var b = rec.bounds;
  var json = rec.json;
  while (b !== false && b.length < 2 * i + 2) {
    var k = b.length / 2;
    var pos = k === 0 ? 1 : b[2 * k - 1] + 1; // past the '{' of the text, or the ',' after a map
    if (k === REQUEST_MAPS.length) {
      push(b, pos);
      push(b, pos);
      break;
    }
    var key = REQUEST_MAP_KEYS[k];
    var end = strSlice(json, pos, pos + key.length) === key ? indexOf(json, '},"', pos + key.length - 1) : -1;
    if (end < 0) {
      b = rec.bounds = false;
    } else {
      push(b, pos + key.length - 1);
      push(b, end + 1);
    }
  }
  return b;
}

// The record of the last snapshot text read in this context: the later stages of a job get the
// same text again. Its parts are only read, never handed out (ctx fields are copies).
var lastRequestJson = null;
var lastRequestRec = null;

function requestRecord(json) {
  if (typeof json === 'string' && json === lastRequestJson) return lastRequestRec;
  var rec = { json: typeof json === 'string' ? json : null, bounds: false, maps: [], rest: null, all: null };
  if (rec.json !== null && charCodeAt(rec.json, 0) === 123) rec.bounds = []; // '{'
  lastRequestJson = rec.json;
  lastRequestRec = rec;
  return rec;
}

/** The whole snapshot, parsed (the fallback for any other layout, and for a part that failed). */
function requestAll(rec) {
  if (rec.all === null) {
    var v = rec.json === null ? null : jsonParse(rec.json);
    rec.all = isObj(v) ? v : {};
    rec.bounds = false;
  }
  return rec.all;
}

function parsedPart(text) {
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
  if (rec.bounds !== false) {
    var i = 0;
    while (i < REQUEST_MAPS.length && REQUEST_MAPS[i] !== key) i++;
    var b = locate(rec, i);
    if (b !== false && i < REQUEST_MAPS.length) {
      var map = rec.maps[i];
      if (map === undefined) map = rec.maps[i] = parsedPart(strSlice(rec.json, b[2 * i], b[2 * i + 1]));
      if (map !== null) return map;
    } else if (b !== false) {
      if (rec.rest === null) rec.rest = parsedPart('{' + strSlice(rec.json, b[2 * i]));
      if (rec.rest !== null) return getOwn(rec.rest, key);
    }
  }
  return getOwn(requestAll(rec), key);
}

/** A field of the stage's request, or `dflt` when the snapshot has none. */
function snapField(st, key, dflt) {
  var v = requestField(st.req, key);
  return v === undefined ? dflt : v;
}
