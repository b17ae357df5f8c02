'use strict';
/**
 * The sandbox adapter (lib/runtime/sandbox/*.js), driven directly: each test evaluates the
 * adapter in a fresh node:vm context and calls it with a fake host bridge, evaluates a "script"
 * function in the same context (so its Dates, promises and objects belong to the sandbox realm,
 * as in the real engines), starts a stage through the entry, lets the job queue drain and parses
 * what entry.drain() reports. A last block runs the same adapter in the two real engines
 * (QuickJS and vm2).
 */
const vm = require('node:vm');

// The adapter as the engines get it: the bundle `npm run build` makes from lib/runtime/sandbox.
const { adapterSource } = require('../dist/cjs/runtime/adapter-source.js');
const SRC = adapterSource();
// What an engine evaluates right after calling the adapter: binds the functions each await is wrapped with.
const { CONTINUATION_SCRIPT } = require('../dist/cjs/runtime/protocol.js');

function baseRequest(over = {}) {
  return {
    requestId: 'req-1',
    appId: 'app1',
    path: 'orders/list',
    method: 'POST',
    url: '/web0/api/app1/orders/list?a=1&a=2&b=x',
    headers: {
      'content-type': 'application/x-www-form-urlencoded',
      'x-multi': 'one, two',
      cookie: 'sid=abc; theme=dark',
      authorization: 'Bearer tok',
    },
    headerLists: {
      'content-type': ['application/x-www-form-urlencoded'],
      'x-multi': ['one', 'two'],
      cookie: ['sid=abc; theme=dark'],
      authorization: ['Bearer tok'],
    },
    cookies: { sid: 'abc', theme: 'dark' },
    query: { a: ['1', '2'], b: 'x' },
    queryString: 'a=1&a=2&b=x',
    body: 'a=3&c=4',
    form: { a: ['3'], c: ['4'] },
    protocol: 'HTTP/1.1',
    scheme: 'https',
    serverName: 'api.example.com',
    serverPort: 8443,
    remoteAddr: '10.0.0.7',
    remoteHost: 'client.example.com',
    remotePort: 53211,
    contentType: 'application/x-www-form-urlencoded',
    characterEncoding: 'UTF-8',
    authType: 'Bearer',
    contextPath: '/web0/api',
    servletPath: '/app1',
    pathInfo: '/orders/list',
    requestURI: '/web0/api/app1/orders/list',
    parts: [
      { id: 'p1', name: 'file', contentType: 'image/png', size: 123, submittedFileName: 'a.png' },
      { id: 'p2', name: 'doc', contentType: 'text/plain', size: 5, submittedFileName: null },
    ],
    ...over,
  };
}

function baseResponse(over = {}) {
  return {
    status: 200,
    headers: [],
    contentType: null,
    characterEncoding: null,
    contentLength: null,
    bufferSize: 8192,
    chunks: [],
    written: false,
    committed: false,
    error: null,
    redirect: null,
    ...over,
  };
}

const flush = async () => {
  for (let i = 0; i < 3; i++) await new Promise((r) => setImmediate(r));
};

/**
 * A fresh sandbox. `table[op]` answers host ops: a function (args) => value, `{ error }` for a
 * failure, or any other value. Unlisted ops answer null. A stage run with `async: true` gets the
 * answers of its I/O calls asynchronously (a turn later), through entry.reply.
 */
function sandbox(table = {}) {
  const calls = [];
  const context = vm.createContext({});
  let nextCall = 1;
  let nextStage = 1;
  let entry;
  const answer = (op, args) => {
    const a = table[op];
    if (a && typeof a === 'object' && a.error) return JSON.stringify({ ok: false, error: a.error });
    const value = typeof a === 'function' ? a(args) : a === undefined ? null : a;
    return JSON.stringify(value === undefined ? { ok: true } : { ok: true, value });
  };
  const host = (stageId, op, argsJson, async) => {
    const args = JSON.parse(argsJson);
    calls.push({ op, args });
    if (!async) return answer(op, args);
    const id = nextCall++;
    setImmediate(() => entry.reply(id, answer(op, args)));
    return id;
  };
  entry = vm.runInContext(SRC, context, { filename: 'adapter.js' })(host);
  vm.runInContext(CONTINUATION_SCRIPT, context);
  const evaluate = (code) => vm.runInContext(code, context);
  const toFn = (fn) => (typeof fn === 'function' ? evaluate(`(${fn.toString()})`) : fn);

  /**
   * Runs one stage and returns the parsed StageOutput, with `state` filled in as the pipeline
   * does: the attributes and response the stage sent back, or the ones it was given (unchanged).
   */
  async function run(fn, opts = {}) {
    const head = { stage: opts.stage ?? 'call', returnType: opts.returnType ?? 'JSON', wantValue: opts.wantValue ?? true, async: opts.async ?? false };
    // the stage's argument, as the pipeline sends it: the call's result for after, the error for onError
    let value = '';
    if ('result' in opts && opts.hasResult !== false) value = JSON.stringify(opts.result);
    if ('error' in opts) value = JSON.stringify(opts.error);
    const state = opts.state ?? { attributes: {}, response: baseResponse() };
    const requestJson = opts.requestJson ?? JSON.stringify(opts.request ?? baseRequest());
    const id = nextStage++;
    // (as the pipeline sends it: the body's chunks in a text of their own, unless the test gives the whole response JSON)
    const { chunks, ...rest } = state.response;
    const responseJson = opts.responseJson ?? JSON.stringify(rest);
    const chunksJson = opts.chunksJson ?? (opts.responseJson === undefined && chunks?.length ? JSON.stringify(chunks) : '');
    entry.start(id, { fn: toFn(fn) }, 'fn', JSON.stringify(head), requestJson, JSON.stringify(state.attributes), responseJson, value, undefined, undefined, undefined, undefined, chunksJson);
    await flush();
    const text = entry.drain();
    expect(typeof text).toBe('string');
    const out = JSON.parse(text).outputs.find((o) => o.id === id) ?? { id, status: 'pending', hasValue: false };
    delete out.id;
    out.sent = { attributes: 'attributes' in out, response: 'response' in out };
    out.state = { attributes: out.attributes ?? state.attributes, response: out.response ? { ...state.response, ...out.response } : state.response };
    return out;
  }
  /** Runs a stage that must succeed and returns the script's value (a JSON copy). */
  async function probe(fn, opts = {}) {
    const out = await run(fn, opts);
    if (out.status !== 'value') throw new Error(`stage failed: ${JSON.stringify(out.error)}`);
    return out.value;
  }
  return { context, entry, calls, evaluate, run, probe };
}

const b64text = (b) => Buffer.from(b, 'base64').toString('utf8');

// -------------------------------------------------------------------------------------------------
describe('loading', () => {
  test('the host bridge is an argument, never a global', async () => {
    const sb = sandbox({ 'system.getAccountByToken': { id: 'u1' } });
    const seen = await sb.probe(function () {
      return {
        type: typeof __host,
        inGlobal: '__host' in globalThis,
        names: Object.getOwnPropertyNames(globalThis).filter((n) => n.indexOf('host') >= 0 || n.indexOf('__') === 0),
        account: platform.system.getAccountByToken('t'),
      };
    });
    expect(seen).toEqual({ type: 'undefined', inGlobal: false, names: [], account: { id: 'u1' } });
  });

  test('fails to load without a host bridge', () => {
    const context = vm.createContext({});
    expect(() => vm.runInContext(SRC, context)()).toThrow(/host bridge is missing/);
  });

  test('the entry is returned, frozen, and never put on the global object', () => {
    const sb = sandbox();
    expect(Object.isFrozen(sb.entry)).toBe(true);
    expect(Object.keys(sb.entry).sort()).toEqual(['at', 'cancel', 'drain', 'reply', 'start']);
    expect(sb.evaluate('Object.keys(globalThis)')).toEqual([]);
    expect(sb.evaluate('Object.getOwnPropertyNames(globalThis).filter((n) => /^__/.test(n))')).toEqual([]);
  });

  test('platform is non-writable and deeply frozen', () => {
    const sb = sandbox();
    const d = sb.evaluate('Object.getOwnPropertyDescriptor(globalThis, "platform")');
    expect(d.writable).toBe(false);
    expect(d.configurable).toBe(false);
    expect(sb.evaluate('[platform, platform.app, platform.system, platform.utils, platform.http, platform.app.abort].every(Object.isFrozen)')).toBe(true);
    // (TypeErrors of the sandbox realm: compare names, not constructors)
    expect(() => sb.evaluate('"use strict"; platform.app.abort = function () {}')).toThrow(/read only/);
    expect(() => sb.evaluate('"use strict"; platform.utils.extra = 1')).toThrow(/not extensible/);
    expect(() => sb.evaluate('"use strict"; platform = {}')).toThrow(/read only/);
    expect(sb.evaluate('typeof platform.app.abort')).toBe('function');
  });

  test('FinalizationRegistry, made inert, is named as the built-in it replaces', () => {
    const sb = sandbox();
    expect(sb.evaluate('[FinalizationRegistry.name, FinalizationRegistry.length, String(new FinalizationRegistry(() => {}))]')).toEqual(['FinalizationRegistry', 1, '[object FinalizationRegistry]']);
    const d = sb.evaluate('Object.getOwnPropertyDescriptor(FinalizationRegistry, "name")');
    expect([d.writable, d.enumerable, d.configurable]).toEqual([false, false, true]);
  });

  test("the functions a script can reach carry no name the adapter's minifier gave them", async () => {
    const sb = sandbox();
    const found = await sb.probe(function (ctx) {
      // every function reachable from ctx, platform and console (own and inherited properties,
      // accessors included, up to the built-in prototypes) is anonymous or named after its key: a
      // name the minifier gave it would tell a script it is not the real API
      const builtIns = [Object.prototype, Function.prototype, Array.prototype];
      const seen = new Set();
      const odd = [];
      const visit = (v, path, depth) => {
        if ((typeof v !== 'object' && typeof v !== 'function') || v === null || seen.has(v) || depth > 4 || builtIns.includes(v)) return;
        seen.add(v);
        if (typeof v === 'function' && v.name !== '' && !path.endsWith('.' + v.name)) odd.push(path + ' is named ' + JSON.stringify(v.name));
        for (const key of Reflect.ownKeys(v)) {
          if (key === 'caller' || key === 'arguments' || key === 'prototype') continue;
          const d = Object.getOwnPropertyDescriptor(v, key);
          const at = path + '.' + String(key);
          if (d.get) visit(d.get, at + '.get', depth + 1); // (an accessor's functions are named get and set)
          if (d.set) visit(d.set, at + '.set', depth + 1);
          if ('value' in d) visit(d.value, at, depth + 1);
        }
        visit(Object.getPrototypeOf(v), path + '.__proto__', depth + 1);
      };
      const enumeration = ctx.request.getHeaderNames();
      visit({ ctx, platform, console, FinalizationRegistry, enumeration, parts: ctx.getParts(), writer: ctx.response.getWriter(), stream: ctx.response.getOutputStream() }, '', 0);
      return odd;
    });
    expect(found).toEqual([]);
  });

  test('drain before any start reports nothing', () => {
    const sb = sandbox();
    expect(JSON.parse(sb.entry.drain())).toEqual({ waiting: 0, outputs: [] });
  });

  test('start throws on a malformed stage head', () => {
    const sb = sandbox();
    expect(() => sb.entry.start(1, { fn: () => 1 }, 'fn', '{nope')).toThrow();
  });
});

// -------------------------------------------------------------------------------------------------
describe('ctx (APIContext)', () => {
  test('carries every field of the snapshot', async () => {
    const sb = sandbox();
    const v = await sb.probe(function (ctx) {
      return {
        keys: Object.keys(ctx).sort(),
        headers: ctx.headers,
        cookies: ctx.cookies,
        query: ctx.query,
        body: ctx.body,
        url: ctx.url,
        appId: ctx.appId,
        path: ctx.path,
        method: ctx.method,
        parts: ctx.getParts().length,
        requestIsObject: typeof ctx.request.getHeader,
        responseIsObject: typeof ctx.response.setStatus,
      };
    });
    const req = baseRequest();
    expect(v.keys).toEqual(['appId', 'body', 'cookies', 'getParts', 'headers', 'method', 'path', 'query', 'request', 'response', 'url']);
    expect(v.headers).toEqual(req.headers);
    expect(v.cookies).toEqual(req.cookies);
    expect(v.query).toEqual(req.query);
    expect(v.body).toBe('a=3&c=4');
    expect(v.url).toBe(req.url);
    expect(v.appId).toBe('app1');
    expect(v.path).toBe('orders/list');
    expect(v.method).toBe('POST');
    expect(v.parts).toBe(2);
    expect(v.requestIsObject).toBe('function');
    expect(v.responseIsObject).toBe('function');
  });

  test('headers / query are copies: mutating them does not change the request object', async () => {
    const sb = sandbox();
    const v = await sb.probe(function (ctx) {
      ctx.query.b = 'changed';
      ctx.headers['x-multi'] = 'changed';
      ctx.query.a.push('9');
      return [ctx.request.getParameter('b'), ctx.request.getHeader('x-multi'), ctx.request.getParameterValues('a')];
    });
    expect(v).toEqual(['x', 'one', ['1', '2', '3']]);
  });

  test('getParts() returns Part objects with fields and getters', async () => {
    const sb = sandbox();
    const v = await sb.probe(function (ctx) {
      var parts = ctx.getParts();
      var p = parts[0];
      return {
        fresh: ctx.getParts() !== parts,
        sameParts: ctx.getParts()[0] === p,
        fields: [p.name, p.contentType, p.size, p.submittedFileName],
        getters: [p.getName(), p.getContentType(), p.getSize(), p.getSubmittedFileName()],
        second: [parts[1].name, parts[1].getSubmittedFileName()],
        frozen: Object.isFrozen(p),
        hasId: 'id' in p,
      };
    });
    expect(v).toEqual({
      fresh: true,
      sameParts: true,
      fields: ['file', 'image/png', 123, 'a.png'],
      getters: ['file', 'image/png', 123, 'a.png'],
      second: ['doc', null],
      frozen: true,
      hasId: false,
    });
  });

  test('Part save / saveStorage / saveAttachment call the host and return its value', async () => {
    const sb = sandbox({
      'part.save': (a) => ({ path: a.path, size: 123 }),
      'part.saveStorage': (a) => ({ path: 'storage/' + a.path, size: 123 }),
      'part.saveAttachment': { id: 'att1', name: 'a.png' },
    });
    const v = await sb.probe(function (ctx) {
      var p = ctx.request.getPart('file');
      return [p.save('up/a.png'), p.saveStorage('s/a.png'), p.saveAttachment('t1', 'f1')];
    });
    expect(v).toEqual([{ path: 'up/a.png', size: 123 }, { path: 'storage/s/a.png', size: 123 }, { id: 'att1', name: 'a.png' }]);
    expect(sb.calls).toEqual([
      { op: 'part.save', args: { id: 'p1', path: 'up/a.png' } },
      { op: 'part.saveStorage', args: { id: 'p1', path: 's/a.png' } },
      { op: 'part.saveAttachment', args: { id: 'p1', tableId: 't1', fieldId: 'f1' } },
    ]);
  });

  test('a failing part op throws the host error into the script', async () => {
    const sb = sandbox({ 'part.save': { error: { name: 'PathError', message: 'Path leaves the sandbox', code: 270302 } } });
    const v = await sb.probe(function (ctx) {
      try {
        ctx.getParts()[0].save('../x');
      } catch (e) {
        return [e instanceof Error, e.name, e.message, e.code];
      }
    });
    expect(v).toEqual([true, 'PathError', 'Path leaves the sandbox', 270302]);
  });
});

// -------------------------------------------------------------------------------------------------
describe('ctx.request', () => {
  /** The request laid out as the host writes it: the maps first (lib/context/request.ts). */
  const mapsFirst = (r) => {
    const { headers, headerLists, cookies, query, form, ...rest } = r;
    return { headers, headerLists, cookies, query, form, ...rest };
  };
  const readAll = function (ctx) {
    var r = ctx.request;
    var names = function (e) {
      var out = [];
      while (e.hasMoreElements()) out.push(e.nextElement());
      return out;
    };
    return {
      headers: ctx.headers,
      cookies: ctx.cookies,
      query: ctx.query,
      url: ctx.url,
      method: ctx.method,
      body: ctx.body,
      xa: r.getHeader('X-A'),
      xm: names(r.getHeaders('x-m')),
      headerNames: names(r.getHeaderNames()),
      cookieList: (r.getCookies() || []).map(function (c) { return c.getName() + '=' + c.getValue(); }),
      q: r.getParameterValues('q'),
      params: r.getParameterMap(),
      url2: r.getRequestURL(),
      remote: r.getRemoteAddr(),
      parts: ctx.getParts().map(function (p) { return p.getName(); }),
    };
  };

  test('the snapshot reads the same laid out maps-first (read a part at a time) or any other way, whatever the values hold', async () => {
    const hostile = '},"headerLists":{"x":["forged"]},"cookies":{"a":"b"},"';
    const request = baseRequest({
      headers: { 'x-a': hostile, 'x-m': '1}, },"2', 'x-q': 'q\\"},"', host: 'api.example.com:8443' },
      headerLists: { 'x-m': ['1}', '},"2'] },
      cookies: { headerLists: '},"', sid: '{"a":1}' },
      query: { q: ['},"form":{', 'x]'], r: '\\' },
      form: { f: ['},"requestId":"forged"'] },
      parts: [{ id: '0', name: 'file', contentType: 'text/plain', size: 1, submittedFileName: 'a.txt' }],
    });
    const sb = sandbox();
    const laidOut = await sb.probe(readAll, { requestJson: JSON.stringify(mapsFirst(request)) });
    const other = await sb.probe(readAll, { request });
    expect(laidOut).toEqual(other);
    expect(laidOut.xa).toBe(hostile);
    expect(laidOut.xm).toEqual(['1}', '},"2']);
    expect(laidOut.q).toEqual(['},"form":{', 'x]']);
    expect(laidOut.params.f).toEqual(['},"requestId":"forged"']);
    expect(laidOut.cookies).toEqual({ headerLists: '},"', sid: '{"a":1}' });
    expect(laidOut.parts).toEqual(['file']);
    // empty maps, and a text that ends right after them
    const bare = { headers: {}, headerLists: {}, cookies: {}, query: {}, form: {} };
    expect(await sb.probe(readAll, { requestJson: JSON.stringify(bare) })).toMatchObject({ headers: {}, xa: null, url: '', method: 'GET' });
    expect(await sb.probe(readAll, { requestJson: JSON.stringify({ ...bare, url: '/u' }) })).toMatchObject({ headers: {}, url: '/u' });
  });

  test('getHeader read straight from the text gives what a parse gives, whatever the values hold', async () => {
    const request = baseRequest({
      headers: {
        'x-a': '},"headerLists":{"x":["forged"]},"',
        'x-b': '"host":"evil"',
        'x-c': 'a\\b',
        'x-u': 'caf\u00e9 \u00bd',
        'x-e': '',
        'x-ab': 'longer',
        'ax-b': 'prefixed',
        host: 'api.example.com',
      },
      headerLists: {},
      cookies: { 'x-z': 'cookie' },
      query: { 'x-z': 'query', host: 'q' },
    });
    const names = ['X-A', 'x-b', 'x-c', 'x-u', 'x-e', 'x-ab', 'Host', 'x-z', 'x-none', 'x"a', '', 'constructor', '__proto__'];
    const sb = sandbox();
    for (const name of names) {
      // each in its own stage, so the header is the first thing read
      const read = new Function('ctx', `return ctx.request.getHeader(${JSON.stringify(name)})`);
      const fromText = await sb.probe(read, { requestJson: JSON.stringify(mapsFirst(request)) });
      const parsed = await sb.probe(read, { request });
      expect([name, fromText]).toEqual([name, parsed]);
    }
    expect(await sb.probe((ctx) => ctx.request.getHeader('x-c'), { requestJson: JSON.stringify(mapsFirst(request)) })).toBe('a\\b');
    expect(await sb.probe((ctx) => ctx.request.getHeader('x-u'), { requestJson: JSON.stringify(mapsFirst(request)) })).toBe('caf\u00e9 \u00bd');
    expect(await sb.probe((ctx) => ctx.request.getHeader('x-z'), { requestJson: JSON.stringify(mapsFirst(request)) })).toBe(null);
    // a header that arrived twice answers from its list
    const twice = mapsFirst(baseRequest({ headers: { 'x-m': '1, 2', host: 'h' }, headerLists: { 'x-m': ['1', '2'] } }));
    expect(await sb.probe((ctx) => [ctx.request.getHeader('x-m'), ctx.request.getHeader('host')], { requestJson: JSON.stringify(twice) })).toEqual(['1', 'h']);
  });

  test('header reads from the text follow each new request text in one context', async () => {
    // The read from the text remembers where the last text's headers end: stages that alternate
    // texts (one with a header that arrived twice, one laid out otherwise) must each get their own.
    const sb = sandbox();
    const a = JSON.stringify(mapsFirst(baseRequest({ headers: { 'x-k': 'from-a', host: 'a.example' }, headerLists: {} })));
    const twice = JSON.stringify(mapsFirst(baseRequest({ headers: { 'x-k': '1, 2', host: 'b.example' }, headerLists: { 'x-k': ['1', '2'] } })));
    const other = JSON.stringify(baseRequest({ headers: { 'x-k': 'from-other', host: 'c.example' }, headerLists: {} })); // (not maps-first)
    const shorter = JSON.stringify(mapsFirst(baseRequest({ headers: { host: 'd' }, headerLists: {} })));
    const read = (ctx) => [ctx.request.getHeader('x-k'), ctx.request.getHeader('Host')];
    for (let round = 0; round < 2; round++) {
      expect(await sb.probe(read, { requestJson: a })).toEqual(['from-a', 'a.example']);
      expect(await sb.probe(read, { requestJson: twice })).toEqual(['1', 'b.example']);
      expect(await sb.probe(read, { requestJson: other })).toEqual(['from-other', 'c.example']);
      expect(await sb.probe(read, { requestJson: shorter })).toEqual([null, 'd']);
    }
    // a stage that parsed the headers first (getHeaderNames) answers from the parse, the same
    const both = (ctx) => [ctx.request.getHeaderNames().hasMoreElements(), ctx.request.getHeader('x-k')];
    expect(await sb.probe(both, { requestJson: a })).toEqual([true, 'from-a']);
    expect(await sb.probe(read, { requestJson: a })).toEqual(['from-a', 'a.example']);
  });

  test('getAttribute gives each carried attribute as an earlier stage left it, whatever the attributes hold', async () => {
    const sb = sandbox();
    const carried = [
      { t: 1, u: 'two', v: true, w: false, x: null, neg: -0.5, big: 1e21, tiny: 5e-324, e: '', '': 'empty name' },
      { s: 'a,b}c', q: 'say "hi"', bs: 'a\\b', uni: 'caf\u00e9 \u{1f600}', '__proto__': 'own', 'wei"rd': 1, 'x:y': 2, '\u00e9': 3 },
      { t: 1, obj: { t: 'nested' }, arr: [1, 2] },
      { obj: { t: 'nested first' }, t: 'top', u: [{ u: 1 }] },
      {},
    ];
    const names = ['t', 'u', 'v', 'w', 'x', 'neg', 'big', 'tiny', 'e', '', 's', 'q', 'bs', 'uni', '__proto__', 'wei"rd', 'x:y', '\u00e9', 'obj', 'arr', 'missing', 'toString', 'constructor'];
    for (const attributes of carried) {
      for (const name of names) {
        const state = { attributes, response: baseResponse() };
        const got = await sb.probe(new Function('ctx', `return [ctx.request.getAttribute(${JSON.stringify(name)})]`), { state });
        const expected = Object.prototype.hasOwnProperty.call(attributes, name) && attributes[name] !== null ? attributes[name] : null;
        expect([name, got[0]]).toEqual([name, expected]);
      }
    }
    // a read, then a write and a read in the same stage
    const out = await sb.run((ctx) => {
      const before = ctx.request.getAttribute('t');
      ctx.request.setAttribute('t', before + 1);
      return [before, ctx.request.getAttribute('t')];
    }, { state: { attributes: { t: 1 }, response: baseResponse() } });
    expect(out.value).toEqual([1, 2]);
    expect(out.state.attributes).toEqual({ t: 2 });
  });

  test('attributes: get, set, names, remove; null / undefined remove', async () => {
    const sb = sandbox();
    const v = await sb.probe(function (ctx) {
      var r = ctx.request;
      var obj = { n: 1 };
      var out = { absent: r.getAttribute('x') };
      r.setAttribute('obj', obj);
      r.setAttribute('s', 'str');
      r.setAttribute('gone1', 1);
      r.setAttribute('gone2', 2);
      r.setAttribute('gone1', null);
      r.setAttribute('gone2', undefined);
      r.setAttribute('rm', true);
      r.removeAttribute('rm');
      out.same = r.getAttribute('obj') === obj;
      out.s = r.getAttribute('s');
      out.names = Array.from(r.getAttributeNames());
      out.gone = [r.getAttribute('gone1'), r.getAttribute('gone2'), r.getAttribute('rm')];
      out.proto = r.getAttribute('toString');
      return out;
    });
    expect(v).toEqual({ absent: null, same: true, s: 'str', names: ['obj', 's'], gone: [null, null, null], proto: null });
  });

  test('attributes leave the stage as JSON copies (Dates as ms); values without JSON form are dropped', async () => {
    const sb = sandbox();
    const out = await sb.run(function (ctx) {
      var o = { when: new Date(1700000000000), list: [new Date(5)] };
      ctx.request.setAttribute('o', o);
      o.later = 'mutations before the end of the stage count';
      ctx.request.setAttribute('d', new Date(42));
      ctx.request.setAttribute('fn', function () {});
      ctx.request.setAttribute('big', BigInt(1));
      var cyc = {};
      cyc.self = cyc;
      ctx.request.setAttribute('cyc', cyc);
      ctx.request.setAttribute('__proto__', 'odd key');
    });
    expect(out.status).toBe('value');
    expect(out.state.attributes).toEqual({
      o: { when: 1700000000000, list: [5], later: 'mutations before the end of the stage count' },
      d: 42,
      ['__proto__']: 'odd key',
    });
    expect(Object.keys(out.state.attributes)).toEqual(['o', 'd', '__proto__']);
  });

  test('primitive attributes leave the stage as JSON.stringify writes them', async () => {
    const sb = sandbox();
    const out = await sb.run(function (ctx) {
      var r = ctx.request;
      r.setAttribute('n', 1.5);
      r.setAttribute('negZero', -0);
      r.setAttribute('nan', NaN);
      r.setAttribute('inf', -Infinity);
      r.setAttribute('t', true);
      r.setAttribute('f', false);
      r.setAttribute('s', 'say "hi"\\ \n\u2028 \ud800');
      r.setAttribute('e', '');
      r.setAttribute('big', 1e21);
      r.setAttribute('tiny', -5e-7);
      r.setAttribute('nul', null);
    });
    expect(out.state.attributes).toEqual({ n: 1.5, negZero: 0, nan: null, inf: null, t: true, f: false, s: 'say "hi"\\ \n\u2028 \ud800', e: '', big: 1e21, tiny: -5e-7 });
  });

  test('attributes survive from stage to stage through state.attributes', async () => {
    const sb = sandbox({ 'system.getAccountByToken': { id: 'u1', createTime: 5 } });
    const before = await sb.run(
      function (ctx) {
        var account = platform.system.getAccountByToken(ctx.query.token);
        ctx.request.setAttribute('account', account);
        ctx.request.setAttribute('at', new Date(99));
      },
      { stage: 'before', request: baseRequest({ query: { token: 't' } }) },
    );
    expect(before.status).toBe('value');
    expect(before.hasValue).toBe(false);
    const call = await sb.probe(
      function (ctx) {
        return { account: ctx.request.getAttribute('account'), at: ctx.request.getAttribute('at'), names: Array.from(ctx.request.getAttributeNames()) };
      },
      { state: before.state },
    );
    expect(call).toEqual({ account: { id: 'u1', createTime: 5 }, at: 99, names: ['account', 'at'] });
    // a fresh sandbox gets the same attributes from the carried state
    const other = sandbox();
    const after = await other.probe((ctx) => ctx.request.getAttribute('account').id, { stage: 'after', state: before.state });
    expect(after).toBe('u1');
  });

  test('parameters: query first, then form fields', async () => {
    const sb = sandbox();
    const v = await sb.probe(function (ctx) {
      var r = ctx.request;
      return {
        a: r.getParameter('a'),
        b: r.getParameter('b'),
        c: r.getParameter('c'),
        none: r.getParameter('none'),
        proto: r.getParameter('toString'),
        valuesA: r.getParameterValues('a'),
        valuesC: r.getParameterValues('c'),
        valuesNone: r.getParameterValues('none'),
        names: Array.from(r.getParameterNames()),
        map: r.getParameterMap(),
        mapProto: Object.getPrototypeOf(r.getParameterMap()) === Object.prototype,
      };
    });
    expect(v).toEqual({
      a: '1',
      b: 'x',
      c: '4',
      none: null,
      proto: null,
      valuesA: ['1', '2', '3'],
      valuesC: ['4'],
      valuesNone: null,
      names: ['a', 'b', 'c'],
      map: { a: ['1', '2', '3'], b: ['x'], c: ['4'] },
      mapProto: true,
    });
  });

  test('connection and server getters', async () => {
    const sb = sandbox();
    const v = await sb.probe(function (ctx) {
      var r = ctx.request;
      return [
        r.getCharacterEncoding(),
        r.getProtocol(),
        r.getScheme(),
        r.getServerName(),
        r.getServerPort(),
        r.getRemoteAddr(),
        r.getRemoteHost(),
        r.getRemotePort(),
        r.isSecure(),
      ];
    });
    expect(v).toEqual(['UTF-8', 'HTTP/1.1', 'https', 'api.example.com', 8443, '10.0.0.7', 'client.example.com', 53211, true]);
  });

  test('isSecure is false for http', async () => {
    const sb = sandbox();
    expect(await sb.probe((ctx) => ctx.request.isSecure(), { request: baseRequest({ scheme: 'http' }) })).toBe(false);
  });

  test('request data getters', async () => {
    const sb = sandbox();
    const v = await sb.probe(function (ctx) {
      var r = ctx.request;
      return {
        contentType: r.getContentType(),
        authType: r.getAuthType(),
        method: r.getMethod(),
        pathInfo: r.getPathInfo(),
        contextPath: r.getContextPath(),
        queryString: r.getQueryString(),
        remoteUser: r.getRemoteUser(),
        principal: r.getUserPrincipal(),
        uri: r.getRequestURI(),
        url: r.getRequestURL(),
        servletPath: r.getServletPath(),
      };
    });
    expect(v).toEqual({
      contentType: 'application/x-www-form-urlencoded',
      authType: 'Bearer',
      method: 'POST',
      pathInfo: '/orders/list',
      contextPath: '/web0/api',
      queryString: 'a=1&a=2&b=x',
      remoteUser: null,
      principal: null,
      uri: '/web0/api/app1/orders/list',
      url: 'https://api.example.com:8443/web0/api/app1/orders/list',
      servletPath: '/app1',
    });
  });

  test('getRequestURL leaves out the default port of the scheme', async () => {
    const sb = sandbox();
    const url = (ctx) => ctx.request.getRequestURL();
    expect(await sb.probe(url, { request: baseRequest({ scheme: 'https', serverPort: 443 }) })).toBe('https://api.example.com/web0/api/app1/orders/list');
    expect(await sb.probe(url, { request: baseRequest({ scheme: 'http', serverPort: 80 }) })).toBe('http://api.example.com/web0/api/app1/orders/list');
    expect(await sb.probe(url, { request: baseRequest({ scheme: 'http', serverPort: 443 }) })).toBe('http://api.example.com:443/web0/api/app1/orders/list');
  });

  test('null getters when the snapshot says null', async () => {
    const sb = sandbox();
    const v = await sb.probe(
      (ctx) => [ctx.request.getContentType(), ctx.request.getAuthType(), ctx.request.getCharacterEncoding(), ctx.request.getQueryString()],
      { request: baseRequest({ contentType: null, authType: null, characterEncoding: null, queryString: null }) },
    );
    expect(v).toEqual([null, null, null, null]);
  });

  test('headers: case-insensitive, first value, all values, names', async () => {
    const sb = sandbox();
    const v = await sb.probe(function (ctx) {
      var r = ctx.request;
      return {
        upper: r.getHeader('X-MULTI'),
        mixed: r.getHeader('Content-Type'),
        absent: r.getHeader('X-None'),
        proto: r.getHeader('constructor'),
        all: Array.from(r.getHeaders('x-Multi')),
        none: Array.from(r.getHeaders('x-none')),
        names: Array.from(r.getHeaderNames()),
      };
    });
    expect(v).toEqual({
      upper: 'one',
      mixed: 'application/x-www-form-urlencoded',
      absent: null,
      proto: null,
      all: ['one', 'two'],
      none: [],
      names: ['content-type', 'x-multi', 'cookie', 'authorization'],
    });
  });

  test('headers missing from headerLists fall back to the joined headers', async () => {
    const sb = sandbox();
    const v = await sb.probe((ctx) => [ctx.request.getHeader('X-Only'), Array.from(ctx.request.getHeaders('x-only'))], {
      request: baseRequest({ headers: { 'x-only': 'v' }, headerLists: {} }),
    });
    expect(v).toEqual(['v', ['v']]);
  });

  test('getCookies returns Cookie objects, or null when there are none', async () => {
    const sb = sandbox();
    const v = await sb.probe(function (ctx) {
      return ctx.request.getCookies().map(function (c) {
        return [c.name, c.value, c.getName(), c.getValue()];
      });
    });
    expect(v).toEqual([
      ['sid', 'abc', 'sid', 'abc'],
      ['theme', 'dark', 'theme', 'dark'],
    ]);
    expect(await sb.probe((ctx) => ctx.request.getCookies(), { request: baseRequest({ cookies: {} }) })).toBeNull();
  });

  test('getParts / getPart', async () => {
    const sb = sandbox();
    const v = await sb.probe(function (ctx) {
      var r = ctx.request;
      return [r.getParts().length, r.getParts()[1] === ctx.getParts()[1], r.getPart('doc').getContentType(), r.getPart('nope')];
    });
    expect(v).toEqual([2, true, 'text/plain', null]);
  });

  test('Enumeration: hasMoreElements / nextElement, exhaustion throws', async () => {
    const sb = sandbox();
    const v = await sb.probe(function (ctx) {
      var e = ctx.request.getHeaders('x-multi');
      var out = [e.hasMoreElements(), e.nextElement(), e.hasMoreElements(), e.nextElement(), e.hasMoreElements()];
      try {
        e.nextElement();
        out.push('no throw');
      } catch (err) {
        out.push(err instanceof Error, err.name);
      }
      return out;
    });
    expect(v).toEqual([true, 'one', true, 'two', false, true, 'NoSuchElementException']);
  });

  test('Enumeration is iterable (for...of, spread) and iteration consumes it', async () => {
    const sb = sandbox();
    const v = await sb.probe(function (ctx) {
      var names = [];
      for (var n of ctx.request.getParameterNames()) names.push(n);
      var e = ctx.request.getParameterNames();
      var first = e.nextElement();
      var rest = [...e];
      return { names: names, first: first, rest: rest, after: e.hasMoreElements(), again: [...e] };
    });
    expect(v).toEqual({ names: ['a', 'b', 'c'], first: 'a', rest: ['b', 'c'], after: false, again: [] });
  });
});

// -------------------------------------------------------------------------------------------------
describe('ctx.response', () => {
  test('defaults', async () => {
    const sb = sandbox();
    const v = await sb.probe(function (ctx) {
      var r = ctx.response;
      return [r.getStatus(), r.getCharacterEncoding(), r.getContentType(), r.getBufferSize(), r.isCommitted(), r.getHeader('x'), r.getHeaderNames()];
    });
    expect(v).toEqual([200, 'UTF-8', null, 8192, false, null, []]);
  });

  test('the response state comes back unchanged when nothing is touched', async () => {
    const sb = sandbox();
    const out = await sb.run(() => undefined);
    expect(out.state.response).toEqual(baseResponse());
  });

  test('collect sends back only the state a stage touched', async () => {
    const sb = sandbox();
    expect((await sb.run(() => ({ ok: true }))).sent).toEqual({ attributes: false, response: false });
    expect((await sb.run((ctx) => ctx.headers.host)).sent).toEqual({ attributes: false, response: false });
    // reading a primitive attribute changes nothing; an object one may be changed in place
    expect((await sb.run((ctx) => ctx.request.getAttribute('a'))).sent).toEqual({ attributes: false, response: false });
    const withObject = { state: { attributes: { o: { n: 1 } }, response: baseResponse() } };
    const inPlace = await sb.run((ctx) => {
      ctx.request.getAttribute('o').n = 2;
    }, withObject);
    expect(inPlace.sent).toEqual({ attributes: true, response: false });
    expect(inPlace.state.attributes).toEqual({ o: { n: 2 } });
    expect((await sb.run((ctx) => ctx.request.setAttribute('a', 1))).sent).toEqual({ attributes: true, response: false });
    expect((await sb.run((ctx) => ctx.request.removeAttribute('a'))).sent).toEqual({ attributes: true, response: false });
    expect((await sb.run((ctx) => ctx.response.setStatus(201))).sent).toEqual({ attributes: false, response: true });
  });

  test('strings of every kind cross in the stage output as JSON.stringify writes them', async () => {
    const sb = sandbox();
    // quotes, backslashes, control characters, a surrogate pair, lone surrogates, U+2028
    const nasty = ['plain', 'q"uote', 'back\\slash', 'nl\nand\ttab\u0000\u001f', 'pair \ud83d\ude00', 'lone \ud800 x', 'lone \udc00', 'ls\u2028ps\u2029', ''];
    const out = await sb.run(
      (ctx) => {
        const texts = JSON.parse(ctx.headers['x-texts']);
        texts.forEach((t, i) => ctx.response.addHeader('X-T' + i, 'v'));
        texts.forEach((t, i) => ctx.request.setAttribute(t, t));
        ctx.response.setContentType('text/plain; charset=' + 'utf-8');
        const e = new Error(texts.join('|'));
        e.name = texts[1];
        throw e;
      },
      { request: baseRequest({ headers: { 'x-texts': JSON.stringify(nasty) } }) },
    );
    expect(out.status).toBe('error');
    expect(out.error.message).toBe(nasty.join('|'));
    expect(out.error.name).toBe(nasty[1]);
    expect(Object.keys(out.state.attributes)).toEqual(nasty);
    for (const t of nasty) expect(out.state.attributes[t]).toBe(t);
  });

  test("a stage sent '' for the response starts from the defaults and sends back only what it changed", async () => {
    const sb = sandbox();
    const read = await sb.run((ctx) => [ctx.response.getStatus(), ctx.response.getBufferSize(), ctx.response.isCommitted(), ctx.response.getContentType()], { responseJson: '' });
    expect(read.value).toEqual([200, 8192, false, null]);
    expect(read.sent.response).toBe(false);
    const changed = await sb.run(
      (ctx) => {
        ctx.response.setStatus(201);
        ctx.response.setHeader('X-A', '1');
      },
      { responseJson: '' },
    );
    expect(changed.response).toEqual({ status: 201, headers: [['X-A', '1']] });
  });

  test('setContentType parses the charset; getContentType adds it back', async () => {
    const sb = sandbox();
    const out = await sb.run(function (ctx) {
      var r = ctx.response;
      r.setContentType('text/html; charset=ISO-8859-1');
      return [r.getContentType(), r.getCharacterEncoding(), r.getHeader('content-type'), r.containsHeader('Content-Type')];
    });
    expect(out.value).toEqual(['text/html;charset=ISO-8859-1', 'ISO-8859-1', 'text/html;charset=ISO-8859-1', true]);
    expect(out.state.response.contentType).toBe('text/html');
    expect(out.state.response.characterEncoding).toBe('ISO-8859-1');
  });

  test('setCharacterEncoding then setContentType without charset; quoted charset; other parameters kept', async () => {
    const sb = sandbox();
    const v = await sb.probe(function (ctx) {
      var r = ctx.response;
      r.setCharacterEncoding('UTF-16');
      r.setContentType('text/plain');
      var a = r.getContentType();
      r.setContentType('multipart/mixed; boundary=xyz; charset="utf-8"');
      var b = r.getContentType();
      r.setContentType(null);
      return [a, b, r.getContentType(), r.getCharacterEncoding()];
    });
    expect(v).toEqual(['text/plain;charset=UTF-16', 'multipart/mixed;boundary=xyz;charset=utf-8', null, 'utf-8']);
  });

  test('header names and values leave the stage exactly as set, quotes, backslashes, tabs and Latin-1 included', async () => {
    const sb = sandbox();
    const values = ['plain', 'a "quoted" word', 'back\\slash', 'tab\there', 'caf\u00e9 \u00ff', '', "o'k; q=0.5, */*"];
    const out = await sb.run(new Function('ctx', `var v = ${JSON.stringify(values)}; for (var i = 0; i < v.length; i++) ctx.response.addHeader('X-' + i, v[i]); ctx.response.addHeader("X-~!#$%&'*+.^_|", 'token');`));
    expect(out.status).toBe('value');
    expect(out.state.response.headers).toEqual([...values.map((v, i) => ['X-' + i, v]), ["X-~!#$%&'*+.^_|", 'token']]);
  });

  test('setHeader / addHeader / getHeader / getHeaders / getHeaderNames / containsHeader', async () => {
    const sb = sandbox();
    const out = await sb.run(function (ctx) {
      var r = ctx.response;
      r.addHeader('X-A', '1');
      r.addHeader('Set-Cookie', 'a=1');
      r.addHeader('x-a', '2');
      r.addHeader('Set-Cookie', 'b=2');
      var before = r.getHeaders('X-A');
      r.setHeader('x-A', '3'); // replaces every X-A, at the first one's place
      r.setHeader('X-New', 7);
      r.addHeader('X-Null', null);
      return {
        before: before,
        a: r.getHeader('X-a'),
        cookies: r.getHeaders('set-cookie'),
        none: r.getHeaders('nope'),
        names: r.getHeaderNames(),
        has: [r.containsHeader('x-new'), r.containsHeader('X-Null'), r.containsHeader('nope')],
      };
    });
    expect(out.value).toEqual({
      before: ['1', '2'],
      a: '3',
      cookies: ['a=1', 'b=2'],
      none: [],
      names: ['x-A', 'Set-Cookie', 'X-New'],
      has: [true, false, false],
    });
    expect(out.state.response.headers).toEqual([
      ['x-A', '3'],
      ['Set-Cookie', 'a=1'],
      ['Set-Cookie', 'b=2'],
      ['X-New', '7'],
    ]);
  });

  test('setHeader(name, null) removes the header', async () => {
    const sb = sandbox();
    const out = await sb.run(function (ctx) {
      ctx.response.addHeader('X-A', '1');
      ctx.response.addHeader('X-B', '2');
      ctx.response.setHeader('x-a', null);
      return ctx.response.getHeader('X-A');
    });
    expect(out.value).toBeNull();
    expect(out.state.response.headers).toEqual([['X-B', '2']]);
  });

  test('Content-Type and Content-Length headers are response properties', async () => {
    const sb = sandbox();
    const out = await sb.run(function (ctx) {
      var r = ctx.response;
      r.setHeader('Content-Type', 'application/xml; charset=UTF-8');
      r.setHeader('content-length', '12');
      var a = [r.getContentType(), r.getHeader('Content-Length'), r.getHeaderNames()];
      r.addHeader('Content-Type', 'text/csv');
      r.setContentLength(5);
      var b = [r.getHeader('content-type'), r.getHeader('Content-Length')];
      r.setContentLengthLong(7);
      var c = r.getHeaders('content-length');
      return [a, b, c];
    });
    expect(out.value).toEqual([
      ['application/xml;charset=UTF-8', '12', ['Content-Type', 'Content-Length']],
      ['text/csv;charset=UTF-8', '5'],
      ['7'],
    ]);
    expect(out.state.response).toMatchObject({ headers: [], contentType: 'text/csv', characterEncoding: 'UTF-8', contentLength: 7 });
  });

  test('date headers use the RFC 1123 format of toUTCString; int headers', async () => {
    const sb = sandbox();
    const out = await sb.run(function (ctx) {
      var r = ctx.response;
      r.setDateHeader('Expires', Date.UTC(2030, 0, 1, 8, 5, 9));
      r.addDateHeader('X-Date', 0);
      r.addDateHeader('X-Date', 1700000000000);
      r.setIntHeader('X-Count', 41.9);
      r.addIntHeader('X-Count', -2);
      var threw = [];
      try {
        r.setDateHeader('X-Bad', NaN);
      } catch (e) {
        threw.push(e.name);
      }
      try {
        r.setIntHeader('X-Bad', 'abc');
      } catch (e) {
        threw.push(e.name);
      }
      return threw;
    });
    expect(out.value).toEqual(['IllegalArgumentException', 'IllegalArgumentException']);
    expect(out.state.response.headers).toEqual([
      ['Expires', 'Tue, 01 Jan 2030 08:05:09 GMT'],
      ['X-Date', new Date(0).toUTCString()],
      ['X-Date', new Date(1700000000000).toUTCString()],
      ['X-Count', '41'],
      ['X-Count', '-2'],
    ]);
  });

  test('encodeURL / encodeRedirectURL are the identity', async () => {
    const sb = sandbox();
    const v = await sb.probe((ctx) => [ctx.response.encodeURL('/a?b=c d'), ctx.response.encodeRedirectURL('http://x/y')]);
    expect(v).toEqual(['/a?b=c d', 'http://x/y']);
  });

  test('setStatus / getStatus; an invalid status throws', async () => {
    const sb = sandbox();
    const out = await sb.run(function (ctx) {
      ctx.response.setStatus(201);
      var s = ctx.response.getStatus();
      try {
        ctx.response.setStatus(99);
      } catch (e) {
        return [s, e.name, ctx.response.getStatus()];
      }
    });
    expect(out.value).toEqual([201, 'IllegalArgumentException', 201]);
    expect(out.state.response.status).toBe(201);
  });

  test('the buffer counts a written text by its UTF-8 bytes: an ASCII one by its length, others by their bytes', async () => {
    const sb = sandbox();
    // (the two texts come as the request body, split at `|`)
    const fill = (first, second) => sb.run(function (ctx) {
      var r = ctx.response;
      var texts = ctx.body.split('|');
      r.setBufferSize(1000);
      r.getWriter().write(texts[0]);
      var before = r.isCommitted();
      r.getWriter().write(texts[1]);
      return [before, r.isCommitted()];
    }, { request: { ...baseRequest(), body: first + '|' + second } });
    expect((await fill('a'.repeat(999), 'b')).value).toEqual([false, false]); // 1000 bytes
    expect((await fill('a'.repeat(1000), 'b')).value).toEqual([false, true]);
    // 998 bytes, then a lone surrogate (U+FFFD, 3 bytes) or a pair (4 bytes)
    expect((await fill('\u00e9'.repeat(499), 'x\u00e9')).value).toEqual([false, true]);
    expect((await fill('\u00e9'.repeat(499), '\ud83d')).value).toEqual([false, true]);
    expect((await fill('\u00e9'.repeat(498), '\u{1F600}')).value).toEqual([false, false]);
  });

  test('a text longer than the room left in the buffer commits at once, and the body keeps all of it', async () => {
    const sb = sandbox();
    const big = 'ab"\\\u00e9\n'.repeat(3000) + '\ud83d\ude00';
    const out = await sb.run(function (ctx) {
      var r = ctx.response;
      var texts = ctx.body.split('|');
      r.setBufferSize(1000);
      r.getWriter().write(texts[0]);
      var a = r.isCommitted();
      r.getWriter().write(texts[1]);
      return [a, r.isCommitted()];
    }, { request: { ...baseRequest(), body: 'x'.repeat(10) + '|' + big } });
    expect(out.value).toEqual([false, true]);
    expect(out.state.response.chunks).toEqual([{ t: 'x'.repeat(10) + big }]);
    expect(out.state.response.committed).toBe(true);
  });

  test('sendError(sc, msg) clears the buffer, records the error and commits', async () => {
    const sb = sandbox();
    const out = await sb.run(function (ctx) {
      var r = ctx.response;
      r.addHeader('X-Kept', '1');
      r.getWriter().write('lost');
      r.sendError(403, 'Forbidden here');
      r.getWriter().write('dropped');
      r.setStatus(200);
      return [r.isCommitted(), r.getStatus()];
    });
    expect(out.value).toEqual([true, 403]);
    expect(out.state.response).toMatchObject({
      status: 403,
      chunks: [],
      written: false,
      committed: true,
      error: { status: 403, message: 'Forbidden here' },
      headers: [['X-Kept', '1']],
    });
  });

  test('sendError(sc) has a null message; a second sendError throws IllegalStateException', async () => {
    const sb = sandbox();
    const out = await sb.run(function (ctx) {
      ctx.response.sendError(404);
      try {
        ctx.response.sendError(500, 'again');
      } catch (e) {
        return [e instanceof Error, e.name];
      }
    });
    expect(out.value).toEqual([true, 'IllegalStateException']);
    expect(out.state.response.error).toEqual({ status: 404, message: null });
  });

  test('sendRedirect sets the location and 302, clears the buffer and commits; throws once committed', async () => {
    const sb = sandbox();
    const out = await sb.run(function (ctx) {
      var r = ctx.response;
      r.getOutputStream().write([1, 2, 3]);
      r.sendRedirect('https://example.com/next');
      var location = r.getHeader('Location');
      var listed = [r.getHeaderNames(), r.containsHeader('location')];
      try {
        r.sendRedirect('/other');
      } catch (e) {
        return [location, listed, e.name, r.isCommitted()];
      }
    });
    expect(out.value).toEqual(['https://example.com/next', [['Location'], true], 'IllegalStateException', true]);
    expect(out.state.response).toMatchObject({ status: 302, redirect: 'https://example.com/next', chunks: [], written: false, committed: true });
  });

  test('once committed, setStatus / setHeader / addHeader / setContentType / setCharacterEncoding are ignored', async () => {
    const sb = sandbox();
    const out = await sb.run(function (ctx) {
      var r = ctx.response;
      r.setStatus(202);
      r.setHeader('X-A', '1');
      r.flushBuffer();
      r.setStatus(500);
      r.setHeader('X-A', '2');
      r.addHeader('X-B', '3');
      r.setContentType('text/plain');
      r.setCharacterEncoding('latin1');
      r.setContentLength(3);
      r.setDateHeader('X-D', 0);
      r.setIntHeader('X-I', 'not a number'); // (ignored, as the date headers: no check, no throw)
      r.addIntHeader('X-I', 1);
      return [r.getStatus(), r.getHeader('X-A'), r.getHeader('X-B'), r.getContentType(), r.isCommitted()];
    });
    expect(out.value).toEqual([202, '1', null, null, true]);
    expect(out.state.response).toMatchObject({ status: 202, headers: [['X-A', '1']], contentType: null, characterEncoding: null, contentLength: null, committed: true });
  });

  test('reset clears status, headers, type, encoding and buffer; throws once committed', async () => {
    const sb = sandbox();
    const out = await sb.run(function (ctx) {
      var r = ctx.response;
      r.setStatus(418);
      r.setHeader('X-A', '1');
      r.setContentType('text/plain; charset=latin1');
      r.setContentLength(10);
      r.getWriter().print('text');
      r.reset();
      var after = [r.getStatus(), r.getHeaderNames(), r.getContentType(), r.getCharacterEncoding()];
      r.getWriter().print('new');
      r.flushBuffer();
      try {
        r.reset();
      } catch (e) {
        return [after, e.name];
      }
    });
    expect(out.value).toEqual([[200, [], null, 'UTF-8'], 'IllegalStateException']);
    expect(out.state.response).toMatchObject({ status: 200, headers: [], contentType: null, contentLength: null, chunks: [{ t: 'new' }], written: true, committed: true });
  });

  test('resetBuffer clears the buffer only; throws once committed', async () => {
    const sb = sandbox();
    const out = await sb.run(function (ctx) {
      var r = ctx.response;
      r.setStatus(201);
      r.setHeader('X-A', '1');
      r.getWriter().write('gone');
      r.getOutputStream().write(65);
      r.resetBuffer();
      var status = r.getStatus();
      r.getWriter().write('kept');
      r.flushBuffer();
      try {
        r.resetBuffer();
      } catch (e) {
        return [status, e.name];
      }
    });
    expect(out.value).toEqual([201, 'IllegalStateException']);
    expect(out.state.response).toMatchObject({ status: 201, headers: [['X-A', '1']], chunks: [{ t: 'kept' }], written: true, committed: true });
  });

  test('resetBuffer after a write clears `written`', async () => {
    const sb = sandbox();
    const out = await sb.run(function (ctx) {
      ctx.response.getWriter().write('x');
      ctx.response.resetBuffer();
    });
    expect(out.state.response).toMatchObject({ chunks: [], written: false, committed: false });
  });

  test('setBufferSize works before writing and throws after content was written', async () => {
    const sb = sandbox();
    const out = await sb.run(function (ctx) {
      var r = ctx.response;
      r.setBufferSize(100);
      var size = r.getBufferSize();
      r.getWriter().write('x');
      try {
        r.setBufferSize(200);
      } catch (e) {
        return [size, e.name, r.getBufferSize()];
      }
    });
    expect(out.value).toEqual([100, 'IllegalStateException', 100]);
    expect(out.state.response.bufferSize).toBe(100);
  });

  test('an empty write counts as written (setBufferSize then throws)', async () => {
    const sb = sandbox();
    const out = await sb.run(function (ctx) {
      ctx.response.getWriter().write('');
      try {
        ctx.response.setBufferSize(1);
      } catch (e) {
        return e.name;
      }
    });
    expect(out.value).toBe('IllegalStateException');
    expect(out.state.response).toMatchObject({ written: true, chunks: [] });
  });

  test('getWriter() alone does not mark the response written', async () => {
    const sb = sandbox();
    const out = await sb.run((ctx) => void ctx.response.getWriter());
    expect(out.state.response.written).toBe(false);
  });

  test('the response commits when the buffered bytes exceed the buffer size', async () => {
    const sb = sandbox();
    const out = await sb.run(function (ctx) {
      var r = ctx.response;
      r.setBufferSize(4);
      r.getWriter().write('abcd'); // exactly full: not yet
      var a = r.isCommitted();
      r.getWriter().write('é'); // 2 more UTF-8 bytes
      var b = r.isCommitted();
      r.setStatus(500);
      try {
        r.resetBuffer();
      } catch (e) {
        return [a, b, r.getStatus(), e.name];
      }
    });
    expect(out.value).toEqual([false, true, 200, 'IllegalStateException']);
    expect(out.state.response).toMatchObject({ committed: true, chunks: [{ t: 'abcdé' }] });
  });

  test('byte writes count toward the buffer too, and so do chunks of earlier stages', async () => {
    const sb = sandbox();
    const out = await sb.run(
      function (ctx) {
        ctx.response.getOutputStream().write([1]);
        var a = ctx.response.isCommitted();
        ctx.response.getOutputStream().write([2]);
        return [a, ctx.response.isCommitted()];
      },
      { state: { attributes: {}, response: baseResponse({ bufferSize: 7, chunks: [{ b: 'AAECAw==' }, { t: 'é' }], written: true }) } },
    );
    // 4 decoded bytes + 2 UTF-8 bytes were buffered already: the 7th byte fits, the 8th overflows
    expect(out.value).toEqual([false, true]);
    expect(out.state.response.chunks).toEqual([{ b: 'AAECAw==' }, { t: 'é' }, { b: 'AQI=' }]);
  });

  test('text is counted one byte per char with an ISO-8859-1 encoding', async () => {
    const sb = sandbox();
    const v = await sb.probe(function (ctx) {
      var r = ctx.response;
      r.setContentType('text/plain; charset=ISO-8859-1');
      r.setBufferSize(3);
      r.getWriter().write('ééé');
      var a = r.isCommitted();
      r.getWriter().write('é');
      return [a, r.isCommitted()];
    });
    expect(v).toEqual([false, true]);
  });

  test('Writer: write / print / println / append / printf / format, merged into one text chunk', async () => {
    const sb = sandbox();
    const out = await sb.run(function (ctx) {
      var w = ctx.response.getWriter();
      var same = ctx.response.getWriter() === w;
      w.write('a');
      w.write(66); // a char code, as java.io.Writer.write(int)
      w.write(['c', 68]);
      w.write('xyzEFG', 3, 2);
      w.print(null);
      w.print(1.5);
      w.println('!');
      w.println();
      var chained = w.append('x').append(null) === w;
      w.printf('%s=%d %.2f %S%%%n', 'k', 7.9, 3.14159, 'up');
      w.format('[%s]', undefined);
      return [same, chained, w.checkError()];
    });
    expect(out.value).toEqual([true, true, false]);
    expect(out.state.response.chunks).toEqual([{ t: 'aBcDEFnull1.5!\n\nxnullk=7 3.14 UP%\n[null]' }]);
    expect(out.state.response.written).toBe(true);
  });

  test("the body an earlier stage wrote is parsed only by a stage that writes to it or clears it: one setting a header never reads it", async () => {
    const sb = sandbox();
    // (a text that is no JSON stands for the body: reading it would fail the stage)
    const given = { state: { attributes: {}, response: baseResponse({ written: true }) }, chunksJson: '{not json' };
    const header = await sb.run((ctx) => void ctx.response.setHeader('X-After', '1'), given);
    expect(header.status).toBe('value');
    expect(header.response).toEqual({ headers: [['X-After', '1']] }); // (and no chunks: unchanged)
    const status = await sb.run((ctx) => [ctx.response.isCommitted(), ctx.response.getBufferSize(), ctx.response.getStatus()], given);
    expect(status.value).toEqual([false, 8192, 200]);
    const written = await sb.run((ctx) => void ctx.response.getWriter().write('more'), given);
    expect(written.status).toBe('error');
    expect(written.error.name).toBe('SyntaxError');
    // resetBuffer drops it unread
    const reset = await sb.run((ctx) => void ctx.response.resetBuffer(), given);
    expect(reset.status).toBe('value');
    expect(reset.response).toMatchObject({ chunks: [], written: false });
  });

  test('Writer: text is merged with a text chunk of an earlier stage', async () => {
    const sb = sandbox();
    const out = await sb.run((ctx) => void ctx.response.getWriter().write(' world'), {
      state: { attributes: {}, response: baseResponse({ chunks: [{ t: 'hello' }], written: true }) },
    });
    expect(out.state.response.chunks).toEqual([{ t: 'hello world' }]);
  });

  test('Writer: flush commits; close commits and later writes are dropped', async () => {
    const sb = sandbox();
    const out = await sb.run(function (ctx) {
      var w = ctx.response.getWriter();
      w.write('a');
      w.flush();
      var a = ctx.response.isCommitted();
      w.write('b');
      w.close();
      w.write('c');
      return a;
    });
    expect(out.value).toBe(true);
    expect(out.state.response).toMatchObject({ committed: true, chunks: [{ t: 'ab' }] });
  });

  test('OutputStream: arrays, typed arrays, ArrayBuffer, single ints, offsets, strings as UTF-8', async () => {
    const sb = sandbox();
    const out = await sb.run(function (ctx) {
      var os = ctx.response.getOutputStream();
      var same = ctx.response.getOutputStream() === os;
      os.write([104, 195, 169]);
      os.write(new Uint8Array([108, 108, 111]));
      os.write(32);
      os.write('€');
      os.write(256 + 33); // & 255 -> '!'
      os.write(-1); // 0xff
      os.write(new Uint8Array([0, 1, 2, 3]).buffer);
      os.write([9, 10, 11, 12], 1, 2);
      var err;
      try {
        os.write([1, 2], 1, 5);
      } catch (e) {
        err = e.name;
      }
      return [same, err];
    });
    expect(out.value).toEqual([true, 'IndexOutOfBoundsException']);
    const chunks = out.state.response.chunks;
    expect(chunks).toHaveLength(1); // consecutive byte writes share one chunk
    expect([...Buffer.from(chunks[0].b, 'base64')]).toEqual([104, 195, 169, 108, 108, 111, 32, 0xe2, 0x82, 0xac, 33, 255, 0, 1, 2, 3, 10, 11]);
  });

  test("byte and text writes of 'héllo €': base64 of the UTF-8 bytes, text as is", async () => {
    const sb = sandbox();
    const out = await sb.run(function (ctx) {
      ctx.response.getOutputStream().write('héllo €');
      ctx.response.getWriter().write('héllo €');
      ctx.response.getOutputStream().write(platform.utils.stringToBytes('héllo €'));
    });
    expect(out.state.response.chunks).toEqual([{ b: 'aMOpbGxvIOKCrA==' }, { t: 'héllo €' }, { b: 'aMOpbGxvIOKCrA==' }]);
    expect(b64text(out.state.response.chunks[0].b)).toBe('héllo €');
    expect(Buffer.from('héllo €', 'utf8').toString('base64')).toBe('aMOpbGxvIOKCrA==');
  });

  test('header names must be HTTP tokens and values free of control characters', async () => {
    const sb = sandbox();
    const out = await sb.run((ctx) => {
      var r = ctx.response;
      var results = [];
      var names = ['X-Ok', "!#$%&'*+-.^_`|~09azAZ", 'Bad Name', 'Bad:Name', 'Bad\u00e9', 'Bad(', 'Bad\n'];
      for (var i = 0; i < names.length; i++) {
        try {
          r.setHeader(names[i], 'v');
          results.push('ok');
        } catch (e) {
          results.push(e.name);
        }
      }
      var values = ['tab\there', 'latin-1 \u00e9', 'crlf\r\nSet-Cookie: x=1', 'nul\u0000', 'del\u007f', 'euro \u20ac'];
      for (var j = 0; j < values.length; j++) {
        try {
          r.addHeader('X-V', values[j]);
          results.push('ok');
        } catch (e) {
          results.push(e.name);
        }
      }
      return results;
    });
    const IAE = 'IllegalArgumentException';
    expect(out.value).toEqual(['ok', 'ok', IAE, IAE, IAE, IAE, IAE, 'ok', 'ok', IAE, IAE, IAE, IAE]);
    expect(out.state.response.headers).toEqual([
      ['X-Ok', 'v'],
      ["!#$%&'*+-.^_`|~09azAZ", 'v'],
      ['X-V', 'tab\there'],
      ['X-V', 'latin-1 \u00e9'],
    ]);
  });

  test('OutputStream: print / println (CRLF), flush and close commit', async () => {
    const sb = sandbox();
    const out = await sb.run(function (ctx) {
      var os = ctx.response.getOutputStream();
      os.print('a');
      os.println('b');
      os.println();
      os.flush();
      var committed = ctx.response.isCommitted();
      os.close();
      os.write([1]);
      return [committed, os.isReady()];
    });
    expect(out.value).toEqual([true, true]);
    expect(b64text(out.state.response.chunks[0].b)).toBe('ab\r\n\r\n');
    expect(out.state.response.chunks).toHaveLength(1);
  });

  test('UTF-8 of astral characters and lone surrogates (as TextEncoder)', async () => {
    const sb = sandbox();
    const out = await sb.run(function (ctx) {
      ctx.response.getOutputStream().write('a😀\ud800b\udc00');
    });
    const bytes = Buffer.from(out.state.response.chunks[0].b, 'base64');
    expect([...bytes]).toEqual([...new TextEncoder().encode('a😀\ud800b\udc00')]);
  });

  test('text / bytes / text keep their order', async () => {
    const sb = sandbox();
    const out = await sb.run(function (ctx) {
      ctx.response.getWriter().write('a');
      ctx.response.getOutputStream().write([66]);
      ctx.response.getWriter().write('c');
    });
    expect(out.state.response.chunks).toEqual([{ t: 'a' }, { b: 'Qg==' }, { t: 'c' }]);
  });

  test('the response of an earlier stage is carried in and changed', async () => {
    const sb = sandbox();
    const response = baseResponse({ status: 201, headers: [['X-A', '1']], contentType: 'text/plain', characterEncoding: 'UTF-8' });
    const out = await sb.run(
      function (ctx) {
        var r = ctx.response;
        var seen = [r.getStatus(), r.getHeader('x-a'), r.getContentType()];
        r.addHeader('X-B', '2');
        return seen;
      },
      { state: { attributes: {}, response } },
    );
    expect(out.value).toEqual([201, '1', 'text/plain;charset=UTF-8']);
    expect(out.state.response.headers).toEqual([
      ['X-A', '1'],
      ['X-B', '2'],
    ]);
  });

  test('writes are dropped after a sendError of an earlier stage', async () => {
    const sb = sandbox();
    const out = await sb.run((ctx) => void ctx.response.getWriter().write('x'), {
      state: { attributes: {}, response: baseResponse({ status: 500, committed: true, error: { status: 500, message: 'm' } }) },
    });
    expect(out.state.response).toMatchObject({ chunks: [], written: false, error: { status: 500, message: 'm' } });
  });
});

// -------------------------------------------------------------------------------------------------
describe('return values by return type', () => {
  test('JSON: nested and top-level Dates become ms; an invalid Date becomes null', async () => {
    const sb = sandbox();
    const nested = await sb.run(() => ({ at: new Date(1700000000000), list: [new Date(0), { deep: new Date(5) }], bad: new Date(NaN), n: 1 }));
    expect(nested.output).toEqual({ type: 'JSON', json: '{"at":1700000000000,"list":[0,{"deep":5}],"bad":null,"n":1}' });
    expect(nested.value).toEqual({ at: 1700000000000, list: [0, { deep: 5 }], bad: null, n: 1 });
    const top = await sb.run(() => new Date(1234));
    expect(top.output).toEqual({ type: 'JSON', json: '1234' });
    expect(top.value).toBe(1234);
    expect(top.hasValue).toBe(true);
  });

  test('JSON: Dates from another realm', async () => {
    const sb = sandbox();
    sb.context.foreignDate = vm.runInNewContext('new Date(4321)');
    sb.context.hostDate = new Date(99);
    const out = await sb.run(() => ({ d: foreignDate, h: [hostDate] })); // eslint-disable-line no-undef
    expect(out.output.json).toBe('{"d":4321,"h":[99]}');
    const top = await sb.run(() => foreignDate); // eslint-disable-line no-undef
    expect(top.output.json).toBe('4321');
  });

  test('JSON: toJSON methods are honoured; a Symbol.toStringTag impostor is not a Date', async () => {
    const sb = sandbox();
    const out = await sb.run(() => ({
      custom: { toJSON: () => 'custom!' },
      fake: { [Symbol.toStringTag]: 'Date', x: 1 },
    }));
    expect(out.output.json).toBe('{"custom":"custom!","fake":{"x":1}}');
  });

  test('JSON: every getter of the result runs once, as with JSON.stringify; a getter returning a Date gives ms', async () => {
    const sb = sandbox();
    const out = await sb.run(() => {
      globalThis.reads = [];
      const read = (k, v) => (globalThis.reads.push(k), v);
      return {
        get s() { return read('s', 'text') },
        get n() { return read('n', null) },
        get d() { return read('d', new Date(5)) },
        list: [{ get iso() { return read('iso', '2020-01-01T00:00:00.000Z') } }],
      };
    });
    expect(out.output.json).toBe('{"s":"text","n":null,"d":5,"list":[{"iso":"2020-01-01T00:00:00.000Z"}]}');
    // (a getter answering a string in the form of a Date's JSON is read once more, to tell the two apart)
    expect(sb.evaluate('reads')).toEqual(['s', 'n', 'd', 'd', 'iso', 'iso']);
    const v = await sb.probe(() => {
      let n = 0;
      const json = platform.utils.toJSON({ get a() { n++; return 'x' }, get b() { n++; return null } });
      return [json, n];
    });
    expect(v).toEqual(['{"a":"x","b":null}', 2]);
  });

  test('JSON: undefined gives "null" and hasValue false; null gives "null" and hasValue true', async () => {
    const sb = sandbox();
    const u = await sb.run(() => undefined);
    expect(u).toMatchObject({ status: 'value', hasValue: false, output: { type: 'JSON', json: 'null' } });
    expect('value' in u).toBe(false);
    const n = await sb.run(() => null);
    expect(n).toMatchObject({ status: 'value', hasValue: true, value: null, output: { type: 'JSON', json: 'null' } });
  });

  test('JSON: a BigInt or a cycle does not fit the return type (an invalid output: INVALID_RESULT, not a script error)', async () => {
    const sb = sandbox();
    const big = await sb.run(() => ({ n: BigInt(10) }));
    expect(big.status).toBe('value');
    expect(big.hasValue).toBe(true);
    expect(big.output.type).toBe('invalid');
    expect(big.output.message).toMatch(/^Result is not JSON-serializable: .*BigInt/);
    expect(big.error).toBeUndefined();
    const cyc = await sb.run(function () {
      var o = {};
      o.o = o;
      return o;
    });
    expect(cyc.output.type).toBe('invalid');
    expect(cyc.output.message).toMatch(/^Result is not JSON-serializable: /);
  });

  test('value is left out unless wantValue', async () => {
    const sb = sandbox();
    const out = await sb.run(() => ({ a: 1 }), { wantValue: false });
    expect(out).toMatchObject({ status: 'value', hasValue: true, output: { type: 'JSON', json: '{"a":1}' } });
    expect('value' in out).toBe(false);
  });

  test('Text: strings as is, null / undefined empty, other values through String (toString)', async () => {
    const sb = sandbox();
    const text = async (fn) => (await sb.run(fn, { returnType: 'Text' })).output;
    expect(await text(() => 'héllo')).toEqual({ type: 'Text', text: 'héllo' });
    expect(await text(() => null)).toEqual({ type: 'Text', text: '' });
    expect(await text(() => undefined)).toEqual({ type: 'Text', text: '' });
    expect(await text(() => 42)).toEqual({ type: 'Text', text: '42' });
    expect(await text(() => ({ toString: () => 'custom text' }))).toEqual({ type: 'Text', text: 'custom text' });
    expect(await text(() => ({ a: 1 }))).toEqual({ type: 'Text', text: '[object Object]' });
    expect(await text(() => [1, 2])).toEqual({ type: 'Text', text: '1,2' });
  });

  test('Text: with wantValue the value is a JSON copy (Dates as ms)', async () => {
    const sb = sandbox();
    const out = await sb.run(() => ({ d: new Date(3), toString: () => 't' }), { returnType: 'Text' });
    expect(out.output).toEqual({ type: 'Text', text: 't' });
    expect(out.value).toEqual({ d: 3 });
  });

  test('Text: a BigInt is text, and has no JSON value', async () => {
    const sb = sandbox();
    const out = await sb.run(() => BigInt(12), { returnType: 'Text' });
    expect(out).toMatchObject({ status: 'value', hasValue: true, output: { type: 'Text', text: '12' } });
    expect('value' in out).toBe(false);
  });

  test('Redirect: a non-empty string; anything else is invalid', async () => {
    const sb = sandbox();
    const redirect = async (fn) => (await sb.run(fn, { returnType: 'Redirect' })).output;
    expect(await redirect(() => 'https://example.com/x')).toEqual({ type: 'Redirect', location: 'https://example.com/x' });
    expect(await redirect(() => '')).toEqual({ type: 'invalid', message: 'Redirect return type needs a URL string, got string' });
    expect(await redirect(() => 42)).toEqual({ type: 'invalid', message: 'Redirect return type needs a URL string, got number' });
    expect(await redirect(() => null)).toEqual({ type: 'invalid', message: 'Redirect return type needs a URL string, got null' });
    expect(await redirect(() => ({ url: 'x' }))).toEqual({ type: 'invalid', message: 'Redirect return type needs a URL string, got object' });
  });

  test('File: an object gives the four fields (strings, or null when absent); a field that is there but no string, or anything else, is invalid', async () => {
    const sb = sandbox();
    const file = async (fn) => (await sb.run(fn, { returnType: 'File' })).output;
    expect(await file(() => ({ path: 'out/a.pdf', storagePath: 's/a.pdf', name: 'a.pdf', contentDisposition: 'inline' }))).toEqual({
      type: 'File',
      file: { path: 'out/a.pdf', storagePath: 's/a.pdf', name: 'a.pdf', contentDisposition: 'inline' },
    });
    expect(await file(() => ({ storagePath: 's/b', name: null }))).toEqual({
      type: 'File',
      file: { path: null, storagePath: 's/b', name: null, contentDisposition: null },
    });
    expect(await file(() => ({ storagePath: 's/b', name: 5 }))).toEqual({ type: 'invalid', message: "A File result's name must be a string, got number" });
    expect(await file(() => 'a.pdf')).toEqual({ type: 'invalid', message: 'File return type needs a file result object, got string' });
    expect(await file(() => null)).toEqual({ type: 'invalid', message: 'File return type needs a file result object, got null' });
  });
});

// -------------------------------------------------------------------------------------------------
describe('invoke: stages, promises and errors', () => {
  test('before / call get one argument', async () => {
    const sb = sandbox();
    for (const stage of ['before', 'call']) {
      const got = await sb.probe(
        function (ctx, extra) {
          return [arguments.length, typeof extra];
        },
        { stage },
      );
      expect(got).toEqual([1, 'undefined']);
    }
  });

  test('after gets (ctx, result); result is undefined when hasResult is false', async () => {
    const sb = sandbox();
    const got = function (ctx, result) {
      return [arguments.length, result === undefined ? 'undefined' : result];
    };
    expect(await sb.probe(got, { stage: 'after', result: { total: 3 }, hasResult: true })).toEqual([2, { total: 3 }]);
    expect(await sb.probe(got, { stage: 'after', hasResult: false })).toEqual([2, 'undefined']);
    expect(await sb.probe(got, { stage: 'after', result: 'ignored', hasResult: false })).toEqual([2, 'undefined']);
  });

  test('onError gets (ctx, {requestId, message, code}) and can write its own response', async () => {
    const sb = sandbox();
    const out = await sb.run(
      function (ctx, error) {
        ctx.response.setStatus(200);
        ctx.response.setContentType('application/json');
        ctx.response.getWriter().write(JSON.stringify(error));
        return Object.keys(error);
      },
      { stage: 'onError', error: { requestId: 'req-1', message: 'boom', code: 270000 } },
    );
    expect(out.value).toEqual(['requestId', 'message', 'code']);
    expect(JSON.parse(out.state.response.chunks[0].t)).toEqual({ requestId: 'req-1', message: 'boom', code: 270000 });
  });

  test('an async function: its resolved value', async () => {
    const sb = sandbox();
    const out = await sb.run(async function (ctx) {
      await null;
      ctx.request.setAttribute('k', 'v');
      await new Promise((r) => r());
      return { ok: true, at: new Date(10) };
    });
    expect(out).toMatchObject({ status: 'value', hasValue: true, value: { ok: true, at: 10 }, state: { attributes: { k: 'v' } } });
  });

  test('a rejected promise is an error', async () => {
    const sb = sandbox();
    const out = await sb.run(async function () {
      await null;
      var e = new Error('late failure');
      e.code = 4711;
      throw e;
    });
    expect(out.status).toBe('error');
    expect(out.error).toMatchObject({ name: 'Error', message: 'late failure', code: 4711 });
  });

  test('a promise that never settles is pending', async () => {
    const sb = sandbox();
    const out = await sb.run(() => new Promise(() => {}));
    expect(out.status).toBe('pending');
    expect(out.hasValue).toBe(false);
    expect(out.state.response.status).toBe(200);
  });

  test('a custom thenable is followed', async () => {
    const sb = sandbox();
    const out = await sb.run(() => ({ then: (resolve) => resolve({ via: 'thenable' }) }));
    expect(out.value).toEqual({ via: 'thenable' });
  });

  test('stages in flight in one context at once each settle with their own value, state and host calls', async () => {
    const sb = sandbox({ 'system.getAccountByToken': (a) => ({ id: a.token }) });
    const fn = sb.evaluate(`(async function (ctx) {
      var token = ctx.request.getHeader('x-t');
      ctx.request.setAttribute('t', token);
      var account = await platform.system.getAccountByToken(token);
      ctx.response.setHeader('X-T', account.id);
      return { token: token, account: account.id, attr: ctx.request.getAttribute('t') };
    })`);
    const head = JSON.stringify({ stage: 'call', returnType: 'JSON', wantValue: true, async: true });
    const req = (t) => JSON.stringify(baseRequest({ headers: { 'x-t': t }, headerLists: {} }));
    sb.entry.start(1, { fn }, 'fn', head, req('a'), '{}', '', '');
    sb.entry.start(2, { fn }, 'fn', head, req('b'), '{}', '', '');
    expect(JSON.parse(sb.entry.drain())).toEqual({ waiting: 2, outputs: [] });
    await flush();
    const { waiting, outputs } = JSON.parse(sb.entry.drain());
    expect(waiting).toBe(0);
    const byId = Object.fromEntries(outputs.map((o) => [o.id, o]));
    expect(JSON.parse(byId[1].output.json)).toEqual({ token: 'a', account: 'a', attr: 'a' });
    expect(JSON.parse(byId[2].output.json)).toEqual({ token: 'b', account: 'b', attr: 'b' });
    expect(byId[1]).toMatchObject({ attributes: { t: 'a' }, response: { headers: [['X-T', 'a']] } });
    expect(byId[2]).toMatchObject({ attributes: { t: 'b' }, response: { headers: [['X-T', 'b']] } });
  });

  test('a settled value is not replaced by a later stage of the same context', async () => {
    const sb = sandbox();
    const first = vm.runInContext('(function () { return new Promise(function (r) { globalThis.later = r; }); })', sb.context);
    sb.entry.start(100, { fn: first }, 'fn', JSON.stringify({ stage: 'call', returnType: 'JSON', wantValue: true, async: false }), JSON.stringify(baseRequest()), '{}', '', '');
    await flush();
    expect(JSON.parse(sb.entry.drain()).outputs).toEqual([]); // pending
    const second = await sb.run(() => 'second');
    sb.evaluate('later("first, in its own time")');
    await flush();
    const outputs = JSON.parse(sb.entry.drain()).outputs;
    expect(outputs).toMatchObject([{ id: 100, value: 'first, in its own time' }]);
    expect(second.value).toBe('second');
  });

  test('a cancelled stage never reports, and its host replies are dropped', async () => {
    const sb = sandbox({ 'system.getAccountByToken': { id: 'late' } });
    const fn = sb.evaluate('(async function () { return await platform.system.getAccountByToken("x") })');
    sb.entry.start(7, { fn }, 'fn', JSON.stringify({ stage: 'call', returnType: 'JSON', wantValue: true, async: true }), '{}', '{}', '', '');
    expect(JSON.parse(sb.entry.drain()).waiting).toBe(1);
    sb.entry.cancel(7);
    expect(JSON.parse(sb.entry.drain()).waiting).toBe(0);
    await flush();
    expect(JSON.parse(sb.entry.drain())).toEqual({ waiting: 0, outputs: [] });
  });


  test('a thrown Error: name, message, numeric code, status, stack', async () => {
    const sb = sandbox();
    const out = await sb.run(function () {
      class BusinessError extends Error {
        constructor(m) {
          super(m);
          this.name = 'BusinessError';
          this.code = 1001;
          this.status = 409;
        }
      }
      throw new BusinessError('Order already exists');
    });
    expect(out.status).toBe('error');
    expect(out.hasValue).toBe(false);
    expect(out.error).toMatchObject({ name: 'BusinessError', message: 'Order already exists', code: 1001, status: 409 });
    expect(out.error.stack).toMatch(/Order already exists/);
  });

  test('a non-numeric code is not reported', async () => {
    const sb = sandbox();
    const out = await sb.run(function () {
      var e = new TypeError('bad');
      e.code = 'E_BAD';
      throw e;
    });
    expect(out.error.name).toBe('TypeError');
    expect('code' in out.error).toBe(false);
  });

  test('thrown strings and plain objects', async () => {
    const sb = sandbox();
    const str = await sb.run(() => {
      throw 'just text';
    });
    expect(str.status).toBe('error');
    expect(str.error).toEqual({ name: 'Error', message: 'just text' });
    const obj = await sb.run(() => {
      throw { message: 'plain object', code: 7 };
    });
    expect(obj.error).toEqual({ name: 'Error', message: 'plain object', code: 7 });
    const bare = await sb.run(() => {
      throw { code: 8 };
    });
    expect(bare.error).toEqual({ name: 'Error', message: '[object Object]', code: 8 });
    const num = await sb.run(() => Promise.reject(42));
    expect(num.error).toEqual({ name: 'Error', message: '42' });
  });

  test('the state after a throw is still reported', async () => {
    const sb = sandbox();
    const out = await sb.run(function (ctx) {
      ctx.request.setAttribute('seen', 1);
      ctx.response.setStatus(503);
      throw new Error('x');
    });
    expect(out.status).toBe('error');
    expect(out.state.attributes).toEqual({ seen: 1 });
    expect(out.state.response.status).toBe(503);
  });

  test('a non-function export is an error', async () => {
    const sb = sandbox();
    const out = await sb.run(42);
    expect(out.status).toBe('error');
    expect(out.error.message).toMatch(/not a function/);
  });

  test('script code cannot reach the adapter entry', async () => {
    const sb = sandbox();
    const v = await sb.probe(function () {
      return { sa: typeof __sa, entries: Object.getOwnPropertyNames(globalThis).filter((n) => /^__|^(start|reply|drain|cancel)$/.test(n)) };
    });
    expect(v).toEqual({ sa: 'undefined', entries: [] });
  });

  test('each stage gets a fresh ctx', async () => {
    const sb = sandbox();
    await sb.run(function (ctx) {
      globalThis.kept = ctx;
      ctx.response.setStatus(500);
    });
    const out = await sb.run((ctx) => [ctx === globalThis.kept, ctx.response.getStatus()]);
    expect(out.value).toEqual([false, 200]);
    expect(out.state.response.status).toBe(200);
  });
});

// -------------------------------------------------------------------------------------------------
describe('platform', () => {
  test('I/O host calls return promises in an async-mode stage and values in a blocking-mode one', async () => {
    const table = {
      'http.request': (a) => ({ id: '1', status: 201, headers: { 'x-u': a.url }, url: a.url }),
      'http.saveBodyAsFile': (a) => ({ path: a.path, size: 3 }),
      'system.getAccountByToken': (a) => ({ id: a.token }),
      'part.save': (a) => ({ path: a.path, size: 123 }),
    };
    const script = function (ctx) {
      var res = platform.http.request({ url: 'https://example.com/a' });
      var account = platform.system.getAccountByToken('t');
      var part = ctx.request.getPart('file');
      var kinds = [res, account, part.save('up/a.png')].map((v) => (v && typeof v.then === 'function' ? 'promise' : 'value'));
      return Promise.all([res, account, part.save('up/b.png')]).then(function (all) {
        return Promise.resolve(all[0].saveBodyAsFile('body.txt')).then(function (saved) {
          return { kinds: kinds, status: all[0].status, account: all[1].id, part: all[2].path, saved: saved.path, bytes: platform.utils.stringToBytes('é') };
        });
      });
    };
    const expected = { status: 201, account: 't', part: 'up/b.png', saved: 'body.txt', bytes: [195, 169] };
    expect(await sandbox(table).probe(script, { async: true })).toEqual({ kinds: ['promise', 'promise', 'promise'], ...expected });
    expect(await sandbox(table).probe(script, { async: false })).toEqual({ kinds: ['value', 'value', 'value'], ...expected });
  });

  test('app.abort throws an AbortError, recorded in the sandbox, and is reported', async () => {
    const sb = sandbox();
    const out = await sb.run(function () {
      platform.app.abort('Token expired', 401);
    });
    expect(sb.calls).toEqual([]);
    expect(out.status).toBe('error');
    expect(out.error).toMatchObject({ name: 'AbortError', message: 'Token expired', code: 270001, status: 401 });
  });

  test('an abort caught by the script is still reported (and wins over the return value)', async () => {
    const sb = sandbox();
    const out = await sb.run(function () {
      var seen;
      try {
        platform.app.abort('No token');
      } catch (e) {
        seen = [e instanceof Error, e.name, e.code, e.message, 'status' in e];
      }
      globalThis.seenAbort = seen;
      return { swallowed: true };
    });
    expect(out.status).toBe('error');
    expect(out.hasValue).toBe(false);
    expect(out.output).toBeUndefined();
    expect(out.error).toMatchObject({ name: 'AbortError', message: 'No token', code: 270001 });
    expect('status' in out.error).toBe(false);
    expect(sb.evaluate('JSON.stringify(seenAbort)')).toBe('[true,"AbortError",270001,"No token",false]');
    expect(sb.calls).toEqual([]);
  });

  test('an abort in an async function, caught, is still reported; the first abort wins', async () => {
    const sb = sandbox();
    const out = await sb.run(async function () {
      await null;
      try {
        platform.app.abort('first', 403);
      } catch (e) {}
      try {
        platform.app.abort('second');
      } catch (e) {}
      return 'fine';
    });
    expect(out.error).toMatchObject({ name: 'AbortError', message: 'first', status: 403, code: 270001 });
  });

  test('an abort does not leak into the next stage', async () => {
    const sb = sandbox();
    await sb.run(() => platform.app.abort('x'));
    const out = await sb.run(() => 'ok');
    expect(out).toMatchObject({ status: 'value', value: 'ok' });
  });

  test('system.getAccountByToken returns the host value or null', async () => {
    const account = { id: 'u1', name: 'Ann', createTime: 1700000000000, valid: true };
    const sb = sandbox({ 'system.getAccountByToken': (a) => (a.token === 'good' ? account : null) });
    const v = await sb.probe(() => [platform.system.getAccountByToken('good'), platform.system.getAccountByToken('bad')]);
    expect(v).toEqual([account, null]);
    expect(sb.calls.map((c) => c.args)).toEqual([{ token: 'good' }, { token: 'bad' }]);
  });

  test('a failing host op throws an Error with the host name / message / code', async () => {
    const sb = sandbox({ 'system.getAccountByToken': { error: { name: 'HostError', message: 'accounts down', code: 270602 } } });
    const out = await sb.run(() => platform.system.getAccountByToken('t'));
    expect(out.status).toBe('error');
    expect(out.error).toMatchObject({ name: 'HostError', message: 'accounts down', code: 270602 });
  });

  test('a host failure named as a built-in error type is an instance of it, called sync or awaited', async () => {
    const sb = sandbox({ 'system.getAccountByToken': { error: { name: 'TypeError', message: 'bad token', code: 270602 } } });
    // (the script's TypeError and Error: the sandbox realm's, as the functions below are evaluated there)
    sb.evaluate('globalThis.check = (e) => ({ name: e.name, type: e instanceof TypeError, error: e instanceof Error, message: e.message, code: e.code })');
    const expected = { name: 'TypeError', type: true, error: true, message: 'bad token', code: 270602 };
    const sync = function () {
      try {
        platform.system.getAccountByToken('t');
      } catch (e) {
        return check(e);
      }
    };
    // (an async stage: the failure comes through entry.reply, on the Error made at the call)
    const awaited = async function () {
      try {
        await platform.system.getAccountByToken('t');
      } catch (e) {
        return check(e);
      }
    };
    expect(await sb.probe(sync)).toEqual(expected);
    expect(await sb.probe(awaited, { async: true })).toEqual(expected);
  });

  test('await on a host call works', async () => {
    const sb = sandbox({ 'system.getAccountByToken': { id: 'u2' } });
    expect(await sb.probe(async () => (await platform.system.getAccountByToken('t')).id)).toBe('u2');
  });

  test('utils.toJSON: JSON with Dates as ms', async () => {
    const sb = sandbox();
    const v = await sb.probe(() => [platform.utils.toJSON({ a: new Date(7), b: [1, 'x'] }), platform.utils.toJSON(new Date(8)), platform.utils.toJSON(undefined)]);
    expect(v).toEqual(['{"a":7,"b":[1,"x"]}', '8', 'null']);
  });

  test('utils.stringToBytes: UTF-8 in the sandbox (default, any case, utf8)', async () => {
    const sb = sandbox();
    const v = await sb.probe(() => [
      platform.utils.stringToBytes('héllo €'),
      platform.utils.stringToBytes('€', 'UTF-8'),
      platform.utils.stringToBytes('é', 'utf8'),
      platform.utils.stringToBytes('😀', 'Utf-8'),
      platform.utils.stringToBytes(''),
      Array.isArray(platform.utils.stringToBytes('a')),
    ]);
    expect(v).toEqual([[...Buffer.from('héllo €')], [0xe2, 0x82, 0xac], [0xc3, 0xa9], [0xf0, 0x9f, 0x98, 0x80], [], true]);
    expect(sb.calls).toEqual([]);
  });

  test('utils.stringToBytes: other charsets go to the host', async () => {
    const sb = sandbox({ 'utils.stringToBytes': [0xe9] });
    const v = await sb.probe(() => platform.utils.stringToBytes('é', 'ISO-8859-1'));
    expect(v).toEqual([0xe9]);
    expect(sb.calls).toEqual([{ op: 'utils.stringToBytes', args: { text: 'é', charset: 'ISO-8859-1' } }]);
  });

  test('http.request: host op arguments and the response object', async () => {
    const sb = sandbox({
      'http.request': { id: 'h1', status: 201, headers: { 'content-type': 'application/json' }, url: 'https://up.example.com/x' },
      'http.body': '{"ok":true}',
      'http.saveBodyAsFile': (a) => ({ path: a.path, size: 11 }),
    });
    const v = await sb.probe(function () {
      var res = platform.http.request({ url: 'https://up.example.com/x', method: 'post', headers: { 'X-N': 5, 'X-Null': null }, body: { a: new Date(1) }, timeoutMs: 500 });
      var keys = Object.keys(res);
      return { status: res.status, headers: res.headers, url: res.url, keys: keys, body: res.body, again: res.body, text: res.text(), json: res.json(), saved: res.saveBodyAsFile('dl/x.json') };
    });
    expect(v).toEqual({
      status: 201,
      headers: { 'content-type': 'application/json' },
      url: 'https://up.example.com/x',
      keys: ['status', 'headers', 'url', 'text', 'json', 'saveBodyAsFile', 'body'],
      body: '{"ok":true}',
      again: '{"ok":true}',
      text: '{"ok":true}',
      json: { ok: true },
      saved: { path: 'dl/x.json', size: 11 },
    });
    expect(sb.calls).toEqual([
      {
        op: 'http.request',
        args: { url: 'https://up.example.com/x', method: 'POST', headers: { 'X-N': '5', 'content-type': 'application/json' }, body: '{"a":1}', timeoutMs: 500 },
      },
      { op: 'http.body', args: { id: 'h1' } }, // fetched once, then cached
      { op: 'http.saveBodyAsFile', args: { id: 'h1', path: 'dl/x.json' } },
    ]);
  });

  test('http.request: the body is only fetched when read; a string argument is the url', async () => {
    const sb = sandbox({ 'http.request': { id: 'h2', status: 200, headers: {}, url: 'http://x/' } });
    const v = await sb.probe(() => platform.http.request('http://x/').status);
    expect(v).toBe(200);
    expect(sb.calls).toEqual([{ op: 'http.request', args: { url: 'http://x/', method: 'GET', headers: {}, body: null } }]);
  });

  test('http.request without a url throws', async () => {
    const sb = sandbox();
    const out = await sb.run(() => platform.http.request({ method: 'GET' }));
    expect(out.status).toBe('error');
    expect(out.error.message).toMatch(/url/);
    expect(sb.calls).toEqual([]);
  });

  test('console: every level, JSON-ish formatting', async () => {
    const sb = sandbox();
    await sb.run(function () {
      var cyc = { a: 1 };
      cyc.self = cyc;
      console.log('text', 1, true, null, undefined, { a: [1, 'two'] });
      console.info(new Date(0));
      console.warn(cyc);
      console.error(new Error('bad thing').message, function named() {});
      console.debug(BigInt(5), [1, [2, [3, [4, [5]]]]]);
    });
    expect(sb.calls).toEqual([
      { op: 'console', args: { level: 'log', message: 'text 1 true null undefined {"a":[1,"two"]}' } },
      { op: 'console', args: { level: 'info', message: '1970-01-01T00:00:00.000Z' } },
      { op: 'console', args: { level: 'warn', message: '{"a":1,"self":[Circular]}' } },
      { op: 'console', args: { level: 'error', message: 'bad thing [Function: named]' } },
      { op: 'console', args: { level: 'debug', message: '5n [1,[2,[3,[4,[Array]]]]]' } },
    ]);
  });

  test('console: an Error prints its stack; messages are capped at 8 KiB', async () => {
    const sb = sandbox();
    await sb.run(function () {
      console.log(new Error('with stack'));
      console.log('x'.repeat(20000));
      var big = [];
      for (var i = 0; i < 100000; i++) big.push({ i: i });
      console.log(big);
    });
    expect(sb.calls[0].args.message).toMatch(/^Error: with stack\n\s+at /);
    expect(sb.calls[1].args.message).toHaveLength(8192);
    expect(sb.calls[1].args.message.endsWith('…')).toBe(true);
    expect(sb.calls[2].args.message.length).toBeLessThanOrEqual(8192);
    expect(sb.calls[2].args.message.length).toBeGreaterThan(7000); // (nested values count once against the cap)
  });

  test('console output never breaks the script, even when the host fails', async () => {
    const sb = sandbox({ console: { error: { name: 'Error', message: 'no console' } } });
    expect(await sb.probe(() => (console.log('x'), 'still running'))).toBe('still running');
  });
});

// -------------------------------------------------------------------------------------------------
describe('hardening against hostile scripts', () => {
  test('JSON.stringify and Array.prototype.push replaced before returning: collect still works', async () => {
    const sb = sandbox();
    const out = await sb.run(function (ctx) {
      ctx.request.setAttribute('k', { d: new Date(1) });
      ctx.response.addHeader('X-A', '1');
      ctx.response.getWriter().write('body');
      ctx.response.getOutputStream().write([1, 2]);
      JSON.stringify = function () {
        return 'x';
      };
      Array.prototype.push = null;
      return { d: new Date(2), list: [1, 2] };
    });
    expect(out).toMatchObject({
      status: 'value',
      value: { d: 2, list: [1, 2] },
      output: { type: 'JSON', json: '{"d":2,"list":[1,2]}' },
      state: { attributes: { k: { d: 1 } }, response: { headers: [['X-A', '1']], chunks: [{ t: 'body' }, { b: 'AQI=' }] } },
    });
    // and the next stage in the same context too
    const next = await sb.run(function (ctx) {
      ctx.response.setHeader('X-B', '2');
      return [ctx.request.getParameterValues('a'), Array.from(ctx.request.getHeaders('x-multi'))];
    });
    expect(next.value).toEqual([
      ['1', '2', '3'],
      ['one', 'two'],
    ]);
    expect(next.state.response.headers).toEqual([['X-B', '2']]);
  });

  test('String / Array / Function prototype patches do not reach the adapter', async () => {
    const sb = sandbox();
    sb.evaluate(`
      String.prototype.toLowerCase = function () { return 'nope'; };
      String.prototype.slice = function () { return 'nope'; };
      String.prototype.split = function () { return ['nope']; };
      String.prototype.charCodeAt = function () { return 0; };
      Array.prototype.map = Array.prototype.join = Array.prototype.indexOf = null;
      Array.prototype[Symbol.iterator] = function* () { yield 'nope'; };
      Function.prototype.call = Function.prototype.apply = function () { return 'nope'; };
      Object.keys = function () { return ['nope']; };
      Promise.prototype.then = function () { return this; };
    `);
    const out = await sb.run(async function (ctx) {
      ctx.response.setContentType('text/html; charset=ISO-8859-1');
      ctx.response.getOutputStream().write('é');
      ctx.request.setAttribute('x', 1);
      return { h: ctx.request.getHeader('X-MULTI'), p: ctx.request.getParameter('c') };
    });
    expect(out).toMatchObject({
      status: 'value',
      value: { h: 'one', p: '4' },
      state: { attributes: { x: 1 }, response: { contentType: 'text/html', characterEncoding: 'ISO-8859-1', chunks: [{ b: 'w6k=' }] } },
    });
  });

  test('inherited setters and Object.prototype.toJSON do not change the reported state', async () => {
    const sb = sandbox();
    const out = await sb.run(function (ctx) {
      ctx.response.setStatus(201);
      ctx.response.getWriter().write('x');
      Object.defineProperty(Array.prototype, '0', { set: function () { throw new Error('trap'); }, configurable: true });
      Object.defineProperty(Object.prototype, 'status', { set: function () { throw new Error('trap'); }, configurable: true });
      Object.defineProperty(Object.prototype, 'get', { value: function () {}, configurable: true });
      Object.prototype.toJSON = function () {
        return 'spied';
      };
      throw new Error('after the traps');
    });
    expect(out.status).toBe('error');
    expect(out.error).toMatchObject({ name: 'Error', message: 'after the traps' });
    expect(out.state.response).toMatchObject({ status: 201, chunks: [{ t: 'x' }], written: true });
    const next = await sb.run((ctx) => void ctx.response.addHeader('X-A', '1'), { returnType: 'Text' });
    expect(next.status).toBe('value');
    expect(next.state.response.headers).toEqual([['X-A', '1']]);
  });

  test('the adapter globals cannot be replaced; no helper is visible', async () => {
    const sb = sandbox();
    const v = await sb.probe(function () {
      'use strict';
      var errors = [];
      var before = platform;
      try {
        delete globalThis.platform; // node:vm's global ignores this silently; QuickJS / V8 throw
      } catch (e) {
        /* either way it stays */
      }
      return {
        errors: errors,
        samePlatform: platform === before,
        own: Object.getOwnPropertyNames(globalThis).filter((n) => /^__/.test(n) || n === 'platform' || n === 'console').sort(),
      };
    });
    expect(v).toEqual({ errors: [], samePlatform: true, own: ['console', 'platform'] });
  });
});

// -------------------------------------------------------------------------------------------------
describe('the real engines', () => {
  const SCRIPT = `async function (ctx) {
    ctx.response.setDateHeader('Date', Date.UTC(2030, 0, 1));
    ctx.response.getOutputStream().write('héllo €');
    ctx.response.getWriter().write('é');
    ctx.request.setAttribute('at', new Date(5));
    try { platform.app.abort('caught', 401); } catch (e) {}
    await null;
    JSON.stringify = function () { return 'x'; };
    Array.prototype.push = null;
    return { d: new Date(7), host: typeof __host, url: ctx.request.getRequestURL(), p: ctx.request.getParameterValues('a') };
  }`;
  const args = (returnType) => [
    JSON.stringify({ stage: 'call', returnType, wantValue: true, async: false }),
    JSON.stringify(baseRequest()),
    '{}',
    JSON.stringify(baseResponse()),
    '',
  ];
  const withState = (out) => ({ ...out, state: { attributes: out.attributes ?? {}, response: { ...baseResponse(), ...out.response } } });
  const check = (out) => {
    expect(out.status).toBe('error');
    expect(out.error).toMatchObject({ name: 'AbortError', message: 'caught', code: 270001, status: 401 });
    expect(out.state.attributes).toEqual({ at: 5 });
    expect(out.state.response.headers).toEqual([['Date', 'Tue, 01 Jan 2030 00:00:00 GMT']]);
    expect(out.state.response.chunks).toEqual([{ b: 'aMOpbGxvIOKCrA==' }, { t: 'é' }]);
  };
  const second = `function (ctx) { return { d: new Date(9), host: typeof __host, h: ctx.request.getHeader('X-Multi'), u: platform.utils.stringToBytes('€') }; }`;
  const checkSecond = (out) => {
    expect(out).toMatchObject({ status: 'value', value: { d: 9, host: 'undefined', h: 'one', u: [226, 130, 172] } });
  };

  test('QuickJS (quickjs-emscripten)', async () => {
    const { newQuickJSWASMModuleFromVariant } = require('quickjs-emscripten-core');
    const mod = require('@jitl/quickjs-wasmfile-release-sync');
    const variant = mod.default ?? mod;
    // jest has no dynamic import(): load the same emscripten module through require
    const QuickJS = await newQuickJSWASMModuleFromVariant({
      ...variant,
      importModuleLoader: async () => {
        const m = require('@jitl/quickjs-wasmfile-release-sync/emscripten-module');
        return m.default ?? m;
      },
    });
    const ctx = QuickJS.newContext();
    const calls = [];
    try {
      const host = ctx.newFunction('host', (id, op) => {
        calls.push(ctx.getString(op));
        return ctx.newString('{"ok":true,"value":null}');
      });
      const factory = ctx.unwrapResult(ctx.evalCode(SRC, 'adapter.js'));
      const entry = ctx.unwrapResult(ctx.callFunction(factory, ctx.undefined, host));
      factory.dispose();
      host.dispose();
      ctx.unwrapResult(ctx.evalCode(CONTINUATION_SCRIPT)).dispose();
      const names = ctx.unwrapResult(ctx.evalCode('Object.getOwnPropertyNames(globalThis).filter((n) => /^__/.test(n)).concat(typeof __resume)'));
      expect(ctx.dump(names)).toEqual(['function']);
      names.dispose();
      let nextId = 1;
      const runStage = (fnSource) => {
        const ns = ctx.unwrapResult(ctx.evalCode(`({ fn: ${fnSource} })`));
        const id = nextId++;
        const handles = [ctx.newNumber(id), ns, ctx.newString('fn'), ...args('JSON').map((a) => ctx.newString(a))];
        const start = ctx.getProp(entry, 'start');
        ctx.unwrapResult(ctx.callFunction(start, ctx.undefined, ...handles)).dispose();
        start.dispose();
        handles.forEach((h) => h.dispose());
        ctx.runtime.executePendingJobs(-1);
        const drain = ctx.getProp(entry, 'drain');
        const res = ctx.unwrapResult(ctx.callFunction(drain, ctx.undefined));
        drain.dispose();
        const text = ctx.getString(res);
        res.dispose();
        return withState(JSON.parse(text).outputs.find((o) => o.id === id));
      };
      check(runStage(SCRIPT));
      expect(calls).toEqual([]); // (abort is recorded in the sandbox)
      checkSecond(runStage(second));
      entry.dispose();
    } finally {
      ctx.dispose();
    }
  });

  test('vm2', async () => {
    const { VM } = require('vm2');
    const calls = [];
    const machine = new VM({ allowAsync: true, eval: false, wasm: false, sandbox: {} });
    const entry = machine.run(SRC)((id, op) => {
      calls.push(String(op));
      return '{"ok":true,"value":null}';
    });
    machine.run(CONTINUATION_SCRIPT);
    expect(machine.run('Object.getOwnPropertyNames(globalThis).filter((n) => /^__/.test(n)).concat(typeof __resume)')).toEqual(['function']);
    let nextId = 1;
    const runStage = async (fnSource) => {
      const id = nextId++;
      entry.start(id, machine.run(`({ fn: ${fnSource} })`), 'fn', ...args('JSON'));
      await new Promise((r) => setImmediate(r));
      return withState(JSON.parse(String(entry.drain())).outputs.find((o) => o.id === id));
    };
    check(await runStage(SCRIPT));
    expect(calls).toEqual([]);
    checkSecond(await runStage(second));
  });
});
