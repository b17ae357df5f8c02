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
 * A stage parses only the group of fields it reads, found by the text between them:
 *   0  headers and headerLists   from the start to `},"cookies":{`
 *   1  cookies                   to `},"query":{`
 *   2  query and form            to the first `},"` after `},"form":{`
 *   3  the other fields          to the end
 * A JSON string never holds an unescaped quote and these maps hold no nested object, so none of
 * those marks can occur inside a key or a value. A header read parses group 0, about a tenth of
 * the text (JSON.parse of a whole snapshot is ~8 µs in QuickJS); ctx.url parses group 3. A text
 * laid out any other way (or a group that fails to parse) is parsed whole, with the same results.
 *
 * Also holds textHeader(json, ln, key) (one header read straight from the text, with no record
 * made) and headerName(name) (the header names asked for in this context, lower-cased and checked
 * once).
 *
 * Expects from prelude.js: jsonParse, isObj, isArray, getOwn, objectKeys, strSlice, indexOf, startsWith,
 * toLowerCase, reExec, nameCache.
 */
/** field -> its group (the other fields are in group 3) */
var REQUEST_GROUP = { __proto__: null, headers: 0, headerLists: 0, cookies: 1, query: 2, form: 2 };
/** how many fields groups 0-2 hold */
var GROUP_SIZE = [2, 1, 2];
var RQ_START = '{"headers":{';
var RQ_COOKIES = '},"cookies":{';
var RQ_QUERY = '},"query":{';
var RQ_FORM = '},"form":{';
/** Where the headers map ends when headerLists is empty (every header arrived once): the common case. */
var RQ_ONCE = '},"headerLists":{},"cookies":{';

/**
 * A record of one snapshot text: `parts` holds the groups parsed so far (undefined: not yet),
 * `ends` where groups 0-2 end (the index of their closing `}`; -1: not located yet). `grouped` is
 * false once the text turns out to be laid out otherwise (then `all` is used). The arrays are
 * made at their full length, so writing them never looks at Array.prototype.
 */
function newRequestRecord(json) {
  return {
    json: json,
    grouped: json !== null && startsWith(json, RQ_START, 0),
    ends: [-1, -1, -1],
    parts: [undefined, undefined, undefined, undefined],
    all: null,
  };
}

/** Where group g ends (g < 3), locating the groups before it first; -1 when the layout is off. */
function groupEnd(rec, g) {
  var ends = rec.ends;
  if (ends[g] >= 0) return ends[g];
  var from = g === 0 ? 0 : groupEnd(rec, g - 1);
  var at = -1;
  if (from >= 0) {
    if (g === 0) at = indexOf(rec.json, RQ_COOKIES, RQ_START.length - 1);
    else if (g === 1) at = indexOf(rec.json, RQ_QUERY, from + 1);
    else {
      var form = indexOf(rec.json, RQ_FORM, from + 1);
      at = form < 0 ? -1 : indexOf(rec.json, '},"', form + RQ_FORM.length - 1);
    }
  }
  if (at < 0) rec.grouped = false;
  else ends[g] = at;
  return at;
}

/** Group g parsed, or null when the text is laid out otherwise. */
function requestGroup(rec, g) {
  var part = rec.parts[g];
  if (part !== undefined) return part;
  var end = g < 3 ? groupEnd(rec, g) : 0;
  var text = null;
  if (g === 0 && end >= 0) text = strSlice(rec.json, 0, end + 1) + '}';
  else if (g < 3 && end >= 0) text = '{' + strSlice(rec.json, groupEnd(rec, g - 1) + 2, end + 1) + '}';
  else if (g === 3 && groupEnd(rec, 2) >= 0) text = '{' + strSlice(rec.json, rec.ends[2] + 2);
  part = null;
  if (text !== null) {
    try {
      part = jsonParse(text);
    } catch (e) {
      part = null;
    }
  }
  if (!isObj(part) || isArray(part) || (g < 3 && objectKeys(part).length !== GROUP_SIZE[g])) {
    // (a group holding other fields than its maps: not our layout)
    part = null;
    rec.grouped = false;
  }
  rec.parts[g] = part;
  return part;
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
    rec.grouped = false;
  }
  return rec.all;
}

/** Names found verbatim in the text: the host writes header names in lower case, and a token holds no quote or backslash. */
var HEADER_KEY = /^[!#$%&'*+\-.^_`|~0-9a-z]+$/;

/**
 * The value of request header `ln` (lower case) read straight from the snapshot text, without
 * parsing group 0 or even making the text's record (the parse, then the record, were most of a
 * getHeader in QuickJS): a string, null when the request has no such header, or undefined when
 * the text cannot answer so simply (another layout, a header that arrived more than once, an
 * escaped value) and the caller parses. `key` is headerName's (undefined: worked out here).
 *
 * Within the headers map, `"name":` can only be a key: inside a JSON string every quote is
 * escaped, so `name"` followed by `:` never occurs there; for the same reason RQ_ONCE can only be
 * the end of the map (no header value is an object).
 */
var textJson = null; // the last text read here, and where its headers map ends (-1: not our layout)
var textHeadersEnd = -1;
function textHeader(json, ln, key) {
  if (key === undefined) key = reExec(HEADER_KEY, ln) === null ? null : '"' + ln + '":"';
  if (key === null || typeof json !== 'string') return undefined;
  if (json !== textJson) {
    textJson = json;
    textHeadersEnd = startsWith(json, RQ_START, 0) ? indexOf(json, RQ_ONCE, RQ_START.length - 1) : -1;
  }
  var hEnd = textHeadersEnd;
  if (hEnd < 0) return undefined;
  var at = indexOf(json, key, RQ_START.length - 1);
  if (at < 0 || at > hEnd) return null;
  var from = at + key.length;
  var to = indexOf(json, '"', from);
  if (to < 0 || to > hEnd) return undefined;
  var v = strSlice(json, from, to);
  return indexOf(v, '\\') < 0 ? v : undefined;
}

/**
 * Header names a script asked for in this context (scripts ask for the same few again and
 * again): the name as given -> { ln: lower case, key: the text `"ln":"` that textHeader looks
 * for, or null when ln is not a plain token }.
 */
var headerName = nameCache(64, function (name) {
  var ln = toLowerCase(name);
  return { ln: ln, key: reExec(HEADER_KEY, ln) === null ? null : '"' + ln + '":"' };
});

/** A field of the request snapshot; undefined when absent. */
function requestField(rec, key) {
  if (rec.grouped) {
    var g = REQUEST_GROUP[key];
    var part = requestGroup(rec, g === undefined ? 3 : g);
    if (part !== null) return getOwn(part, key);
  }
  return getOwn(requestAll(rec), key);
}

/** A field of the stage's request, or `dflt` when the snapshot has none. */
function snapField(st, key, dflt) {
  var v = requestField(st.req, key);
  return v === undefined ? dflt : v;
}
