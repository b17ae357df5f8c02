'use strict';
// Outbound HTTP client and address policy. Real servers on 127.0.0.1 (port 0) only; nothing
// here may reach a non-loopback destination: refusals are asserted to happen before connect.
const crypto = require('node:crypto');
const fs = require('node:fs');
const http = require('node:http');
const net = require('node:net');
const os = require('node:os');
const path = require('node:path');
const { OutboundClient } = require('../dist/cjs/outbound/client.js');
const { isBlockedAddress, addressBlockReason, hostAllowed, normalizeHost } = require('../dist/cjs/outbound/address-policy.js');

const servers = [];
const tmpDirs = [];

/** Starts an http server on 127.0.0.1:0; counts TCP connections. */
async function serve(handler) {
  const server = http.createServer(handler);
  const stats = { connections: 0, requests: 0 };
  server.on('connection', () => stats.connections++);
  server.on('request', () => stats.requests++);
  await new Promise((resolve) => server.listen(0, '127.0.0.1', resolve));
  servers.push(server);
  const { port } = server.address();
  return { server, port, url: `http://127.0.0.1:${port}`, stats };
}

function tmpDir() {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'sapi-outbound-'));
  tmpDirs.push(dir);
  return dir;
}

/** Resolves localhost and `*.test` names to 127.0.0.1 (no DNS); other names fail. */
const fakeResolve = async (host) => {
  if (host === 'localhost' || host.endsWith('.test') || host.endsWith('.test.internal')) return [{ address: '127.0.0.1', family: 4 }];
  throw Object.assign(new Error(`getaddrinfo ENOTFOUND ${host}`), { code: 'ENOTFOUND' });
};
/** Lets `public.test` through (it stands for a public host) and applies the real policy to the rest. */
const publicTestSeam = { resolve: fakeResolve, blockReason: (address, host) => (host === 'public.test' ? null : addressBlockReason(address)) };

async function rejection(promise) {
  try {
    await promise;
  } catch (err) {
    return err;
  }
  throw new Error('expected a rejection');
}

let connectSpy;
beforeEach(() => {
  connectSpy = jest.spyOn(net.Socket.prototype, 'connect');
});
afterEach(async () => {
  jest.restoreAllMocks();
  for (const s of servers.splice(0)) {
    s.closeAllConnections();
    await new Promise((resolve) => s.close(resolve));
  }
  for (const d of tmpDirs.splice(0)) fs.rmSync(d, { recursive: true, force: true });
});

describe('isBlockedAddress', () => {
  test.each([
    ['127.0.0.1', 'loopback'], ['127.255.255.254', 'loopback'], ['::1', 'loopback'], ['[::1]', 'loopback'],
    ['0.0.0.0', 'unspecified'], ['0.1.2.3', 'unspecified'], ['::', 'unspecified'],
    ['10.0.0.1', 'private'], ['172.16.0.1', 'private'], ['172.31.255.255', 'private'], ['192.168.1.1', 'private'],
    ['100.64.0.1', 'CGNAT'], ['100.127.255.255', 'CGNAT'],
    ['169.254.169.254', 'metadata'], ['169.254.1.1', 'link-local'], ['fe80::1', 'link-local'], ['fe80::1%eth0', 'link-local'], ['febf::1', 'link-local'],
    ['fc00::1', 'unique-local'], ['fd12:3456::1', 'unique-local'],
    ['224.0.0.1', 'multicast'], ['239.255.255.250', 'multicast'], ['ff02::1', 'multicast'], ['255.255.255.255', 'broadcast'], ['240.0.0.1', 'reserved'],
    ['::ffff:127.0.0.1', 'loopback address (IPv4-mapped'], ['::ffff:7f00:1', 'loopback address (IPv4-mapped'], ['::FFFF:10.0.0.1', 'private address (IPv4-mapped'],
    ['::ffff:169.254.169.254', 'metadata'], ['::127.0.0.1', 'IPv4-compatible'], ['::ffff:0:127.0.0.1', 'IPv4-translated'],
    ['64:ff9b::7f00:1', 'loopback address (NAT64'], ['64:ff9b::10.0.0.1', 'private address (NAT64'], ['64:ff9b::a9fe:a9fe', 'metadata'],
    ['2002:7f00:1::', 'loopback address (6to4'], ['2002:c0a8:101::1', 'private address (6to4'],
    ['2001:2::1', 'benchmarking'], ['2001:db8::1', 'documentation'], ['3fff::1', 'documentation'], ['3fff:fff:ffff::1', 'documentation'],
    ['2130706433', 'loopback'], ['0x7f.1', 'loopback'], ['127.1', 'loopback'], ['0177.0.0.1', 'loopback'], ['0x7f000001', 'loopback'],
    ['localhost', 'not a valid IP'], ['', 'not a valid IP'],
  ])('%s is blocked (%s)', (ip, reason) => {
    expect(isBlockedAddress(ip)).toBe(true);
    expect(addressBlockReason(ip)).toContain(reason);
  });

  test.each([
    '8.8.8.8', '1.1.1.1', '11.0.0.1', '172.15.255.255', '172.32.0.1', '100.63.255.255', '100.128.0.1', '192.169.0.1', '223.255.255.255',
    '2606:4700:4700::1111', '2a00:1450::1', '::ffff:8.8.8.8', '64:ff9b::8.8.8.8', '2002:808:808::1', '2001:2:1::1', '3fff:1000::1',
  ])('%s is allowed', (ip) => {
    expect(isBlockedAddress(ip)).toBe(false);
  });

  test('normalizeHost canonicalizes odd IPv4 spellings and IPv6', () => {
    expect(normalizeHost('2130706433')).toBe('127.0.0.1');
    expect(normalizeHost('0x7f.1')).toBe('127.0.0.1');
    expect(normalizeHost('127.1')).toBe('127.0.0.1');
    expect(normalizeHost('[::FFFF:127.0.0.1]')).toBe('::ffff:7f00:1');
    expect(normalizeHost('Example.COM')).toBe('example.com');
    expect(normalizeHost('evil.com/127.0.0.1')).toBeNull();
    expect(normalizeHost('a@b')).toBeNull();
  });
});

describe('hostAllowed', () => {
  test.each([
    ['api.example.com', ['api.example.com'], true],
    ['API.Example.com.', ['api.example.com'], true],
    ['other.example.com', ['api.example.com'], false],
    ['a.example.com', ['*.example.com'], true],
    ['a.b.example.com', ['*.example.com'], true],
    ['example.com', ['*.example.com'], false],
    ['evilexample.com', ['*.example.com'], false],
    ['example.com.evil.net', ['*.example.com', 'example.com'], false],
    ['127.0.0.1', ['*.0.0.1'], false],
    ['127.0.0.1', ['127.0.0.1'], true],
    ['::1', ['[::1]'], true],
    ['anything.net', undefined, true],
    ['anything.net', [], false],
  ])('%s with %j -> %s', (host, list, expected) => {
    expect(hostAllowed(host, list)).toBe(expected);
  });
});

describe('OutboundClient refuses private destinations before connecting', () => {
  test.each([
    ['http://127.0.0.1:PORT/', '127.0.0.1 is a loopback address'],
    ['http://[::1]:PORT/', '::1 is a loopback address'],
    ['http://0.0.0.0:PORT/', '0.0.0.0 is an unspecified address'],
    ['http://2130706433:PORT/', '127.0.0.1 is a loopback address'],
    ['http://0x7f.1:PORT/', '127.0.0.1 is a loopback address'],
    ['http://[::ffff:127.0.0.1]:PORT/', 'loopback address (IPv4-mapped'],
    ['http://169.254.169.254/latest/meta-data/', '169.254.169.254 is a link-local (cloud metadata) address'],
    ['http://10.0.0.1/', '10.0.0.1 is a private address'],
    ['https://192.168.1.1/', '192.168.1.1 is a private address'],
    ['http://[fd00::1]/', 'unique-local'],
  ])('%s', async (template, message) => {
    const { port, stats } = await serve((req, res) => res.end('reached'));
    const started = Date.now();
    const err = await rejection(new OutboundClient().request({ url: template.replace('PORT', String(port)) }));
    expect(err).toMatchObject({ name: 'ApiError', errorName: 'OUTBOUND_BLOCKED', code: 270500 });
    expect(err.message).toContain(message);
    expect(err.message).toContain('private networks are not allowed');
    expect(err.message).not.toMatch(/\n\s+at /);
    expect(Date.now() - started).toBeLessThan(500);
    expect(connectSpy).not.toHaveBeenCalled();
    expect(stats.connections).toBe(0);
  });

  test('localhost is refused after DNS, before the TCP connect', async () => {
    const { port, stats } = await serve((req, res) => res.end('reached'));
    const err = await rejection(new OutboundClient().request({ url: `http://localhost:${port}/` }));
    expect(err).toMatchObject({ errorName: 'OUTBOUND_BLOCKED' });
    expect(err.message).toBe('destination localhost resolves to a loopback address; private networks are not allowed');
    expect(stats.connections).toBe(0);
  });

  test('a name is refused when ANY of its addresses is private', async () => {
    const resolve = async () => [{ address: '93.184.216.34', family: 4 }, { address: '10.0.0.5', family: 4 }];
    const err = await rejection(new OutboundClient({ internal: { resolve } }).request({ url: 'http://mixed.example/' }));
    expect(err.errorName).toBe('OUTBOUND_BLOCKED');
    expect(err.message).toContain('mixed.example resolves to a private address');
    expect(err.message).not.toContain('10.0.0.5');
  });

  test('connects to the address that was checked (no second resolution)', async () => {
    const { port } = await serve((req, res) => res.end(`host=${req.headers.host}`));
    const resolve = jest.fn(fakeResolve);
    const client = new OutboundClient({ allowPrivateNetworks: true, internal: { resolve } });
    const res = await client.request({ url: `http://api.test:${port}/` });
    expect(await res.text()).toBe(`host=api.test:${port}`);
    expect(resolve).toHaveBeenCalledTimes(1);
  });

  test('non-http schemes are blocked, bad URLs fail', async () => {
    const client = new OutboundClient({ allowPrivateNetworks: true });
    for (const url of ['file:///etc/passwd', 'ftp://127.0.0.1/', 'gopher://127.0.0.1:70/']) {
      const err = await rejection(client.request({ url }));
      expect(err).toMatchObject({ errorName: 'OUTBOUND_BLOCKED' });
      expect(err.message).toContain('only http: and https:');
    }
    expect(await rejection(client.request({ url: 'not a url' }))).toMatchObject({ errorName: 'OUTBOUND_FAILED' });
    expect(connectSpy).not.toHaveBeenCalled();
  });
});

describe('redirects', () => {
  test('follows redirects (303 turns POST into GET without body)', async () => {
    const { url } = await serve((req, res) => {
      if (req.url === '/start') return res.writeHead(302, { location: '/middle' }).end();
      if (req.url === '/middle') return res.writeHead(303, { location: `${url}/end?x=1` }).end();
      let body = '';
      req.on('data', (c) => (body += c)).on('end', () => res.end(`${req.method} ${req.url} [${body}] ${req.headers['content-type'] ?? '-'}`));
    });
    const client = new OutboundClient({ allowPrivateNetworks: true });
    const res = await client.request({ url: `${url}/start`, method: 'POST', body: 'payload', headers: { 'content-type': 'text/plain' } });
    expect(res.status).toBe(200);
    expect(res.url).toBe(`${url}/end?x=1`);
    expect(await res.text()).toBe('GET /end?x=1 [] -');
  });

  test('307 keeps the method and body', async () => {
    const { url } = await serve((req, res) => {
      if (req.url === '/a') return res.writeHead(307, { location: '/b' }).end();
      let body = '';
      req.on('data', (c) => (body += c)).on('end', () => res.end(`${req.method} ${body}`));
    });
    const res = await new OutboundClient({ allowPrivateNetworks: true }).request({ url: `${url}/a`, method: 'PUT', body: 'again' });
    expect(await res.text()).toBe('PUT again');
  });

  test('stops after maxRedirects', async () => {
    const { url, stats } = await serve((req, res) => {
      const n = Number(req.url.slice(1));
      res.writeHead(302, { location: `/${n + 1}` }).end();
    });
    const client = new OutboundClient({ allowPrivateNetworks: true, maxRedirects: 3 });
    const err = await rejection(client.request({ url: `${url}/0` }));
    expect(err).toMatchObject({ errorName: 'OUTBOUND_FAILED' });
    expect(err.message).toContain('too many redirects (more than 3)');
    expect(stats.requests).toBe(4);
  });

  test('exactly maxRedirects redirects succeed', async () => {
    const { url } = await serve((req, res) => {
      const n = Number(req.url.slice(1));
      if (n < 3) res.writeHead(301, { location: `/${n + 1}` }).end();
      else res.end('arrived');
    });
    const res = await new OutboundClient({ allowPrivateNetworks: true, maxRedirects: 3 }).request({ url: `${url}/0` });
    expect(await res.text()).toBe('arrived');
  });

  test('a redirect from an allowed host to loopback is refused', async () => {
    const inner = await serve((req, res) => res.end('secret'));
    const outer = await serve((req, res) => res.writeHead(302, { location: `http://127.0.0.1:${inner.port}/admin` }).end());
    const client = new OutboundClient({ internal: publicTestSeam });
    const err = await rejection(client.request({ url: `http://public.test:${outer.port}/` }));
    expect(err).toMatchObject({ errorName: 'OUTBOUND_BLOCKED' });
    expect(err.message).toBe('destination 127.0.0.1 is a loopback address; private networks are not allowed');
    expect(outer.stats.requests).toBe(1);
    expect(inner.stats.connections).toBe(0);
  });

  test('a redirect to a name resolving to loopback, or to the metadata address, is refused', async () => {
    const outer = await serve((req, res) => {
      const to = req.url === '/meta' ? 'http://169.254.169.254/latest/' : `http://localhost:${outer.port}/`;
      res.writeHead(308, { location: to }).end();
    });
    const client = new OutboundClient({ internal: publicTestSeam });
    const meta = await rejection(client.request({ url: `http://public.test:${outer.port}/meta` }));
    expect(meta.message).toContain('169.254.169.254 is a link-local (cloud metadata) address');
    const local = await rejection(client.request({ url: `http://public.test:${outer.port}/local` }));
    expect(local.message).toContain('localhost resolves to a loopback address');
    expect(outer.stats.requests).toBe(2);
    // Only the two connections to public.test were made.
    expect(outer.stats.connections).toBe(2);
  });

  test('allowHosts is checked on every hop; credentials are dropped across origins', async () => {
    const inner = await serve((req, res) => res.end('inner'));
    const outer = await serve((req, res) => res.writeHead(302, { location: `http://127.0.0.1:${inner.port}/` }).end());
    const client = new OutboundClient({ allowPrivateNetworks: true, allowHosts: ['public.test'], internal: { resolve: fakeResolve } });
    const err = await rejection(client.request({ url: `http://public.test:${outer.port}/` }));
    expect(err).toMatchObject({ errorName: 'OUTBOUND_BLOCKED' });
    expect(err.message).toBe('destination 127.0.0.1 is not in allowHosts');
    expect(inner.stats.connections).toBe(0);

    const seen = await serve((req, res) => res.end(`${req.headers.authorization ?? 'none'} ${req.headers['x-keep']}`));
    const hop = await serve((req, res) => res.writeHead(302, { location: `http://b.test:${seen.port}/` }).end());
    const open = new OutboundClient({ allowPrivateNetworks: true, allowHosts: ['*.test'], internal: { resolve: fakeResolve } });
    const res = await open.request({ url: `http://a.test:${hop.port}/`, headers: { Authorization: 'Bearer t', 'X-Keep': 'yes' } });
    expect(await res.text()).toBe('none yes');
  });
});

describe('allowHosts', () => {
  test('exact names and *.domain patterns', async () => {
    const { port, stats } = await serve((req, res) => res.end('ok'));
    const client = new OutboundClient({ allowPrivateNetworks: true, allowHosts: ['*.test.internal', 'exact.test'], internal: { resolve: fakeResolve } });
    expect(await (await client.request({ url: `http://api.test.internal:${port}/` })).text()).toBe('ok');
    expect(await (await client.request({ url: `http://EXACT.test:${port}/` })).text()).toBe('ok');
    for (const host of ['other.test', 'test.internal', `127.0.0.1`]) {
      const err = await rejection(client.request({ url: `http://${host}:${port}/` }));
      expect(err).toMatchObject({ errorName: 'OUTBOUND_BLOCKED' });
      expect(err.message).toContain(`destination ${host} is not in allowHosts`);
    }
    expect(stats.requests).toBe(2);
  });
});

describe('requests and responses', () => {
  test('POST body and headers reach the server; forbidden headers are dropped', async () => {
    const { url, port } = await serve((req, res) => {
      const chunks = [];
      req.on('data', (c) => chunks.push(c)).on('end', () => {
        res.setHeader('x-multi', ['a', 'b']);
        res.setHeader('content-type', 'application/json');
        res.end(JSON.stringify({ method: req.method, headers: req.headers, body: Buffer.concat(chunks).toString() }));
      });
    });
    const client = new OutboundClient({ allowPrivateNetworks: true });
    const res = await client.request({
      url: `${url}/echo`, method: 'post', body: 'héllo',
      headers: { 'Content-Type': 'text/plain', 'X-Custom': 'v1', Host: 'evil.example', 'Content-Length': '1', 'Transfer-Encoding': 'chunked', Connection: 'close' },
    });
    expect(res.status).toBe(200);
    expect(res.headers['x-multi']).toBe('a, b');
    const echo = JSON.parse(await res.text());
    expect(echo.method).toBe('POST');
    expect(echo.body).toBe('héllo');
    expect(echo.headers).toMatchObject({
      'content-type': 'text/plain', 'x-custom': 'v1', host: `127.0.0.1:${port}`, 'content-length': String(Buffer.byteLength('héllo')), 'user-agent': 'scriptable-api',
    });
    expect(echo.headers['transfer-encoding']).toBeUndefined();

    const bytes = await client.request({ url, method: 'PUT', body: new Uint8Array([104, 105]), headers: { 'user-agent': 'mine' } });
    expect(JSON.parse(await bytes.text())).toMatchObject({ method: 'PUT', body: 'hi', headers: { 'user-agent': 'mine' } });
  });

  test('invalid header values are refused', async () => {
    const err = await rejection(new OutboundClient().request({ url: 'http://public.example/', headers: { 'x-bad': 'a\r\nb' } }));
    expect(err).toMatchObject({ errorName: 'OUTBOUND_FAILED' });
    expect(connectSpy).not.toHaveBeenCalled();
  });

  test('text() decodes the content-type charset', async () => {
    const { url } = await serve((req, res) => {
      res.setHeader('content-type', 'text/plain; charset=ISO-8859-1');
      res.end(Buffer.from([0x63, 0x61, 0x66, 0xe9]));
    });
    const res = await new OutboundClient({ allowPrivateNetworks: true }).request({ url });
    expect(await res.text()).toBe('café');
    expect(await res.text()).toBe('café');
  });

  test('connection refused is OUTBOUND_FAILED naming the host', async () => {
    const { port, server } = await serve(() => {});
    await new Promise((resolve) => server.close(resolve));
    const err = await rejection(new OutboundClient({ allowPrivateNetworks: true }).request({ url: `http://127.0.0.1:${port}/` }));
    expect(err).toMatchObject({ errorName: 'OUTBOUND_FAILED', code: 270501 });
    expect(err.message).toBe(`connection to 127.0.0.1:${port} was refused`);
  });

  test('an upstream that switches protocols unasked (101) fails the call at once (Node closes the request without an event)', async () => {
    const sockets = new Set();
    const server = net.createServer((socket) => {
      sockets.add(socket);
      socket.on('error', () => undefined);
      socket.once('data', () => socket.write('HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\r\nhello'));
    });
    await new Promise((resolve) => server.listen(0, '127.0.0.1', resolve));
    const { port } = server.address();
    const client = new OutboundClient({ allowPrivateNetworks: true, timeoutMs: 60_000 });
    try {
      let timer;
      const stuck = new Promise((resolve) => (timer = setTimeout(() => resolve('still waiting'), 10_000)));
      const err = await Promise.race([rejection(client.request({ url: `http://127.0.0.1:${port}/` })), stuck]);
      clearTimeout(timer);
      expect(err).toMatchObject({ errorName: 'OUTBOUND_FAILED', message: `connection to 127.0.0.1:${port} closed before the response` });
    } finally {
      client.close();
      for (const socket of sockets) socket.destroy();
      await new Promise((resolve) => server.close(resolve));
    }
  });

  test('discard() closes an unread body', async () => {
    const { url } = await serve((req, res) => res.end('x'.repeat(1000)));
    const res = await new OutboundClient({ allowPrivateNetworks: true }).request({ url });
    res.discard();
    expect(await rejection(res.text())).toMatchObject({ errorName: 'OUTBOUND_FAILED' });
  });
});

describe('timeouts', () => {
  test('no response in time', async () => {
    const { url } = await serve(() => {}); // never answers
    const started = Date.now();
    const err = await rejection(new OutboundClient({ allowPrivateNetworks: true, timeoutMs: 200 }).request({ url }));
    expect(err).toMatchObject({ errorName: 'OUTBOUND_FAILED' });
    expect(err.message).toMatch(/^request to 127\.0\.0\.1:\d+ timed out after 200 ms$/);
    expect(Date.now() - started).toBeLessThan(2000);
  });

  test('the deadline covers the body; a request may lower it', async () => {
    const { url } = await serve((req, res) => res.writeHead(200).write('partial')); // never ends
    const client = new OutboundClient({ allowPrivateNetworks: true, timeoutMs: 5000 });
    const started = Date.now();
    const res = await client.request({ url, timeoutMs: 150 });
    const err = await rejection(res.text());
    expect(err.message).toContain('timed out after 150 ms');
    expect(Date.now() - started).toBeLessThan(2000);
  });
});

describe('body size limit and saveTo', () => {
  const chunked = (total) => (req, res) => {
    res.writeHead(200, { 'content-type': 'application/octet-stream' });
    let sent = 0;
    const step = () => {
      while (sent < total) {
        const n = Math.min(64 * 1024, total - sent);
        sent += n;
        if (!res.write(Buffer.alloc(n, 'a'))) return res.once('drain', step);
      }
      res.end();
    };
    step();
  };

  test('text() past maxBodyBytes fails (chunked and declared length)', async () => {
    const { url } = await serve(chunked(3000));
    const client = new OutboundClient({ allowPrivateNetworks: true, maxBodyBytes: 1000 });
    const err = await rejection((await client.request({ url })).text());
    expect(err).toMatchObject({ errorName: 'OUTBOUND_FAILED' });
    expect(err.message).toContain('larger than 1000 bytes');

    const declared = await serve((req, res) => res.end('y'.repeat(2000)));
    const err2 = await rejection((await client.request({ url: declared.url })).text());
    expect(err2.message).toContain('larger than 1000 bytes');
  });

  test('a response that has no body (HEAD, 204, 304) is not refused for the Content-Length it declares', async () => {
    const { url, stats } = await serve((req, res) => {
      const status = req.url === '/304' ? 304 : req.url === '/204' ? 204 : 200;
      res.writeHead(status, { 'content-length': '50000000' }); // (a HEAD's is the size a GET would get)
      res.end();
    });
    const client = new OutboundClient({ allowPrivateNetworks: true, maxBodyBytes: 1000 });
    try {
      for (const [method, p, status] of [['HEAD', '/', 200], ['GET', '/204', 204], ['GET', '/304', 304]]) {
        const res = await client.request({ url: url + p, method });
        expect([res.status, res.headers['content-length'], await res.text()]).toEqual([status, '50000000', '']);
      }
      // the connection is kept: each body was complete
      expect(stats.connections).toBe(1);
    } finally {
      client.close();
    }
  });

  test('saveTo a file whose name is as long as the file system allows (255 bytes), streamed or read first', async () => {
    const { url } = await serve((req, res) => res.end('body'));
    const dir = tmpDir();
    const client = new OutboundClient({ allowPrivateNetworks: true });
    try {
      const name = 'n'.repeat(251) + '.txt';
      expect(await (await client.request({ url })).saveTo(path.join(dir, name))).toBe(4);
      const read = await client.request({ url });
      await read.text();
      expect(await read.saveTo(path.join(dir, name))).toBe(4);
      expect(fs.readdirSync(dir)).toEqual([name]);
    } finally {
      client.close();
    }
  });

  test('saveTo past maxBodyBytes leaves no file behind', async () => {
    const { url } = await serve(chunked(300 * 1024));
    const dir = tmpDir();
    const client = new OutboundClient({ allowPrivateNetworks: true, maxBodyBytes: 100 * 1024 });
    const res = await client.request({ url });
    const err = await rejection(res.saveTo(path.join(dir, 'big.bin')));
    expect(err).toMatchObject({ errorName: 'OUTBOUND_FAILED' });
    expect(err.message).toContain(`larger than ${100 * 1024} bytes`);
    expect(fs.readdirSync(dir)).toEqual([]);
  });

  test('saveTo streams a 5 MB body to disk', async () => {
    const size = 5 * 1024 * 1024;
    const payload = crypto.randomBytes(size);
    const { url } = await serve((req, res) => {
      res.writeHead(200, { 'content-type': 'application/octet-stream' });
      let off = 0;
      const step = () => {
        while (off < size) {
          const chunk = payload.subarray(off, off + 256 * 1024);
          off += chunk.length;
          if (!res.write(chunk)) return res.once('drain', step);
        }
        res.end();
      };
      step();
    });
    const dir = tmpDir();
    const dest = path.join(dir, 'download.bin');
    fs.writeFileSync(dest, 'old content'); // replaced atomically
    const res = await new OutboundClient({ allowPrivateNetworks: true }).request({ url });
    expect(await res.saveTo(dest)).toBe(size);
    expect(fs.readdirSync(dir)).toEqual(['download.bin']);
    const sha = (b) => crypto.createHash('sha256').update(b).digest('hex');
    expect(sha(fs.readFileSync(dest))).toBe(sha(payload));
    expect(await rejection(res.saveTo(path.join(dir, 'again.bin')))).toMatchObject({ errorName: 'OUTBOUND_FAILED' });
  });

  test('saveTo into a missing directory fails without leaking paths', async () => {
    const { url } = await serve((req, res) => res.end('data'));
    const dir = tmpDir();
    const res = await new OutboundClient({ allowPrivateNetworks: true }).request({ url });
    const err = await rejection(res.saveTo(path.join(dir, 'missing', 'x.bin')));
    expect(err).toMatchObject({ errorName: 'OUTBOUND_FAILED' });
    expect(err.message).not.toContain(dir);
  });
});

// Each request header is checked and set on the host's event loop, which every app shares: a
// script sending 100,000 of them (to any destination, even a refused one) held it for seconds.
describe('request headers are bounded', () => {
  const { MAX_REQUEST_HEADERS } = require('../dist/cjs/outbound/client.js');
  const many = (n) => Object.fromEntries(Array.from({ length: n }, (_, i) => [`x-h${i}`, 'v']));

  test('the client refuses more than MAX_REQUEST_HEADERS headers before connecting', async () => {
    expect(MAX_REQUEST_HEADERS).toBe(100);
    const err = await rejection(new OutboundClient().request({ url: 'http://public.example/', headers: many(101) }));
    expect(err).toMatchObject({ errorName: 'OUTBOUND_FAILED', message: 'too many request headers: at most 100 (101 given)' });
    expect(connectSpy).not.toHaveBeenCalled();
    const { url } = await serve((req, res) => res.end(String(Object.keys(req.headers).filter((k) => k.startsWith('x-h')).length)));
    const res = await new OutboundClient({ allowPrivateNetworks: true }).request({ url, headers: many(100) });
    expect(await res.text()).toBe('100');
  });

  // The host holds each request's head until the upstream reads it, outside the budget for bodies:
  // 32 requests of one call with a 1 MiB header (or URL) to an upstream not reading them raised
  // its RSS by about 170 MB.
  test('the client refuses a request whose method, URL and headers take more than MAX_REQUEST_HEAD_BYTES before connecting; one at the limit is sent', async () => {
    const { MAX_REQUEST_HEAD_BYTES } = require('../dist/cjs/outbound/client.js');
    expect(MAX_REQUEST_HEAD_BYTES).toBe(64 * 1024);
    const client = new OutboundClient({ allowPrivateNetworks: true });
    const big = 'v'.repeat(MAX_REQUEST_HEAD_BYTES);
    const tooLarge = { errorName: 'OUTBOUND_FAILED', message: expect.stringMatching(/^request head too large: at most 65536 bytes of method, URL and headers \(\d+ given\)$/) };
    expect(await rejection(client.request({ url: 'http://public.example/', headers: { 'x-big': big } }))).toMatchObject(tooLarge);
    expect(await rejection(client.request({ url: `http://public.example/?q=${big}` }))).toMatchObject(tooLarge);
    // a URL that long is refused before it is parsed (a million characters of it)
    expect(await rejection(client.request({ url: `http://public.example/?q=${'v'.repeat(1e6)}` }))).toMatchObject({ message: expect.stringContaining('(1000028 given)') }); // (GET, 25 + 1e6)
    // many headers just under the limit each, together over it
    const halves = { 'x-a': big.slice(0, 40000), 'x-b': big.slice(0, 40000) };
    expect(await rejection(client.request({ url: 'http://public.example/', headers: halves }))).toMatchObject(tooLarge);
    expect(connectSpy).not.toHaveBeenCalled();

    // (an upstream that takes large heads: the client sends one of 64 KiB whole)
    const server = http.createServer({ maxHeaderSize: 256 * 1024 }, (req, res) => res.end(`${req.url.length} ${(req.headers['x-fill'] ?? '').length}`));
    await new Promise((resolve) => server.listen(0, '127.0.0.1', resolve));
    servers.push(server);
    const url = `http://127.0.0.1:${server.address().port}/`;
    const fill = MAX_REQUEST_HEAD_BYTES - 'GET'.length - url.length - 'x-fill'.length;
    expect(await (await client.request({ url, headers: { 'x-fill': 'v'.repeat(fill) } })).text()).toBe(`1 ${fill}`);
    expect(await rejection(client.request({ url, headers: { 'x-fill': 'v'.repeat(fill + 1) } }))).toMatchObject(tooLarge);
    client.close();
  });

  test.each(['quickjs', 'vm2'])('%s: a script whose request carries more than 64 KiB of URL and headers gets OUTBOUND_FAILED; nothing is sent', async (engine) => {
    const request = require('supertest');
    const { makeApp } = require('./helpers/app');
    const up = await serve((req, res) => res.end('reached'));
    const { app, router } = makeApp({
      router: { engine, outbound: { allowPrivateNetworks: true } },
      apps: {
        a: {
          scripts: {
            'm.js': `export function fn(ctx) {
              var v = 'v'; while (v.length < Number(ctx.query.n)) v += v;
              var opts = ctx.query.in === 'url' ? { url: ctx.query.url + '?q=' + v } : { url: ctx.query.url, headers: { 'x-big': v } };
              try { return { sent: platform.http.request(opts).text() } }
              catch (e) { return { name: e.name, code: e.code, message: e.message } }
            }`,
          },
          apis: [{ path: 'p', call: { script: 'm.js', function: 'fn' }, returnType: 'JSON' }],
        },
      },
    });
    try {
      for (const where of ['header', 'url']) {
        const over = await request(app).get('/web0/api/a/p').query({ n: 1 << 20, url: up.url, in: where });
        expect([where, over.body]).toEqual([where, { name: 'ApiError', code: 270501, message: expect.stringMatching(/^request head too large: at most 65536 bytes of method, URL and headers/) }]);
      }
      expect(up.stats.connections).toBe(0);
      const ok = await request(app).get('/web0/api/a/p').query({ n: 1024, url: up.url, in: 'header' });
      expect(ok.body).toEqual({ sent: 'reached' });
    } finally {
      await router.close();
    }
  }, 60_000);

  test.each(['quickjs', 'vm2'])('%s: a script sending more than 100 headers gets OUTBOUND_FAILED at once; 100 are sent', async (engine) => {
    const request = require('supertest');
    const { makeApp } = require('./helpers/app');
    const { url } = await serve((req, res) => res.end(String(Object.keys(req.headers).filter((k) => k.startsWith('x-h')).length)));
    const { app, router } = makeApp({
      router: { engine, outbound: { allowPrivateNetworks: true } },
      apps: {
        a: {
          scripts: {
            'm.js': `export function fn(ctx) {
              var h = {};
              for (var i = 0; i < Number(ctx.query.n); i++) h['x-h' + i] = 'v';
              try { return { sent: platform.http.request({ url: ctx.query.url, headers: h }).text() } }
              catch (e) { return { name: e.name, code: e.code, message: e.message } }
            }`,
          },
          apis: [{ path: 'p', call: { script: 'm.js', function: 'fn' }, returnType: 'JSON' }],
        },
      },
    });
    try {
      const over = await request(app).get('/web0/api/a/p').query({ n: 100000, url: 'http://127.0.0.1:1/' });
      expect(over.body).toEqual({ name: 'ApiError', code: 270501, message: 'too many request headers: at most 100' });
      const ok = await request(app).get('/web0/api/a/p').query({ n: 100, url });
      expect(ok.body).toEqual({ sent: '100' });
    } finally {
      await router.close();
    }
  }, 60_000);
});
