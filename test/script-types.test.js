'use strict';
// The declarations script authors write against (types/api-context.d.ts, types/platform.d.ts)
// against what the sandbox gives them, on both engines: every declared member exists and every
// member the sandbox has is declared, values have the declared kinds, and the errors the JSDoc
// names are what a script catches.
const fs = require('node:fs');
const http = require('node:http');
const os = require('node:os');
const path = require('node:path');
const ts = require('typescript');
const request = require('supertest');
const { makeApp } = require('./helpers/app');

const TYPES = path.join(__dirname, '..', 'types');

/** The member names of each interface declared in types/*.d.ts (`[Symbol.iterator]` as written). */
function declaredMembers() {
  const out = {};
  for (const file of ['api-context.d.ts', 'platform.d.ts']) {
    const src = ts.createSourceFile(file, fs.readFileSync(path.join(TYPES, file), 'utf8'), ts.ScriptTarget.ES2022, true);
    for (const st of src.statements) {
      if (!ts.isInterfaceDeclaration(st)) continue;
      const names = new Set();
      for (const m of st.members) if (m.name) names.add(ts.isComputedPropertyName(m.name) ? `[${m.name.expression.getText(src)}]` : m.name.getText(src));
      out[st.name.text] = [...names].sort();
    }
  }
  return out;
}

// Runs in the sandbox: the names a script can read on each object (own and inherited, up to
// Object.prototype), and the kinds of the values the declarations promise.
const SCRIPT = `
function names(o) {
  const out = new Set();
  for (let p = o; p !== null && p !== Object.prototype; p = Object.getPrototypeOf(p)) {
    for (const k of Object.getOwnPropertyNames(p)) out.add(k);
    if (Object.getOwnPropertySymbols(p).includes(Symbol.iterator)) out.add('[Symbol.iterator]');
  }
  return [...out].sort();
}
function kind(v) {
  if (v === null) return 'null';
  if (Array.isArray(v)) return 'array';
  if (v !== undefined && typeof v.then === 'function') return 'promise';
  return typeof v;
}
export function fn(ctx) {
  const req = ctx.request, res = ctx.response;
  const part = ctx.getParts()[0];
  const saved = part.save('up/a.txt');
  const out = platform.http.request({ url: ctx.request.getHeader('x-upstream') });
  const savedBody = out.saveBodyAsFile('down/b.json');
  const members = {
    APIContext: names(ctx), PlatformHttpRequest: names(req), PlatformHttpResponse: names(res),
    PrintWriter: names(res.getWriter()), ServletOutputStream: names(res.getOutputStream()),
    Enumeration: names(req.getHeaderNames()), Cookie: names(req.getCookies()[0]), Part: names(part),
    SavedFile: names(saved), PlatformHttpResponseData: names(out),
    Platform: names(platform), PlatformApp: names(platform.app), PlatformSystem: names(platform.system),
    PlatformUtils: names(platform.utils), PlatformHttp: names(platform.http), Console: names(console),
  };
  const kinds = {
    request: {
      getAttribute: kind(req.getAttribute('none')), getParameter: kind(req.getParameter('q')), getParameterValues: kind(req.getParameterValues('q')),
      getParameterMap: kind(req.getParameterMap()), getCharacterEncoding: kind(req.getCharacterEncoding()), getProtocol: kind(req.getProtocol()),
      getScheme: kind(req.getScheme()), getServerName: kind(req.getServerName()), getServerPort: kind(req.getServerPort()),
      getRemoteAddr: kind(req.getRemoteAddr()), getRemoteHost: kind(req.getRemoteHost()), getRemotePort: kind(req.getRemotePort()),
      isSecure: kind(req.isSecure()), getContentType: kind(req.getContentType()), getAuthType: kind(req.getAuthType()),
      getCookies: kind(req.getCookies()), getHeader: kind(req.getHeader('x-upstream')), getMethod: kind(req.getMethod()),
      getPathInfo: kind(req.getPathInfo()), getContextPath: kind(req.getContextPath()), getQueryString: kind(req.getQueryString()),
      getRemoteUser: kind(req.getRemoteUser()), getUserPrincipal: kind(req.getUserPrincipal()), getRequestURI: kind(req.getRequestURI()),
      getRequestURL: kind(req.getRequestURL()), getServletPath: kind(req.getServletPath()), getParts: kind(req.getParts()),
      getPart: kind(req.getPart('f')), noPart: kind(req.getPart('none')),
    },
    response: {
      getCharacterEncoding: kind(res.getCharacterEncoding()), getContentType: kind(res.getContentType()), getStatus: kind(res.getStatus()),
      getHeader: kind(res.getHeader('none')), getHeaders: kind(res.getHeaders('none')), getHeaderNames: kind(res.getHeaderNames()),
      getBufferSize: kind(res.getBufferSize()), isCommitted: kind(res.isCommitted()), containsHeader: kind(res.containsHeader('x')),
      encodeURL: kind(res.encodeURL('/a')), append: kind(res.getWriter().append('')), printf: kind(res.getWriter().printf('')),
      checkError: kind(res.getWriter().checkError()), isReady: kind(res.getOutputStream().isReady()),
    },
    part: { name: kind(part.name), contentType: kind(part.contentType), size: kind(part.size), submittedFileName: kind(part.submittedFileName), getSize: kind(part.getSize()) },
    saved: { path: kind(saved.path), size: kind(saved.size) },
    http: { status: kind(out.status), headers: kind(out.headers), url: kind(out.url), body: kind(out.body), text: kind(out.text()), json: kind(out.json()), savedBody: kind(savedBody.size) },
    platform: { toJSON: kind(platform.utils.toJSON({})), stringToBytes: kind(platform.utils.stringToBytes('a')), account: kind(platform.system.getAccountByToken('t')) },
  };
  res.resetBuffer();
  return { members, kinds };
}
export function onError(ctx, error) { return { APIError: Object.keys(error).sort() }; }
export function fail() { throw new Error('x'); }

function caught(f) {
  try {
    f();
    return 'no error';
  } catch (e) {
    const builtIns = { TypeError, RangeError, SyntaxError };
    return { name: e.name, instance: builtIns[e.name] !== undefined && e instanceof builtIns[e.name], isError: e instanceof Error };
  }
}
export function errors(ctx) {
  let deep = 1;
  for (let i = 0; i < 102; i++) deep = [deep]; // (101 levels inside the outermost array)
  const notJson = platform.http.request(ctx.request.getHeader('x-upstream') + '?text');
  return {
    charset: caught(() => platform.utils.stringToBytes('a', 'no-such-charset')),
    tooLong: caught(() => platform.utils.stringToBytes('a'.repeat(300000), 'ISO-8859-1')),
    toJSONDeep: caught(() => platform.utils.toJSON(deep)),
    bodyDeep: caught(() => platform.http.request({ url: ctx.request.getHeader('x-upstream'), body: deep })),
    noUrl: caught(() => platform.http.request({})),
    notJson: caught(() => notJson.json()),
    writeNull: caught(() => ctx.response.getOutputStream().write(null)),
  };
}
function thrown(f) {
  try {
    f();
    return 'no error';
  } catch (e) {
    return e.name;
  }
}
// (each option of a request is read once: what is checked is what is sent)
export function optionReads(ctx) {
  const reads = {};
  const values = { url: ctx.request.getHeader('x-upstream'), method: 'get', headers: { 'x-a': '1' }, body: null, timeoutMs: 5000 };
  const opts = {};
  for (const k of Object.keys(values)) Object.defineProperty(opts, k, { enumerable: true, get() { reads[k] = (reads[k] || 0) + 1; return values[k]; } });
  let urlReads = 0;
  const shiftyUrl = { toString: () => (urlReads++ === 0 ? values.url : '') };
  return { reads, status: platform.http.request(opts).status, shifty: platform.http.request({ url: shiftyUrl }).status, urlReads };
}
export function responseThrows(ctx) {
  const res = ctx.response;
  return {
    headerName: thrown(() => res.setHeader('X Bad', 'v')),
    headerValue: thrown(() => res.setHeader('X-Bad', 'a\\r\\nSet-Cookie: x=1')),
    headerWide: thrown(() => res.addHeader('X-Bad', '\\u20ac')),
    // (a value whose string form changes between reads: the one checked is the one kept)
    headerShifty: thrown(() => { let n = 0; res.setHeader('X-Shifty', { toString: () => (n++ === 0 ? 'ok' : 'a\\r\\nSet-Cookie: x=1') }) }),
    addShifty: thrown(() => { let n = 0; res.addHeader('X-Shifty', { toString: () => (n++ === 0 ? 'ok' : 'a\\r\\nSet-Cookie: x=1') }) }),
    // (a name is read once too: its first string form is the one checked and kept)
    addNameReads: (() => { let n = 0; res.addHeader({ toString: () => (n++ === 0 ? 'X-Named' : '') }, 'v'); return [n, res.getHeader('X-Named')]; })(),
    contentTypeHeader: thrown(() => res.setHeader('Content-Type', 'text/plain\\nX: y')),
    date: thrown(() => res.setDateHeader('X-Date', NaN)),
    addDate: thrown(() => res.addDateHeader('X-Date', 'tomorrow')),
    int: thrown(() => res.setIntHeader('X-Int', 'many')),
    addInt: thrown(() => res.addIntHeader('X-Int', NaN)),
    sendError: thrown(() => res.sendError(99)),
    sendRedirect: thrown(() => res.sendRedirect(null)),
    bufferSize: thrown(() => res.setBufferSize('big')),
    writeRange: thrown(() => res.getOutputStream().write([1, 2], 1, 5)),
    shiftyValues: res.getHeaders('X-Shifty'),
    set: res.getHeaderNames(),
  };
}
export function badHeader(ctx) {
  ctx.response.setHeader('X-Bad', 'a\\nb');
  return {};
}
export function badContentType(ctx) {
  ctx.response.setContentType('text/plain\\r\\nX-Injected: 1');
  return {};
}
`;

let upstream;
let base;
const dirs = [];
const routers = [];
beforeAll(async () => {
  upstream = http.createServer((req, res) => {
    res.setHeader('content-type', req.url.endsWith('?text') ? 'text/plain' : 'application/json');
    res.end(req.url.endsWith('?text') ? 'not json' : '{"ok":true}');
  });
  await new Promise((resolve) => upstream.listen(0, '127.0.0.1', resolve));
  base = `http://127.0.0.1:${upstream.address().port}/`;
});
afterAll(async () => {
  await Promise.all(routers.map((r) => r.close()));
  await new Promise((resolve) => upstream.close(resolve));
  for (const d of dirs) fs.rmSync(d, { recursive: true, force: true });
});

describe.each(['quickjs', 'vm2'])('with the %s engine', (engine) => {
  const sandboxDir = fs.mkdtempSync(path.join(os.tmpdir(), 'script-types-'));
  dirs.push(sandboxDir);
  const api = (p, fn, extra = {}) => ({ path: p, call: { script: 'types.js', function: fn }, returnType: 'JSON', ...extra });
  const { app, router } = makeApp({
    router: { engine, sandboxDir, outbound: { allowPrivateNetworks: true } },
    apps: {
      app1: {
        scripts: { 'types.js': SCRIPT },
        apis: [api('shapes', 'fn'), api('error', 'fail', { onError: { script: 'types.js', function: 'onError' } }), api('errors', 'errors'), api('throws', 'responseThrows'), api('option-reads', 'optionReads'), api('bad-header', 'badHeader'), api('bad-type', 'badContentType')],
      },
    },
  });
  routers.push(router);

  test('every member the declarations name exists, and nothing undeclared; values have the declared kinds', async () => {
    const res = await request(app)
      .post('/web0/api/app1/shapes?q=1')
      .set('X-Upstream', base)
      .set('Cookie', 'sid=1')
      .attach('f', Buffer.from('hi'), 'a.txt');
    expect(res.status).toBe(200);
    const declared = declaredMembers();
    for (const [name, members] of Object.entries(res.body.members)) expect({ [name]: members }).toEqual({ [name]: declared[name] });
    const failed = await request(app).get('/web0/api/app1/error');
    expect(failed.body.APIError).toEqual(declared.APIError);

    const k = res.body.kinds;
    expect(k.request).toEqual({
      getAttribute: 'null', getParameter: 'string', getParameterValues: 'array', getParameterMap: 'object', getCharacterEncoding: 'null',
      getProtocol: 'string', getScheme: 'string', getServerName: 'string', getServerPort: 'number', getRemoteAddr: 'string',
      getRemoteHost: 'string', getRemotePort: 'number', isSecure: 'boolean', getContentType: 'string', getAuthType: 'null',
      getCookies: 'array', getHeader: 'string', getMethod: 'string', getPathInfo: 'string', getContextPath: 'string',
      getQueryString: 'string', getRemoteUser: 'null', getUserPrincipal: 'null', getRequestURI: 'string', getRequestURL: 'string',
      getServletPath: 'string', getParts: 'array', getPart: 'object', noPart: 'null',
    });
    expect(k.response).toEqual({
      getCharacterEncoding: 'string', getContentType: 'null', getStatus: 'number', getHeader: 'null', getHeaders: 'array',
      getHeaderNames: 'array', getBufferSize: 'number', isCommitted: 'boolean', containsHeader: 'boolean', encodeURL: 'string',
      append: 'object', printf: 'object', checkError: 'boolean', isReady: 'boolean',
    });
    expect(k.part).toEqual({ name: 'string', contentType: 'string', size: 'number', submittedFileName: 'string', getSize: 'number' });
    // host calls written in the spec's synchronous style give values, never promises
    expect(k.saved).toEqual({ path: 'string', size: 'number' });
    expect(k.http).toEqual({ status: 'number', headers: 'object', url: 'string', body: 'string', text: 'string', json: 'object', savedBody: 'number' });
    expect(k.platform).toEqual({ toJSON: 'string', stringToBytes: 'array', account: 'null' });
  });

  test('the errors the JSDoc names (RangeError, TypeError, SyntaxError) are instances of those built-ins', async () => {
    const res = await request(app).get('/web0/api/app1/errors').set('X-Upstream', base);
    expect(res.status).toBe(200);
    const as = (name) => ({ name, instance: true, isError: true });
    expect(res.body).toEqual({
      charset: as('RangeError'),
      tooLong: as('RangeError'),
      toJSONDeep: as('RangeError'),
      bodyDeep: as('RangeError'),
      noUrl: as('TypeError'),
      notJson: as('SyntaxError'),
      writeNull: as('TypeError'),
    });
  });

  test('platform.http.request reads each option once, and sends the url it checked', async () => {
    const res = await request(app).get('/web0/api/app1/option-reads').set('X-Upstream', base);
    expect(res.status).toBe(200);
    expect(res.body).toEqual({ reads: { url: 1, method: 1, headers: 1, body: 1, timeoutMs: 1 }, status: 200, shifty: 200, urlReads: 1 });
  });

  test('ctx.response refuses what the types say it throws for, at the call', async () => {
    const res = await request(app).get('/web0/api/app1/throws');
    expect(res.status).toBe(200);
    const IAE = 'IllegalArgumentException';
    expect(res.body).toEqual({
      headerName: IAE, headerValue: IAE, headerWide: IAE, headerShifty: 'no error', addShifty: 'no error', addNameReads: [1, 'v'], shiftyValues: ['ok', 'ok'], contentTypeHeader: IAE, date: IAE, addDate: IAE, int: IAE, addInt: IAE,
      sendError: IAE, sendRedirect: IAE, bufferSize: IAE, writeRange: 'IndexOutOfBoundsException', set: ['X-Shifty', 'X-Named'],
    });
    // uncaught, it is the call's error (SCRIPT_ERROR), as the README says
    const header = await request(app).get('/web0/api/app1/bad-header');
    expect(header.status).toBe(500);
    expect(header.body).toMatchObject({ code: 270000, message: 'Invalid character in the value of header X-Bad' });
    // a content type is checked where the host writes the response
    const type = await request(app).get('/web0/api/app1/bad-type');
    expect(type.status).toBe(500);
    expect(type.body).toMatchObject({ code: 270304 });
    expect(type.headers['x-injected']).toBeUndefined();
  });
});
