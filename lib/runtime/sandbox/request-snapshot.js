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
 * Expects from prelude.js: jsonParse, isObj, getOwn, strSlice, indexOf, startsWith, charCodeAt.
 */
var REQUEST_MAP_KEYS = ['"headers":{', '"headerLists":{', '"cookies":{', '"query":{', '"form":{'];
var REQUEST_MAP_COUNT = REQUEST_MAP_KEYS.length;
/** map name -> its position in the layout */
var REQUEST_MAP_INDEX = { __proto__: null, headers: 0, headerLists: 1, cookies: 2, query: 3, form: 4 };

/**
 * A record of one snapshot text. `found` maps have been located, the k-th at [start[k], end[k])
 * (its `{..}`); `at` is where the next one must begin. `found` is -1 once the text turns out to
 * be laid out otherwise (then `all` is used). The arrays are made at their full length so that
 * writing them never looks at Array.prototype.
 */
function newRequestRecord(json) {
  return {
    json: json,
    found: json !== null && charCodeAt(json, 0) === 123 ? 0 : -1, // '{'
    at: 1,
    start: [0, 0, 0, 0, 0],
    end: [0, 0, 0, 0, 0],
    maps: [undefined, undefined, undefined, undefined, undefined],
    rest: undefined,
    all: null,
  };
}

/** Locates the maps up to the i-th (i = REQUEST_MAP_COUNT: also where the other fields start). */
function locate(rec, i) {
  var json = rec.json;
  while (rec.found >= 0 && rec.found <= i && rec.found < REQUEST_MAP_COUNT) {
    var k = rec.found;
    var key = REQUEST_MAP_KEYS[k];
    var end = startsWith(json, key, rec.at) ? indexOf(json, '},"', rec.at + key.length - 1) : -1;
    if (end < 0) {
      rec.found = -1;
      return false;
    }
    rec.start[k] = rec.at + key.length - 1;
    rec.end[k] = end + 1;
    rec.at = end + 2; // past the ','
    rec.found = k + 1;
  }
  return rec.found >= 0;
}

// The record of the last snapshot text read in this context: the later stages of a job get the
// same text again. Its parts are only read, never handed out (ctx fields are copies).
var lastRequestJson = null;
var lastRequestRec = null;

function requestRecord(json) {
  if (json === lastRequestJson && lastRequestRec !== null) return lastRequestRec;
  var rec = newRequestRecord(typeof json === 'string' ? json : null);
  lastRequestJson = rec.json;
  lastRequestRec = rec;
  return rec;
}

/** The whole snapshot, parsed (the fallback for any other layout, and for a part that failed). */
function requestAll(rec) {
  if (rec.all === null) {
    var v = rec.json === null ? null : jsonParse(rec.json);
    rec.all = isObj(v) ? v : {};
    rec.found = -1;
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
  if (rec.found >= 0) {
    var i = REQUEST_MAP_INDEX[key];
    if (i !== undefined) {
      var map = rec.maps[i];
      if (map === undefined && locate(rec, i)) map = rec.maps[i] = parsedPart(strSlice(rec.json, rec.start[i], rec.end[i]));
      if (map !== null && map !== undefined) return map;
    } else if (locate(rec, REQUEST_MAP_COUNT)) {
      if (rec.rest === undefined) rec.rest = parsedPart('{' + strSlice(rec.json, rec.at));
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
