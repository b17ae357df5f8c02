/*
 * Sandbox adapter module: Part, Cookie and ctx.request (PlatformHttpRequest).
 *
 * Holds makePart, makeCookie, makeRequest(st) (parameters, headers, cookies, attributes, parts
 * of the RequestSnapshot, as methods of one shared prototype) and partsOf(st). ctx itself is
 * made in ctx.ts.
 */
import { Str, copyArray, freeze, getOwn, isArray, isNil, lower, objectCreate, objectKeys, push, setOwn, unionKeys, wmSet } from './prelude';
import { hostIo } from './host';
import { makeEnumeration } from './enumeration';
import type { Enumeration } from './enumeration';
import { apiRec, apiStage, snapField } from './entry';
import type { Fields, StageRecord } from './types';
import type { RequestSnapshot } from '../protocol';

/** A Part as the script sees it. */
export type Part = ReturnType<typeof makePart>;
/** A Cookie as the script sees it (getCookies). */
type Cookie = ReturnType<typeof makeCookie>;

/** A Part acts for the stage that made it. */
function makePart(st: StageRecord, info: unknown) {
  var id = Str(getOwn(info, 'id'));
  var name = getOwn(info, 'name') ?? null;
  var contentType = getOwn(info, 'contentType') ?? null;
  var given = getOwn(info, 'size');
  var size = typeof given === 'number' ? given : 0;
  var fileName = getOwn(info, 'submittedFileName') ?? null;
  var path = (p: unknown): string | null => (p === undefined ? null : Str(p));
  return freeze({
    name: name,
    contentType: contentType,
    size: size,
    submittedFileName: fileName,
    getName: () => name,
    getContentType: () => contentType,
    getSize: () => size,
    getSubmittedFileName: () => fileName,
    save: (p?: unknown) => hostIo(st, 'part.save', { id: id, path: path(p) }),
    saveStorage: (p?: unknown) => hostIo(st, 'part.saveStorage', { id: id, path: path(p) }),
    saveAttachment: (tableId?: unknown, fieldId?: unknown) => hostIo(st, 'part.saveAttachment', { id: id, tableId: path(tableId), fieldId: path(fieldId) }),
  });
}
function makeCookie(name: string, value: string) {
  return { name: name, value: value, getName: () => name, getValue: () => value };
}

/** ctx.request: its methods live on one frozen prototype per context, and find their stage here. */
function reqRec(self: unknown): StageRecord {
  return apiRec(self, 'ctx.request');
}
/** What a read of an absent map of the snapshot sees (never handed out). */
var NO_MAP: Readonly<Fields> = freeze(objectCreate(null));
/** Query values first, then the urlencoded / multipart form fields. */
function parameterValues(st: StageRecord, name: string): string[] {
  var out: string[] = [];
  var sources = [getOwn(snapField(st, 'query', NO_MAP), name), getOwn(snapField(st, 'form', NO_MAP), name)];
  for (var s = 0; s < 2; s++) {
    var v = sources[s];
    if (typeof v === 'string') push(out, v);
    else if (isArray(v)) for (var i = 0; i < v.length; i++) push(out, Str(v[i]));
  }
  return out;
}
function headerValues(st: StageRecord, name: unknown): string[] {
  if (isNil(name)) return [];
  var ln = lower(name);
  var list = getOwn(snapField(st, 'headerLists', NO_MAP), ln);
  if (isArray(list) && list.length) {
    var out: string[] = [];
    for (var i = 0; i < list.length; i++) push(out, Str(list[i]));
    return out;
  }
  var h = getOwn(snapField(st, 'headers', NO_MAP), ln);
  return typeof h === 'string' ? [h] : [];
}
function snapGetter(k: keyof RequestSnapshot, dflt: unknown): (this: unknown) => unknown {
  return function (this: unknown) {
    return snapField(reqRec(this), k, dflt);
  };
}

var ReqProto = freeze({
  // Attributes: the live values within a stage, JSON copies from one stage to the next.
  // (st.attrs has no prototype and never holds undefined: a plain read is an own-property read)
  getAttribute: function (this: unknown, name: unknown): unknown {
    var st = reqRec(this);
    var v = st.attrs[Str(name)];
    if (v === undefined) return null;
    if (v !== null && (typeof v === 'object' || typeof v === 'function')) st.attrsChanged = true; // may be changed in place
    return v;
  },
  getAttributeNames: function (this: unknown): Enumeration<string> {
    return makeEnumeration(objectKeys(reqRec(this).attrs));
  },
  /** Setting null or undefined removes the attribute. */
  setAttribute: function (this: unknown, name: unknown, value: unknown): void {
    var st = reqRec(this);
    var attrs = st.attrs;
    st.attrsChanged = true;
    if (value === null || value === undefined) delete attrs[Str(name)];
    else attrs[Str(name)] = value; // (no prototype: no inherited setter, and '__proto__' is a plain key)
  },
  removeAttribute: function (this: unknown, name: unknown): void {
    var st = reqRec(this);
    st.attrsChanged = true;
    delete st.attrs[Str(name)];
  },

  getParameter: function (this: unknown, name: unknown): string | null {
    var v = parameterValues(reqRec(this), Str(name));
    return v.length ? v[0] : null;
  },
  getParameterNames: function (this: unknown): Enumeration<string> {
    var st = reqRec(this);
    return makeEnumeration(unionKeys(snapField(st, 'query', NO_MAP), snapField(st, 'form', NO_MAP)));
  },
  getParameterValues: function (this: unknown, name: unknown): string[] | null {
    var v = parameterValues(reqRec(this), Str(name));
    return v.length ? v : null;
  },
  getParameterMap: function (this: unknown): { [name: string]: string[] } {
    var rec = reqRec(this);
    var out: { [name: string]: string[] } = {};
    var names = unionKeys(snapField(rec, 'query', NO_MAP), snapField(rec, 'form', NO_MAP));
    for (var i = 0; i < names.length; i++) setOwn(out, names[i], parameterValues(rec, names[i]));
    return out;
  },

  getCharacterEncoding: snapGetter('characterEncoding', null),
  getProtocol: snapGetter('protocol', 'HTTP/1.1'),
  getScheme: snapGetter('scheme', 'http'),
  getServerName: snapGetter('serverName', ''),
  getServerPort: snapGetter('serverPort', 0),
  getRemoteAddr: snapGetter('remoteAddr', null),
  getRemoteHost: snapGetter('remoteHost', null),
  getRemotePort: snapGetter('remotePort', 0),
  isSecure: function (this: unknown): boolean {
    return snapField(reqRec(this), 'scheme', 'http') === 'https';
  },

  getContentType: snapGetter('contentType', null),
  getAuthType: snapGetter('authType', null),
  /** Cookie[] (every cookie sent, a name sent twice included), or null when the request has none (as HttpServletRequest.getCookies). */
  getCookies: function (this: unknown): Cookie[] | null {
    var st = reqRec(this);
    var out: Cookie[] = [];
    var i;
    var list = snapField(st, 'cookieList', null);
    if (isArray(list)) {
      for (i = 0; i < list.length; i++) if (isArray(list[i])) push(out, makeCookie(Str(list[i][0]), Str(list[i][1])));
      return out.length ? out : null;
    }
    var cookies = snapField(st, 'cookies', NO_MAP);
    var keys = objectKeys(cookies);
    if (keys.length === 0) return null;
    for (i = 0; i < keys.length; i++) push(out, makeCookie(keys[i], Str(cookies[keys[i]])));
    return out;
  },
  /** The first value of the header, case-insensitive; null when absent. */
  getHeader: function (this: unknown, name: unknown): string | null {
    var v = headerValues(reqRec(this), name);
    return v.length ? v[0] : null;
  },
  getHeaders: function (this: unknown, name: unknown): Enumeration<string> {
    return makeEnumeration(headerValues(reqRec(this), name));
  },
  getHeaderNames: function (this: unknown): Enumeration<string> {
    var st = reqRec(this);
    return makeEnumeration(unionKeys(snapField(st, 'headers', NO_MAP), snapField(st, 'headerLists', NO_MAP)));
  },
  getMethod: snapGetter('method', 'GET'),
  getPathInfo: snapGetter('pathInfo', null),
  getContextPath: snapGetter('contextPath', ''),
  getQueryString: snapGetter('queryString', null),
  getRemoteUser: () => null,
  getUserPrincipal: () => null,
  getRequestURI: snapGetter('requestURI', ''),
  /** scheme://serverName[:port]requestURI, without the port when it is the scheme's default. */
  getRequestURL: function (this: unknown): string {
    var st = reqRec(this);
    var scheme = snapField(st, 'scheme', 'http');
    var serverPort = snapField(st, 'serverPort', 0);
    var dflt = scheme === 'https' ? 443 : 80;
    return scheme + '://' + snapField(st, 'serverName', '') + (serverPort && serverPort !== dflt ? ':' + serverPort : '') + snapField(st, 'requestURI', '');
  },
  getServletPath: snapGetter('servletPath', ''),
  getParts: function (this: unknown): Part[] {
    return copyArray(partsOf(reqRec(this)));
  },
  getPart: function (this: unknown, name: unknown): Part | null {
    var parts = partsOf(reqRec(this));
    var n = Str(name);
    for (var i = 0; i < parts.length; i++) if (parts[i].name === n) return parts[i];
    return null;
  },
});

/** The request object of a stage (its st.requestApi). */
export function makeRequest(st: StageRecord): typeof ReqProto {
  var o: typeof ReqProto = objectCreate(ReqProto);
  wmSet(apiStage, o, st);
  return o;
}

/** The stage's Part objects, made on first use. */
export function partsOf(st: StageRecord): Part[] {
  if (st.parts === null) {
    var parts: Part[] = [];
    var infos = snapField(st, 'parts', null);
    if (isArray(infos)) for (var i = 0; i < infos.length; i++) push(parts, makePart(st, infos[i]));
    st.parts = parts;
  }
  return st.parts;
}
