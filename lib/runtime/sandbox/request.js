/*
 * Sandbox adapter fragment: Part, Cookie, ctx.request (PlatformHttpRequest) and ctx (APIContext).
 *
 * Holds makePart, makeCookie, makeRequest(st) (parameters, headers, cookies, attributes, parts
 * of the RequestSnapshot, as methods of one shared prototype) and makeCtx(st), the ctx passed to the tenant's
 * function, whose fields are read from the stage record's snapshot on first use.
 *
 * Expects from prelude.js: the helpers (getOwn, setOwn, push, copyArray, clonePlain,
 * unionKeys, lower, ...); from host.js: hostCall (Part.save*); from enumeration.js:
 * makeEnumeration; from response.js: makeResponse.
 */
function makePart(info) {
  var id = Str(getOwn(info, 'id'));
  var name = getOwn(info, 'name');
  var contentType = getOwn(info, 'contentType');
  var size = getOwn(info, 'size');
  var fileName = getOwn(info, 'submittedFileName');
  name = name === undefined ? null : name;
  contentType = contentType === undefined ? null : contentType;
  size = typeof size === 'number' ? size : 0;
  fileName = fileName === undefined ? null : fileName;
  var path = (p) => (p === undefined ? null : Str(p));
  return freeze({
    name: name,
    contentType: contentType,
    size: size,
    submittedFileName: fileName,
    getName: () => name,
    getContentType: () => contentType,
    getSize: () => size,
    getSubmittedFileName: () => fileName,
    save: (p) => hostCall('part.save', { id: id, path: path(p) }),
    saveStorage: (p) => hostCall('part.saveStorage', { id: id, path: path(p) }),
    saveAttachment: (tableId, fieldId) => hostCall('part.saveAttachment', { id: id, tableId: path(tableId), fieldId: path(fieldId) }),
  });
}
function makeCookie(name, value) {
  return { name: name, value: value, getName: () => name, getValue: () => value };
}

/**
 * ctx.request: its methods live on one frozen prototype per context (building ~40 closures per
 * stage was most of a hook's cost in QuickJS); each request object finds its own data in
 * reqRecs. A method called detached from its object (`const { getHeader } = ctx.request`) acts
 * on the request of the stage running now.
 */
var reqRecs = new WeakMapCtor();
function reqRec(self) {
  var st = isObj(self) ? wmGet(reqRecs, self) : undefined;
  if (st === ENDED) throw illegalState('ctx.request is used after its call ended');
  if (st !== undefined) return st;
  if (current !== null) return current;
  throw illegalState('ctx.request is used outside of a call');
}
/** Query values first, then the urlencoded / multipart form fields. */
function parameterValues(st, name) {
  var out = [];
  var sources = [getOwn(snapField(st, 'query', {}), name), getOwn(snapField(st, 'form', {}), name)];
  for (var s = 0; s < 2; s++) {
    var v = sources[s];
    if (typeof v === 'string') push(out, v);
    else if (isArray(v)) for (var i = 0; i < v.length; i++) push(out, Str(v[i]));
  }
  return out;
}
function headerValues(st, name) {
  if (isNil(name)) return [];
  var ln = lower(name);
  var list = getOwn(snapField(st, 'headerLists', {}), ln);
  if (isArray(list) && list.length) {
    var out = [];
    for (var i = 0; i < list.length; i++) push(out, Str(list[i]));
    return out;
  }
  var h = getOwn(snapField(st, 'headers', {}), ln);
  return typeof h === 'string' ? [h] : [];
}
function snapGetter(k, dflt) {
  return function () {
    return snapField(reqRec(this), k, dflt);
  };
}

var ReqProto = freeze({
  // Attributes: the live values within a stage, JSON copies from one stage to the next.
  getAttribute: function (name) {
    var st = reqRec(this);
    var attrs = st.attrs;
    if (!hasOwn(attrs, Str(name))) return null;
    var v = attrs[Str(name)];
    if (v !== null && (typeof v === 'object' || typeof v === 'function')) st.attrsChanged = true; // may be changed in place
    return v;
  },
  getAttributeNames: function () {
    return makeEnumeration(objectKeys(reqRec(this).attrs));
  },
  /** Setting null or undefined removes the attribute. */
  setAttribute: function (name, value) {
    var st = reqRec(this);
    var attrs = st.attrs;
    st.attrsChanged = true;
    if (isNil(value)) delete attrs[Str(name)];
    else setOwn(attrs, Str(name), value);
  },
  removeAttribute: function (name) {
    var st = reqRec(this);
    st.attrsChanged = true;
    delete st.attrs[Str(name)];
  },

  getParameter: function (name) {
    var v = parameterValues(reqRec(this), Str(name));
    return v.length ? v[0] : null;
  },
  getParameterNames: function () {
    var st = reqRec(this);
    return makeEnumeration(unionKeys(snapField(st, 'query', {}), snapField(st, 'form', {})));
  },
  getParameterValues: function (name) {
    var v = parameterValues(reqRec(this), Str(name));
    return v.length ? v : null;
  },
  getParameterMap: function () {
    var rec = reqRec(this);
    var out = {};
    var names = unionKeys(snapField(rec, 'query', {}), snapField(rec, 'form', {}));
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
  isSecure: function () {
    return snapField(reqRec(this), 'scheme', 'http') === 'https';
  },

  getContentType: snapGetter('contentType', null),
  getAuthType: snapGetter('authType', null),
  /** Cookie[], or null when the request has none (as HttpServletRequest.getCookies). */
  getCookies: function () {
    var cookies = snapField(reqRec(this), 'cookies', {});
    var keys = objectKeys(cookies);
    if (keys.length === 0) return null;
    var out = [];
    for (var i = 0; i < keys.length; i++) push(out, makeCookie(keys[i], Str(cookies[keys[i]])));
    return out;
  },
  /** The first value of the header, case-insensitive; null when absent. */
  getHeader: function (name) {
    var v = headerValues(reqRec(this), name);
    return v.length ? v[0] : null;
  },
  getHeaders: function (name) {
    return makeEnumeration(headerValues(reqRec(this), name));
  },
  getHeaderNames: function () {
    var st = reqRec(this);
    return makeEnumeration(unionKeys(snapField(st, 'headers', {}), snapField(st, 'headerLists', {})));
  },
  getMethod: snapGetter('method', 'GET'),
  getPathInfo: snapGetter('pathInfo', null),
  getContextPath: snapGetter('contextPath', ''),
  getQueryString: snapGetter('queryString', null),
  getRemoteUser: () => null,
  getUserPrincipal: () => null,
  getRequestURI: snapGetter('requestURI', ''),
  /** scheme://serverName[:port]requestURI, without the port when it is the scheme's default. */
  getRequestURL: function () {
    var st = reqRec(this);
    var scheme = snapField(st, 'scheme', 'http');
    var serverPort = snapField(st, 'serverPort', 0);
    var dflt = scheme === 'https' ? 443 : 80;
    return scheme + '://' + snapField(st, 'serverName', '') + (serverPort && serverPort !== dflt ? ':' + serverPort : '') + snapField(st, 'requestURI', '');
  },
  getServletPath: snapGetter('servletPath', ''),
  getParts: function () {
    return copyArray(partsOf(reqRec(this)));
  },
  getPart: function (name) {
    var parts = partsOf(reqRec(this));
    for (var i = 0; i < parts.length; i++) if (parts[i].name === Str(name)) return parts[i];
    return null;
  },
});

function makeRequest(st) {
  var req = objectCreate(ReqProto);
  wmSet(reqRecs, req, st);
  return req;
}

/**
 * ctx is built from shared, lazy property definitions: a field is read from the snapshot (parsed
 * on first use) when the script first reads it, then becomes an ordinary data property. A
 * script that never looks at ctx pays for none of it. ctxStage maps a ctx to its stage record.
 */
var ctxStage = new WeakMapCtor();
function partsOf(st) {
  if (st.parts === null) {
    var parts = [];
    var infos = snapField(st, 'parts', null);
    if (isArray(infos)) for (var i = 0; i < infos.length; i++) push(parts, makePart(infos[i]));
    st.parts = parts;
  }
  return st.parts;
}
function lazyField(key, dflt, clone) {
  return {
    __proto__: null,
    get: function () {
      var st = wmGet(ctxStage, this);
      if (st === undefined || st === ENDED) return undefined;
      var v = snapField(st, key, undefined);
      v = v === undefined ? (clone ? {} : dflt) : clone ? clonePlain(v) : v;
      setOwn(this, key, v);
      return v;
    },
    set: function (v) {
      setOwn(this, key, v);
    },
    enumerable: true,
    configurable: true,
  };
}
var CTX_PROPS = {
  __proto__: null,
  headers: lazyField('headers', null, true),
  cookies: lazyField('cookies', null, true),
  query: lazyField('query', null, true),
  body: lazyField('body', '', false),
  url: lazyField('url', '', false),
  appId: lazyField('appId', '', false),
  path: lazyField('path', '', false),
  method: lazyField('method', 'GET', false),
  // request and response are built on first use: most scripts touch neither, and building their
  // ~80 methods is the largest part of a stage's cost in QuickJS.
  request: {
    __proto__: null,
    get: function () {
      var st = wmGet(ctxStage, this);
      if (st === undefined || st === ENDED) return undefined;
      return st.requestApi || (st.requestApi = makeRequest(st));
    },
    enumerable: true,
    configurable: false,
  },
  response: {
    __proto__: null,
    get: function () {
      var st = wmGet(ctxStage, this);
      if (st === undefined || st === ENDED) return undefined;
      return st.responseApi || (st.responseApi = makeResponse(st));
    },
    enumerable: true,
    configurable: false,
  },
};

function makeCtx(st) {
  var ctx = { getParts: () => copyArray(partsOf(st)) };
  wmSet(ctxStage, ctx, st);
  defineProperties(ctx, CTX_PROPS);
  st.ctx = ctx;
  return ctx;
}
/** The stage is over: its ctx, request and response objects no longer lead to it (see ENDED). */
function endStage(st) {
  if (st.ctx !== null) wmSet(ctxStage, st.ctx, ENDED);
  if (st.requestApi !== null) wmSet(reqRecs, st.requestApi, ENDED);
  if (st.responseApi !== null) wmSet(resRecs, st.responseApi, ENDED);
}
