'use strict';
// The built-in automation interpreter, through the router and real workers: every step type,
// `state`, the result rules, and automations as the call and as the after hook.
const http = require('node:http');
const request = require('supertest');
const { makeApp } = require('./helpers/app');

let upstream;
const seen = [];
beforeAll(async () => {
  // a real loopback server for the http steps (private networks allowed for this router)
  upstream = http.createServer((req, res) => {
    const chunks = [];
    req.on('data', (d) => chunks.push(d));
    req.on('end', () => {
      const body = Buffer.concat(chunks).toString();
      seen.push({ method: req.method, url: req.url, headers: req.headers, raw: req.rawHeaders, body, hex: Buffer.concat(chunks).toString('hex') });
      if (req.url.startsWith('/bytes')) return res.end('ok');
      if (req.url.startsWith('/text')) {
        res.setHeader('content-type', 'text/plain');
        return res.end('plain words');
      }
      res.statusCode = req.url.startsWith('/missing') ? 404 : 200;
      res.setHeader('content-type', 'application/json; charset=utf-8');
      res.end(JSON.stringify({ path: req.url, method: req.method, echo: body ? JSON.parse(body) : null, n: 41 }));
    });
  });
  await new Promise((r) => upstream.listen(0, '127.0.0.1', r));
});
afterAll(() => new Promise((r) => upstream.close(r)));

const SCRIPT = `
export function price(ctx, state) {
  ctx.request.setAttribute('priced', true);
  return { unit: 2.5, qty: state.vars.qty, seenSteps: Object.keys(state.steps), result: state.result };
}
export function nothing(ctx, state) {}
export function call(ctx) { return { id: 7, item: 'pen' } }
export function text(ctx) { return 'from script' }
export function echo(ctx, state) { return state.vars.rec }
`;

// (the upstream's address is known only once it listens: the http steps read it from a header)
const base = "ctx.headers['x-upstream']";
const upstreamHeader = () => `http://127.0.0.1:${upstream.address().port}`;

function app(automations, apis, router = {}) {
  const made = makeApp({
    router: { outbound: { allowPrivateNetworks: true }, ...router },
    apps: { a: { scripts: { 's.js': SCRIPT }, automations: automations(base), apis } },
  });
  afterAll(() => made.router.close());
  return made;
}
const call = (id, extra = {}) => ({ path: id, call: { automation: id }, returnType: 'JSON', ...extra });

describe('step types', () => {
  const { app: server } = app(
    () => [
      { id: 'set', steps: [{ id: 'one', type: 'set', vars: { a: '1', b: 'state.vars.a + 1', c: "'x' + ctx.query.q", d: { literal: ['kept', 'as is'] }, e: 2.5, f: null } }] },
      { id: 'script', steps: [{ type: 'set', vars: { qty: 'int(ctx.query.qty)' } }, { id: 'p', type: 'script', script: 's.js', function: 'price' }, { type: 'return', value: "{'total': state.steps.p.unit * state.vars.qty, 'p': state.steps.p, 'attr': ctx.attributes.priced}" }] },
      {
        id: 'http',
        steps: [
          { id: 'get', type: 'http', url: `${base} + '/orders/' + ctx.query.id` },
          { id: 'post', type: 'http', method: 'POST', url: `${base} + '/orders'`, headers: JSON.parse(`{"x-trace": "'t-' + ctx.query.id", "x-literal": 5, "__proto__": "'own'"}`), body: "{'qty': state.steps.get.body.n + 1}" },
          { id: 'text', type: 'http', url: `${base} + '/text'` },
          { id: 'missing', type: 'http', url: `${base} + '/missing'` },
          { type: 'return', value: "{'get': state.steps.get.body, 'post': state.steps.post.body.echo, 'status': state.steps.post.status, 'text': state.steps.text.body, 'missing': state.steps.missing.status, 'ct': state.steps.get.headers['content-type']}" },
        ],
      },
      {
        id: 'if',
        steps: [
          { id: 'branch', type: 'if', condition: "ctx.query.v == 'yes'", then: [{ type: 'set', vars: { took: "'then'" } }], else: [{ type: 'set', vars: { took: "'else'" } }] },
          { id: 'empty', type: 'if', condition: 'false', then: [{ type: 'set', vars: { never: true } }] },
          { type: 'return', value: "{'took': state.vars.took, 'branch': state.steps.branch, 'empty': state.steps.empty, 'has': has(state.vars.never)}" },
        ],
      },
      {
        id: 'forEach',
        steps: [
          { type: 'set', vars: { sum: 0 } },
          { id: 'loop', type: 'forEach', items: '[3, 4, 5]', as: 'n', steps: [{ id: 'inner', type: 'set', vars: { sum: 'state.vars.sum + n * index' } }] },
          { id: 'nested', type: 'forEach', items: "[['a', 'b'], ['c']]", steps: [{ type: 'forEach', items: 'item', steps: [{ type: 'set', vars: { last: 'item + string(index)' } }] }] },
          { type: 'return', value: "{'sum': state.vars.sum, 'loop': state.steps.loop, 'inner': state.steps.inner, 'nested': state.steps.nested, 'last': state.vars.last}" },
        ],
      },
      {
        id: 'forEachReturn',
        steps: [{ type: 'forEach', items: '[1, 2, 3]', steps: [{ type: 'if', condition: 'item == 2', then: [{ type: 'return', value: "'stopped at ' + string(index)" }] }] }, { type: 'return', value: "'never'" }],
      },
      { id: 'return', steps: [{ type: 'return', value: "{'n': 1, 'big': 9007199254740993, 'd': timestamp('2026-01-05T00:00:00Z'), 'bytes': b'hi', 'list': [1, 'two', 3.5, null, true]}" }, { type: 'set', vars: { never: true } }] },
      // README's http example: request data checked before it goes into the URL, and not checked
      {
        id: 'guarded',
        steps: [
          { type: 'if', condition: "!ctx.query.id.matches('^[0-9]+$')", then: [{ type: 'abort', message: "'id must be a number'", status: 400 }] },
          { id: 'notify', type: 'http', method: 'POST', url: `${base} + '/orders/' + ctx.query.id`, body: "{'order': ctx.query.id}" },
          { type: 'return', value: 'state.steps.notify.body.path' },
        ],
      },
      {
        id: 'httpBytes',
        steps: [
          { id: 'bytes', type: 'http', method: 'POST', url: `${base} + '/bytes'`, body: "b'caf\\xe9\\x00\\xff'" },
          { id: 'typed', type: 'http', method: 'POST', url: `${base} + '/bytes'`, headers: { 'content-type': "'application/octet-stream'" }, body: "bytes('hi')" },
          { id: 'inMap', type: 'http', method: 'POST', url: `${base} + '/bytes'`, body: "{'b': b'hi'}" },
        ],
      },
      { id: 'unguarded', steps: [{ id: 'notify', type: 'http', method: 'POST', url: `${base} + '/orders/' + ctx.query.id` }, { type: 'return', value: 'state.steps.notify.body.path' }] },
      {
        id: 'ctorData',
        steps: [
          { type: 'set', vars: { rec: 'ctx.json.record' } },
          { id: 'p', type: 'script', script: 's.js', function: 'echo' },
          { type: 'forEach', items: 'ctx.json.list', steps: [{ type: 'set', vars: { last: 'item.name' } }] },
          { type: 'return', value: "{'team': state.vars.rec.team, 'q': ctx.query.id, 'fromScript': state.steps.p.team, 'last': state.vars.last, 'rec': state.vars.rec}" },
        ],
      },
      { id: 'celValues', steps: [{ type: 'set', vars: { u: 'uint(ctx.query.n)' } }, { type: 'return', value: "{'u': state.vars.u, 'next': state.vars.u + 1, 'max': 4294967295u, 'd': duration('1m30.5s'), 't': type(1), 'ts': type('x')}" }] },
      { id: 'abort', steps: [{ type: 'abort', message: "'order ' + ctx.query.id + ' not found'", status: 'int(ctx.query.status)' }] },
      { id: 'abortPlain', steps: [{ type: 'abort' }] },
      { id: 'last', steps: [{ type: 'set', vars: { x: '1' } }, { type: 'script', script: 's.js', function: 'call' }] },
      { id: 'none', steps: [{ type: 'script', script: 's.js', function: 'nothing' }] },
      { id: 'ctx', steps: [{ type: 'return', value: "{'method': ctx.method, 'path': ctx.path, 'app': ctx.appId, 'h': ctx.headers['x-h'], 'json': ctx.json.a, 'body': ctx.body, 'q': ctx.query.?missing.orValue('default'), 'c': ctx.cookies.k}" }] },
    ],
    ['set', 'script', 'http', 'httpBytes', 'guarded', 'unguarded', 'if', 'forEach', 'forEachReturn', 'return', 'celValues', 'ctorData', 'abort', 'abortPlain', 'last', 'none', 'ctx'].map((id) => call(id)),
  );

  test('set: assigns in order; strings are CEL, other JSON values literal; the result is what it assigned', async () => {
    const res = await request(server).get('/web0/api/a/set?q=yz');
    expect(res.status).toBe(200);
    expect(res.body).toEqual({ a: 1, b: 2, c: 'xyz', d: { literal: ['kept', 'as is'] }, e: 2.5, f: null });
  });

  test('script: the export gets (ctx, state) in the sandbox; its return is the step result; attributes it sets are seen', async () => {
    const res = await request(server).get('/web0/api/a/script?qty=4');
    expect(res.body).toEqual({ total: 10, p: { unit: 2.5, qty: 4, seenSteps: [], result: null }, attr: true });
  });

  test('http: requests through the guarded client; JSON bodies parsed, text kept, a 404 is a result', async () => {
    seen.length = 0;
    const res = await request(server).get('/web0/api/a/http?id=12').set('x-upstream', upstreamHeader());
    expect(res.status).toBe(200);
    expect(res.body).toEqual({
      get: { path: '/orders/12', method: 'GET', echo: null, n: 41 },
      post: { qty: 42 },
      status: 200,
      text: 'plain words',
      missing: 404,
      ct: 'application/json; charset=utf-8',
    });
    const post = seen.find((r) => r.method === 'POST');
    expect(post.headers).toMatchObject({ 'x-trace': 't-12', 'x-literal': '5', 'content-type': 'application/json' });
    // (a header named as an Object.prototype member is an ordinary name, as for platform.http.request)
    expect(post.raw[post.raw.indexOf('__proto__') + 1]).toBe('own');
  });

  test('http: a body that is bytes (CEL bytes) is sent as those bytes, with no content type added; bytes inside a map go as base64 in its JSON', async () => {
    seen.length = 0;
    const res = await request(server).get('/web0/api/a/httpBytes').set('x-upstream', upstreamHeader());
    expect(res.status).toBe(200);
    expect(seen.map((r) => [r.hex, r.headers['content-type'] ?? null, r.headers['content-length']])).toEqual([
      ['636166e900ff', null, '6'],
      [Buffer.from('hi').toString('hex'), 'application/octet-stream', '2'],
      [Buffer.from('{"b":"aGk="}').toString('hex'), 'application/json', '12'],
    ]);
  });

  test("http: request data in a URL is checked first (README's example): '..' in it would reach another path of the upstream", async () => {
    seen.length = 0;
    const ok = await request(server).get('/web0/api/a/guarded?id=12').set('x-upstream', upstreamHeader());
    expect(ok.body).toBe('/orders/12');
    const refused = await request(server).get('/web0/api/a/guarded?id=' + encodeURIComponent('../admin')).set('x-upstream', upstreamHeader());
    expect(refused.status).toBe(400);
    expect(refused.body).toMatchObject({ code: 270001, message: 'id must be a number' });
    expect(seen.map((r) => r.url)).toEqual(['/orders/12']);
    const traversed = await request(server).get('/web0/api/a/unguarded?id=' + encodeURIComponent('../admin')).set('x-upstream', upstreamHeader());
    expect(traversed.body).toBe('/admin');
  });

  test('if: runs one branch; its result is the branch result (null when nothing ran)', async () => {
    expect((await request(server).get('/web0/api/a/if?v=yes')).body).toEqual({ took: 'then', branch: { took: 'then' }, empty: null, has: false });
    expect((await request(server).get('/web0/api/a/if?v=no')).body).toMatchObject({ took: 'else' });
  });

  test('forEach: the item (named by `as`) and index in scope; the result lists each round’s last result', async () => {
    const res = await request(server).get('/web0/api/a/forEach');
    expect(res.body).toEqual({
      sum: 3 * 0 + 4 * 1 + 5 * 2,
      loop: [{ sum: 0 }, { sum: 4 }, { sum: 14 }],
      inner: { sum: 14 }, // a step inside a loop: its latest result
      nested: [[{ last: 'a0' }, { last: 'b1' }], [{ last: 'c0' }]],
      last: 'c0',
    });
  });

  test('forEach: a return inside a loop ends the whole automation', async () => {
    expect((await request(server).get('/web0/api/a/forEachReturn')).body).toBe('stopped at 1');
  });

  test('return: ends the run; CEL ints, timestamps and bytes come out as JSON numbers, ms and base64', async () => {
    const res = await request(server).get('/web0/api/a/return');
    expect(res.text).toBe('{"n":1,"big":9007199254740992,"d":1767571200000,"bytes":"aGk=","list":[1,"two",3.5,null,true]}');
  });

  test('return: CEL unsigned integers are numbers, durations milliseconds, types their name (never {})', async () => {
    const res = await request(server).get('/web0/api/a/celValues?n=41');
    expect(res.status).toBe(200);
    expect(res.body).toEqual({ u: 41, next: 42, max: 4294967295, d: 90500, t: 'int', ts: 'string' });
  });

  test("data with a 'constructor' key (a body, a query parameter, a step's result) is read like any other", async () => {
    const record = { team: 'McLaren', constructor: 'McLaren F1' };
    const res = await request(server).post('/web0/api/a/ctorData?id=5&constructor=x').send({ record, list: [{ name: 'a', constructor: 1 }] });
    expect(res.status).toBe(200);
    expect(res.body).toEqual({ team: 'McLaren', q: '5', fromScript: 'McLaren', last: 'a', rec: record });
  });

  test('abort: like platform.app.abort — code 270001, the status it gives (500 by default)', async () => {
    const res = await request(server).get('/web0/api/a/abort?id=9&status=404');
    expect(res.status).toBe(404);
    expect(res.body).toEqual({ requestId: res.headers['x-request-id'], message: 'order 9 not found', code: 270001 });
    const outOfRange = await request(server).get('/web0/api/a/abort?id=9&status=200');
    expect(outOfRange.status).toBe(500);
    const plain = await request(server).get('/web0/api/a/abortPlain');
    expect(plain.status).toBe(500);
    expect(plain.body).toMatchObject({ message: 'The call was aborted', code: 270001 });
  });

  test('without a return, the result is the last step’s; a script that returns nothing gives no result', async () => {
    expect((await request(server).get('/web0/api/a/last')).body).toEqual({ id: 7, item: 'pen' });
    const none = await request(server).get('/web0/api/a/none');
    expect(none.status).toBe(200);
    expect(none.text).toBe('null');
  });

  test('ctx: the request as expressions see it (json is the parsed body; optional access)', async () => {
    const res = await request(server).post('/web0/api/a/ctx').set('x-h', 'hv').set('cookie', 'k=cv').send({ a: [1, 2] });
    expect(res.body).toEqual({ method: 'POST', path: 'ctx', app: 'a', h: 'hv', json: [1, 2], body: '{"a":[1,2]}', q: 'default', c: 'cv' });
  });
});

describe('as the call and as the after hook', () => {
  const { app: server } = app(
    () => [
      { id: 'wrap', steps: [{ type: 'return', value: "{'data': state.result, 'by': 'wrap'}" }] },
      { id: 'keep', steps: [{ type: 'set', vars: { seen: 'state.result.id' } }, { type: 'return' }] },
      { id: 'sees', steps: [{ type: 'script', script: 's.js', function: 'price' }] },
      { id: 'text', steps: [{ type: 'return', value: "'hello ' + ctx.query.name" }] },
      { id: 'go', steps: [{ type: 'return', value: "'https://example.com/' + ctx.query.to" }] },
    ],
    [
      { path: 'wrapped', call: { script: 's.js', function: 'call' }, after: { automation: 'wrap' }, returnType: 'JSON' },
      { path: 'kept', call: { script: 's.js', function: 'call' }, after: { automation: 'keep' }, returnType: 'JSON' },
      { path: 'state-result', call: { script: 's.js', function: 'call' }, after: { automation: 'sees' }, returnType: 'JSON' },
      { path: 'text', call: { automation: 'text' }, returnType: 'Text' },
      { path: 'text-after', call: { script: 's.js', function: 'text' }, after: { automation: 'wrap' }, returnType: 'JSON' },
      { path: 'go', call: { automation: 'go' }, returnType: 'Redirect' },
    ],
  );

  test('after: the automation receives the result as state.result and its result replaces it', async () => {
    expect((await request(server).get('/web0/api/a/wrapped')).body).toEqual({ data: { id: 7, item: 'pen' }, by: 'wrap' });
    expect((await request(server).get('/web0/api/a/text-after')).body).toEqual({ data: 'from script', by: 'wrap' });
  });

  test('after: `return` without a value keeps the call’s result, as an after script returning nothing', async () => {
    expect((await request(server).get('/web0/api/a/kept')).body).toEqual({ id: 7, item: 'pen' });
  });

  test('after: a script step sees state.result too', async () => {
    const res = await request(server).get('/web0/api/a/state-result');
    expect(res.body).toMatchObject({ result: { id: 7, item: 'pen' } });
  });

  test('the call: its result goes through the return type (Text, Redirect)', async () => {
    const text = await request(server).get('/web0/api/a/text?name=Ada');
    expect(text.headers['content-type']).toMatch(/^text\/plain/);
    expect(text.text).toBe('hello Ada');
    const go = await request(server).get('/web0/api/a/go?to=docs').redirects(0);
    expect(go.status).toBe(302);
    expect(go.headers.location).toBe('https://example.com/docs');
  });
});

describe('vm2 engine', () => {
  const { app: server } = app(
    () => [{ id: 'v', steps: [{ type: 'set', vars: { qty: 3 } }, { id: 'p', type: 'script', script: 's.js', function: 'price' }, { type: 'return', value: 'state.steps.p.unit * state.vars.qty' }] }],
    [call('v')],
    { engine: 'vm2' },
  );
  test('script steps run the same way', async () => {
    expect((await request(server).get('/web0/api/a/v')).body).toBe(7.5);
  });
});
