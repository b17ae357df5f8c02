'use strict';
// The standalone server (`scriptable-api serve`, startServer) at the connection level, with raw
// sockets: requests Node.js's HTTP parser refuses, pipelining, a request without Host.
const fs = require('node:fs');
const http = require('node:http');
const net = require('node:net');
const os = require('node:os');
const path = require('node:path');
const { startServer } = require('../dist/cjs/cli/serve');

const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'sapi-conn-'));
function write(rel, content) {
  const file = path.join(tmp, rel);
  fs.mkdirSync(path.dirname(file), { recursive: true });
  fs.writeFileSync(file, typeof content === 'string' ? content : JSON.stringify(content));
}
write('apps/demo/apis/hello.json', { path: 'hello', call: { script: 'main.js', function: 'hello' }, returnType: 'Text' });
write('apps/demo/apis/echo.json', { path: 'echo', call: { script: 'main.js', function: 'echo' }, returnType: 'Text', methods: ['POST'] });
write('apps/demo/apis/slow.json', { path: 'slow', call: { script: 'main.js', function: 'slow' }, returnType: 'Text' });
write('apps/demo/scripts/main.js', `
export function hello(ctx) { return 'hello ' + (ctx.query.name || 'world') }
export function echo(ctx) { return 'echo:' + ctx.body }
// waits on the test's upstream: in flight until the test lets the upstream answer
export function slow(ctx) { return 'slow:' + platform.http.request({ url: ctx.query.upstream }).text() }
`);

const silent = { debug() {}, info() {}, warn() {}, error() {} };
let running;
let port;
beforeAll(async () => {
  running = await startServer(
    { root: path.join(tmp, 'apps'), port: 0, host: '127.0.0.1', mount: '/web0/api', index: true, quiet: true, shutdownTimeoutMs: 30000, router: { workers: 1, outbound: { allowPrivateNetworks: true } } },
    silent,
  );
  port = running.server.address().port;
  await running.router.ready();
});
afterAll(async () => {
  await running?.shutdown();
  fs.rmSync(tmp, { recursive: true, force: true });
});

/** Writes `data` on a new connection; resolves with everything read once the server closes it. */
function exchange(data, { onConnect } = {}) {
  return new Promise((resolve, reject) => {
    const socket = net.connect(port, '127.0.0.1');
    let read = Buffer.alloc(0);
    const timer = setTimeout(() => {
      socket.destroy();
      reject(new Error(`connection still open after 20 s; read: ${JSON.stringify(read.toString('latin1'))}`));
    }, 20000);
    socket.on('connect', () => {
      socket.write(data);
      onConnect?.(socket);
    });
    socket.on('data', (d) => (read = Buffer.concat([read, d])));
    socket.on('error', () => undefined);
    socket.on('close', () => {
      clearTimeout(timer);
      resolve(read.toString('latin1'));
    });
  });
}

/** Splits what a connection read into responses (each with a Content-Length). */
function responses(text) {
  const out = [];
  let rest = text;
  while (rest.length > 0) {
    const end = rest.indexOf('\r\n\r\n');
    if (end < 0) throw new Error(`not a response: ${JSON.stringify(rest)}`);
    const [statusLine, ...lines] = rest.slice(0, end).split('\r\n');
    const headers = {};
    for (const line of lines) {
      const i = line.indexOf(':');
      headers[line.slice(0, i).toLowerCase()] = line.slice(i + 1).trim();
    }
    const length = Number(headers['content-length'] ?? NaN);
    if (!Number.isInteger(length)) throw new Error(`no Content-Length: ${JSON.stringify(rest)}`);
    const body = rest.slice(end + 4, end + 4 + length);
    out.push({ status: Number(statusLine.split(' ')[1]), headers, body });
    rest = rest.slice(end + 4 + length);
  }
  return out;
}

function expectErrorBody(res, status, code) {
  expect(res.status).toBe(status);
  expect(res.headers['content-type']).toBe('application/json;charset=UTF-8');
  expect(res.headers.connection).toBe('close');
  expect(JSON.parse(res.body)).toEqual({ requestId: res.headers['x-request-id'], code, message: expect.any(String) });
  expect(res.headers['x-request-id']).toMatch(/^[0-9a-f-]{36}$/);
}

const HELLO = '/web0/api/demo/hello';
const refused = {
  'a request line that is not one': 'GARBAGE\r\n\r\n',
  'a lowercase method': `get ${HELLO} HTTP/1.1\r\nHost: x\r\n\r\n`,
  'an unknown method': `FOO ${HELLO} HTTP/1.1\r\nHost: x\r\n\r\n`,
  'a control character in the target': `GET ${HELLO}\x01 HTTP/1.1\r\nHost: x\r\n\r\n`,
  'a byte >= 0x80 in the target': `GET ${HELLO}\xe9 HTTP/1.1\r\nHost: x\r\n\r\n`,
  'an unknown HTTP version': `GET ${HELLO} HTTP/1.2\r\nHost: x\r\n\r\n`,
  'an invalid header name': `GET ${HELLO} HTTP/1.1\r\nHost: x\r\nBad Name: 1\r\n\r\n`,
  'an invalid header value': `GET ${HELLO} HTTP/1.1\r\nHost: x\r\nX-A: a\x01b\r\n\r\n`,
  'Content-Length with Transfer-Encoding': 'POST /web0/api/demo/echo HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n',
  'two Content-Lengths': 'POST /web0/api/demo/echo HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\nContent-Length: 6\r\n\r\nhello',
  'a bad chunk size': 'POST /web0/api/demo/echo HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\nZZ\r\nhello\r\n0\r\n\r\n',
  'the HTTP/2 preface': 'PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n',
};

test.each(Object.entries(refused))('%s: 400 with the JSON error body (BAD_REQUEST), then the connection closes', async (_name, request) => {
  const [res, ...more] = responses(await exchange(request));
  expectErrorBody(res, 400, 270103);
  expect(more).toEqual([]);
});

test('headers over the size limit: 431 with the JSON error body (HEADERS_TOO_LARGE), then the connection closes', async () => {
  const [res, ...more] = responses(await exchange(`GET ${HELLO} HTTP/1.1\r\nHost: x\r\nX-Big: ${'a'.repeat(20000)}\r\n\r\n`));
  expectErrorBody(res, 431, 270106);
  expect(JSON.parse(res.body).message).toBe('Request header fields too large');
  expect(more).toEqual([]);
});

test("headers that do not arrive within headersTimeout: 408 with the JSON error body (REQUEST_TIMEOUT), then the connection closes", async () => {
  // (the server's own handler on a server whose timeouts are short: Node.js checks them every
  // connectionsCheckingInterval, 30 s by default, which only a new server can change)
  const { clientErrorHandler } = require('../dist/cjs/cli/client-error');
  const server = http.createServer({ connectionsCheckingInterval: 50, headersTimeout: 300, requestTimeout: 600 }, (_req, res) => res.end('x'));
  server.on('clientError', clientErrorHandler(() => []));
  await new Promise((r) => server.listen(0, '127.0.0.1', r));
  try {
    const read = await new Promise((resolve, reject) => {
      const socket = net.connect(server.address().port, '127.0.0.1', () => socket.write(`GET ${HELLO} HTTP/1.1\r\nHost: x\r\n`));
      let text = '';
      socket.on('data', (d) => (text += d.toString('latin1')));
      socket.on('error', reject);
      socket.on('close', () => resolve(text));
    });
    const [res, ...more] = responses(read);
    expectErrorBody(res, 408, 270107);
    expect(JSON.parse(res.body).message).toBe('The request did not arrive in time');
    expect(more).toEqual([]);
  } finally {
    server.close();
  }
});

test('a bad request pipelined after a slow one: the slow one gets its own answer first, then the error', async () => {
  let release;
  let onArrival;
  const arrived = new Promise((resolve) => (onArrival = resolve));
  const upstream = http.createServer((req, res) => {
    release = () => res.end('released');
    onArrival();
  });
  await new Promise((r) => upstream.listen(0, '127.0.0.1', r));
  try {
    const url = encodeURIComponent(`http://127.0.0.1:${upstream.address().port}/`);
    const read = exchange(`GET /web0/api/demo/slow?upstream=${url} HTTP/1.1\r\nHost: x\r\n\r\nGARBAGE\r\n\r\n`);
    await arrived; // the first request's script waits on the upstream; the parser has refused the second
    release();
    const [first, second, ...more] = responses(await read);
    expect(first.status).toBe(200);
    expect(first.body).toBe('slow:released');
    expectErrorBody(second, 400, 270103);
    expect(more).toEqual([]);
  } finally {
    upstream.closeAllConnections();
    upstream.close();
  }
});

test('headers too large pipelined after a good request: its answer, then the 431', async () => {
  const [first, second, ...more] = responses(await exchange(`GET ${HELLO}?name=a HTTP/1.1\r\nHost: x\r\n\r\nGET ${HELLO} HTTP/1.1\r\nHost: x\r\nX-Big: ${'a'.repeat(20000)}\r\n\r\n`));
  expect(first).toMatchObject({ status: 200, body: 'hello a' });
  expectErrorBody(second, 431, 270106);
  expect(more).toEqual([]);
});

test('pipelined requests, a slow one first: answered in order with their own bodies', async () => {
  let release;
  let onArrival;
  const arrived = new Promise((resolve) => (onArrival = resolve));
  const upstream = http.createServer((req, res) => {
    release = () => res.end('first');
    onArrival();
  });
  await new Promise((r) => upstream.listen(0, '127.0.0.1', r));
  try {
    const url = encodeURIComponent(`http://127.0.0.1:${upstream.address().port}/`);
    const read = exchange(
      `GET /web0/api/demo/slow?upstream=${url} HTTP/1.1\r\nHost: x\r\n\r\n` +
        `GET ${HELLO}?name=two HTTP/1.1\r\nHost: x\r\n\r\n` +
        'POST /web0/api/demo/echo HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\n\r\nthree' +
        `GET ${HELLO}?name=four HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n`,
    );
    await arrived;
    release();
    expect(responses(await read).map((r) => [r.status, r.body])).toEqual([
      [200, 'slow:first'],
      [200, 'hello two'],
      [200, 'echo:three'],
      [200, 'hello four'],
    ]);
  } finally {
    upstream.closeAllConnections();
    upstream.close();
  }
});

test('an HTTP/1.1 request without Host: 400 with the JSON error body, then the connection closes; HTTP/1.0 needs none', async () => {
  const [res, ...more] = responses(await exchange(`GET ${HELLO} HTTP/1.1\r\n\r\nGET ${HELLO}?name=next HTTP/1.1\r\nHost: x\r\n\r\n`));
  expectErrorBody(res, 400, 270103);
  expect(JSON.parse(res.body).message).toBe('An HTTP/1.1 request needs a Host header');
  expect(more).toEqual([]);
  const [old] = responses(await exchange(`GET ${HELLO} HTTP/1.0\r\n\r\n`));
  expect(old).toMatchObject({ status: 200, body: 'hello world' });
});

test('shutdown closes a connection that never sent a byte (a preconnect) at once, not after shutdownTimeoutMs', async () => {
  const own = await startServer(
    { root: path.join(tmp, 'apps'), port: 0, host: '127.0.0.1', mount: '/web0/api', index: true, quiet: true, shutdownTimeoutMs: 20000, router: { workers: 1 } },
    silent,
  );
  const accepted = new Promise((resolve) => own.server.once('connection', resolve));
  const socket = net.connect(own.server.address().port, '127.0.0.1');
  socket.on('error', () => undefined);
  const closed = new Promise((resolve) => socket.once('close', resolve));
  await accepted;
  const stopped = own.shutdown();
  const first = await Promise.race([stopped.then(() => 'stopped'), new Promise((r) => setTimeout(() => r('still stopping after 10 s'), 10000).unref())]);
  expect(first).toBe('stopped');
  await closed;
  await stopped;
}, 30000);

test('a CONNECT request (this is no proxy): 400 with the JSON error body after the answers before it, then the connection closes', async () => {
  const [alone, ...more] = responses(await exchange('CONNECT example.com:443 HTTP/1.1\r\nHost: example.com:443\r\n\r\n'));
  expectErrorBody(alone, 400, 270103);
  expect(more).toEqual([]);
  const [first, second, ...rest] = responses(await exchange(`GET ${HELLO}?name=a HTTP/1.1\r\nHost: x\r\n\r\nCONNECT example.com:443 HTTP/1.1\r\nHost: example.com:443\r\n\r\n`));
  expect(first).toMatchObject({ status: 200, body: 'hello a' });
  expectErrorBody(second, 400, 270103);
  expect(rest).toEqual([]);
});

test('a request with two Host headers (RFC 9112 3.2: the server must refuse it): 400 with the JSON error body, then the connection closes', async () => {
  const [res, ...more] = responses(await exchange(`GET ${HELLO} HTTP/1.1\r\nHost: api.example.com\r\nHost: evil.example\r\n\r\nGET ${HELLO}?name=next HTTP/1.1\r\nHost: x\r\n\r\n`));
  expectErrorBody(res, 400, 270103);
  expect(JSON.parse(res.body).message).toBe('A request may have only one Host header');
  expect(more).toEqual([]);
  // (one Host, and HTTP/1.0 without one, are served)
  const [one] = responses(await exchange(`GET ${HELLO}?name=one HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n`));
  expect(one).toMatchObject({ status: 200, body: 'hello one' });
});

test('an Expect the server cannot meet (not 100-continue): 417 with the JSON error body; the script does not run', async () => {
  const [res, ...more] = responses(await exchange('POST /web0/api/demo/echo HTTP/1.1\r\nHost: x\r\nExpect: 200-ok\r\nContent-Length: 5\r\n\r\nhello'));
  expect(res.status).toBe(417);
  expect(res.headers['content-type']).toBe('application/json;charset=UTF-8');
  expect(JSON.parse(res.body)).toEqual({ requestId: res.headers['x-request-id'], code: 270109, message: "Expectation '200-ok' cannot be met (only 100-continue is)" });
  expect(more).toEqual([]);
  // (100-continue is met: the body is asked for and read)
  const [cont, echoed] = responses(await exchange('POST /web0/api/demo/echo HTTP/1.1\r\nHost: x\r\nExpect: 100-continue\r\nContent-Length: 5\r\nConnection: close\r\n\r\nhello').then((t) => t.replace('HTTP/1.1 100 Continue\r\n\r\n', 'HTTP/1.1 100 Continue\r\nContent-Length: 0\r\n\r\n')));
  expect(cont.status).toBe(100);
  expect(echoed).toMatchObject({ status: 200, body: 'echo:hello' });
});

test.each(['a b', 'x/y', 'a@b', 'evil.example/reset?', '[::1', 'h:99999', 'h:abc', 'h:80:81', 'h\tx', '\u00e9'])(
  'a Host that is no host[:port] (%j, RFC 9112 3.2): 400 with the JSON error body, then the connection closes',
  async (host) => {
    const [res, ...more] = responses(await exchange(Buffer.from(`GET ${HELLO} HTTP/1.1\r\nHost: ${host}\r\n\r\nGET ${HELLO}?name=next HTTP/1.1\r\nHost: x\r\n\r\n`, 'latin1')));
    expectErrorBody(res, 400, 270103);
    expect(JSON.parse(res.body).message).toBe('The Host header is not a host and port');
    expect(more).toEqual([]);
  },
);

test.each(['api.example.com', 'api.example.com:8080', '127.0.0.1:1', '[::1]:8080', '[::ffff:127.0.0.1]', '[fe80::1%25eth0]:80', 'h:', "a!$&'()*+,;=%2e-_~b"])('a Host of the URI grammar (%j) is served', async (host) => {
  const [res, ...more] = responses(await exchange(`GET ${HELLO}?name=ok HTTP/1.1\r\nHost: ${host}\r\nConnection: close\r\n\r\n`));
  expect(res).toMatchObject({ status: 200, body: 'hello ok' });
  expect(more).toEqual([]);
});

describe('requestTimeoutMs (a config key): the time a request has to arrive, headers and body', () => {
  let slow;
  let slowPort;
  beforeAll(async () => {
    slow = await startServer({ root: path.join(tmp, 'apps'), port: 0, host: '127.0.0.1', mount: '/web0/api', index: true, quiet: true, shutdownTimeoutMs: 5000, requestTimeoutMs: 1000, router: { workers: 1 } }, silent);
    slowPort = slow.server.address().port;
  });
  afterAll(() => slow?.shutdown());

  test('a body still arriving past it: 408 with the JSON error body (REQUEST_TIMEOUT), then the connection closes; one in time is served', async () => {
    const started = Date.now();
    const text = await new Promise((resolve) => {
      const socket = net.connect(slowPort, '127.0.0.1', () => socket.write('POST /web0/api/demo/echo HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\nhello'));
      let read = '';
      socket.on('data', (d) => (read += d.toString('latin1')));
      socket.on('error', () => undefined);
      socket.on('close', () => resolve(read));
    });
    const [res, ...more] = responses(text);
    expectErrorBody(res, 408, 270107);
    expect(more).toEqual([]);
    // (Node.js checks the limit a few times within it here: well before its default check every 30 s)
    expect(Date.now() - started).toBeGreaterThanOrEqual(900);
    expect(Date.now() - started).toBeLessThan(15000);
    const ok = await new Promise((resolve) => {
      const socket = net.connect(slowPort, '127.0.0.1', () => socket.write('POST /web0/api/demo/echo HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\nConnection: close\r\n\r\nhello'));
      let read = '';
      socket.on('data', (d) => (read += d.toString('latin1')));
      socket.on('close', () => resolve(read));
    });
    expect(responses(ok)[0]).toMatchObject({ status: 200, body: 'echo:hello' });
  });
});
