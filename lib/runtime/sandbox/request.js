/*
 * Sandbox adapter fragment: Part, Cookie, ctx.request (PlatformHttpRequest) and ctx (APIContext).
 *
 * Holds makePart, makeCookie, makeRequest(st, snap, parts) (parameters, headers, cookies,
 * attributes, parts of the RequestSnapshot) and makeCtx(st), the ctx passed to the tenant's
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

function makeRequest(st, snap, parts) {
  function field(k, dflt) {
    var v = getOwn(snap, k);
    return v === undefined ? dflt : v;
  }
  var query = field('query', {});
  var form = field('form', {});
  var headers = field('headers', {});
  var headerLists = field('headerLists', {});
  var cookies = field('cookies', {});
  var scheme = field('scheme', 'http');
  var serverName = field('serverName', '');
  var serverPort = field('serverPort', 0);
  var requestURI = field('requestURI', '');
  var get = (k, dflt) => () => field(k, dflt);

  /** Query values first, then the urlencoded / multipart form fields. */
  function parameterValues(name) {
    var out = [];
    var sources = [getOwn(query, name), getOwn(form, name)];
    for (var s = 0; s < 2; s++) {
      var v = sources[s];
      if (typeof v === 'string') push(out, v);
      else if (isArray(v)) for (var i = 0; i < v.length; i++) push(out, Str(v[i]));
    }
    return out;
  }
  function headerValues(name) {
    if (isNil(name)) return [];
    var ln = lower(name);
    var list = getOwn(headerLists, ln);
    if (isArray(list) && list.length) {
      var out = [];
      for (var i = 0; i < list.length; i++) push(out, Str(list[i]));
      return out;
    }
    var h = getOwn(headers, ln);
    return typeof h === 'string' ? [h] : [];
  }

  return {
    // Attributes: the live values within a stage, JSON copies from one stage to the next.
    getAttribute: (name) => (hasOwn(st.attrs, Str(name)) ? st.attrs[Str(name)] : null),
    getAttributeNames: () => makeEnumeration(objectKeys(st.attrs)),
    /** Setting null or undefined removes the attribute. */
    setAttribute: function (name, value) {
      if (isNil(value)) delete st.attrs[Str(name)];
      else setOwn(st.attrs, Str(name), value);
    },
    removeAttribute: (name) => void delete st.attrs[Str(name)],

    getParameter: function (name) {
      var v = parameterValues(Str(name));
      return v.length ? v[0] : null;
    },
    getParameterNames: () => makeEnumeration(unionKeys(query, form)),
    getParameterValues: function (name) {
      var v = parameterValues(Str(name));
      return v.length ? v : null;
    },
    getParameterMap: function () {
      var out = {};
      var names = unionKeys(query, form);
      for (var i = 0; i < names.length; i++) setOwn(out, names[i], parameterValues(names[i]));
      return out;
    },

    getCharacterEncoding: get('characterEncoding', null),
    getProtocol: get('protocol', 'HTTP/1.1'),
    getScheme: () => scheme,
    getServerName: () => serverName,
    getServerPort: () => serverPort,
    getRemoteAddr: get('remoteAddr', null),
    getRemoteHost: get('remoteHost', null),
    getRemotePort: get('remotePort', 0),
    isSecure: () => scheme === 'https',

    getContentType: get('contentType', null),
    getAuthType: get('authType', null),
    /** Cookie[], or null when the request has none (as HttpServletRequest.getCookies). */
    getCookies: function () {
      var keys = objectKeys(cookies);
      if (keys.length === 0) return null;
      var out = [];
      for (var i = 0; i < keys.length; i++) push(out, makeCookie(keys[i], Str(cookies[keys[i]])));
      return out;
    },
    /** The first value of the header, case-insensitive; null when absent. */
    getHeader: function (name) {
      var v = headerValues(name);
      return v.length ? v[0] : null;
    },
    getHeaders: (name) => makeEnumeration(headerValues(name)),
    getHeaderNames: () => makeEnumeration(unionKeys(headers, headerLists)),
    getMethod: get('method', 'GET'),
    getPathInfo: get('pathInfo', null),
    getContextPath: get('contextPath', ''),
    getQueryString: get('queryString', null),
    getRemoteUser: () => null,
    getUserPrincipal: () => null,
    getRequestURI: () => requestURI,
    /** scheme://serverName[:port]requestURI, without the port when it is the scheme's default. */
    getRequestURL: function () {
      var dflt = scheme === 'https' ? 443 : 80;
      return scheme + '://' + serverName + (serverPort && serverPort !== dflt ? ':' + serverPort : '') + requestURI;
    },
    getServletPath: get('servletPath', ''),
    getParts: () => copyArray(parts),
    getPart: function (name) {
      for (var i = 0; i < parts.length; i++) if (parts[i].name === Str(name)) return parts[i];
      return null;
    },
  };
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
    var infos = getOwn(st.snap, 'parts');
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
      if (st === undefined) return undefined;
      var v = getOwn(st.snap, key);
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
      if (st === undefined) return undefined;
      return st.requestApi || (st.requestApi = makeRequest(st, st.snap, partsOf(st)));
    },
    enumerable: true,
    configurable: false,
  },
  response: {
    __proto__: null,
    get: function () {
      var st = wmGet(ctxStage, this);
      if (st === undefined) return undefined;
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
  return ctx;
}
