'use strict';
// Kept-alive outbound connections: reused between calls, checked on every connection (DNS
// rebinding and redirects still refused on a warm pool), closed by router.close(); and the
// response body arriving with `platform.http.request` instead of in a second host call.
// Real servers on loopback (port 0) only.
const http = require('node:http');
const request = require('supertest');
const { OutboundClient } = require('../dist/cjs/outbound/client.js');
const { createAgents } = require('../dist/cjs/outbound/connections.js');
const { addressBlockReason } = require('../dist/cjs/outbound/address-policy.js');
const { HostServices } = require('../dist/cjs/host/services.js');
const { makeApp, oneApi } = require('./helpers/app');

const servers = [];

/** An http server on `host`:`port` (0: any); counts TCP connections and requests. */
async function serve(handler, host = '127.0.0.1', port = 0) {
  const server = http.createServer(handler);
  const stats = { connections: 0, requests: 0, open: new Set() };
  server.on('connection', (socket) => {
    stats.connections++;
    stats.open.add(socket);
    socket.on('close', () => stats.open.delete(socket));
  });
  server.on('request', () => stats.requests++);
  await new Promise((resolve, reject) => {
    server.once('error', reject);
    server.listen(port, host, resolve);
  });
  servers.push(server);
  return { server, port: server.address().port, url: `http://${host}:${server.address().port}`, stats };
}

/**
 * Resolves once a temporary file (`*.tmp`, a save under way) in folder `dir` holds bytes; rejects
 * when `answered` (the call's answer) settles first.
 */
function firstBytesIn(dir, answered) {
  const fs = require('node:fs');
  const path = require('node:path');
  return new Promise((resolve, reject) => {
    const check = setInterval(() => {
      const tmp = fs.existsSync(dir) ? fs.readdirSync(dir).find((f) => f.endsWith('.tmp')) : undefined;
      if (tmp && fs.statSync(path.join(dir, tmp)).size > 0) {
        clearInterval(check);
        resolve();
      }
    }, 10);
    answered.then(
      (r) => reject(new Error(`answered before the file had its first bytes: ${r.status} ${r.text}`)),
      reject,
    ).finally(() => clearInterval(check));
  });
}

async function rejection(promise) {
  try {
    await promise;
  } catch (err) {
    return err;
  }
  throw new Error('expected a rejection');
}

afterEach(async () => {
  jest.restoreAllMocks();
  for (const s of servers.splice(0)) {
    s.closeAllConnections();
    await new Promise((resolve) => s.close(resolve));
  }
});

describe('OutboundClient keeps connections alive', () => {
  test('sequential calls to one upstream share one connection', async () => {
    const up = await serve((req, res) => res.end(`call ${req.url}`));
    const client = new OutboundClient({ allowPrivateNetworks: true });
    for (let i = 0; i < 10; i++) expect(await (await client.request({ url: `${up.url}/${i}` })).text()).toBe(`call /${i}`);
    expect(up.stats.requests).toBe(10);
    expect(up.stats.connections).toBe(1);
    client.close();
  });

  test('concurrent calls open connections that later calls reuse', async () => {
    const up = await serve((req, res) => setTimeout(() => res.end('ok'), 20));
    const client = new OutboundClient({ allowPrivateNetworks: true });
    const burst = () => Promise.all(Array.from({ length: 8 }, async () => (await client.request({ url: up.url })).text()));
    expect(await burst()).toEqual(Array(8).fill('ok'));
    const opened = up.stats.connections;
    expect(opened).toBeGreaterThanOrEqual(1);
    expect(opened).toBeLessThanOrEqual(8);
    expect(await burst()).toEqual(Array(8).fill('ok'));
    expect(up.stats.requests).toBe(16);
    expect(up.stats.connections).toBe(opened);
    client.close();
  });

  /** An upstream that drops a kept connection as the next request arrives on it (an idle timeout racing a reuse). */
  async function droppingReuse() {
    let drop = false;
    const seen = new WeakSet();
    const up = await serve((req, res) => {
      const reused = seen.has(req.socket);
      seen.add(req.socket);
      if (reused && drop) {
        drop = false;
        req.socket.destroy(); // (no answer: the client sees the reset)
        return;
      }
      res.end(`${req.method} ${req.url}`);
    });
    return { up, dropNext: () => (drop = true) };
  }

  test('an idempotent call on a kept connection the upstream just closed is sent again on a new one', async () => {
    const { up, dropNext } = await droppingReuse();
    const client = new OutboundClient({ allowPrivateNetworks: true });
    expect(await (await client.request({ url: `${up.url}/a` })).text()).toBe('GET /a');
    dropNext();
    expect(await (await client.request({ url: `${up.url}/b`, method: 'PUT', body: 'x' })).text()).toBe('PUT /b');
    expect(up.stats.requests).toBe(3); // (the dropped one, then the same call again)
    expect(up.stats.connections).toBe(2);
    client.close();
  });

  test('a POST on a kept connection the upstream just closed fails: it may have been received', async () => {
    const { up, dropNext } = await droppingReuse();
    const client = new OutboundClient({ allowPrivateNetworks: true });
    expect(await (await client.request({ url: `${up.url}/a` })).text()).toBe('GET /a');
    dropNext();
    const err = await rejection(client.request({ url: `${up.url}/b`, method: 'POST', body: 'x' }));
    expect(err.code).toBe(270501); // OUTBOUND_FAILED
    expect(err.message).toMatch(/connection to 127\.0\.0\.1:\d+ was reset before the response/);
    expect(up.stats.requests).toBe(2);
    client.close();
  });

  test('a kept connection reset while the body arrives fails the read and sends nothing again (no orphan connection)', async () => {
    const seen = new WeakSet();
    const urls = [];
    let answering;
    const up = await serve((req, res) => {
      urls.push(req.url);
      const reused = seen.has(req.socket);
      seen.add(req.socket);
      if (!reused) return res.end('ok');
      // the head and part of the body; reset once the client has the response
      res.writeHead(200, { 'content-length': '100' });
      res.write('0123456789');
      answering = req.socket;
    });
    const client = new OutboundClient({ allowPrivateNetworks: true });
    expect(await (await client.request({ url: `${up.url}/a` })).text()).toBe('ok');
    const res = await client.request({ url: `${up.url}/b` }); // (on the kept connection)
    answering.resetAndDestroy();
    const err = await rejection(res.text());
    expect(err.code).toBe(270501); // OUTBOUND_FAILED
    expect(err.message).toMatch(/was reset while reading the body/);
    // The request was not sent again: no connection is in use or being opened for it. (It was,
    // and its answer, never read, held that connection past the deadline and close().)
    expect(Object.values(client.agents.http.sockets).flat()).toHaveLength(0);
    expect(await (await client.request({ url: `${up.url}/c` })).text()).toBe('ok');
    client.close();
    await Promise.all([...up.stats.open].map((s) => new Promise((resolve) => s.once('close', resolve))));
    expect(urls).toEqual(['/a', '/b', '/c']);
  });

  test('close() closes the idle connections', async () => {
    const up = await serve((req, res) => res.end('ok'));
    const client = new OutboundClient({ allowPrivateNetworks: true });
    await (await client.request({ url: up.url })).text();
    expect(up.stats.open.size).toBe(1);
    const [socket] = up.stats.open;
    const closed = new Promise((resolve) => socket.once('close', resolve));
    client.close();
    await closed;
    expect(up.stats.open.size).toBe(0);
  });
});

describe('every connection of a warm pool is checked', () => {
  test('DNS rebinding: a name that now resolves to loopback gets no new connection', async () => {
    // 127.0.0.1 stands for the name's public address; 127.0.0.2 is where it rebinds to.
    const up = await serve((req, res) => setTimeout(() => res.end('public'), 50));
    let rebound = null;
    try {
      rebound = await serve((req, res) => res.end('private'), '127.0.0.2', up.port);
    } catch (err) {
      if (err.code !== 'EADDRNOTAVAIL') throw err; // a system without 127.0.0.0/8 on loopback
    }
    let answer = '127.0.0.1';
    const resolve = jest.fn(async () => [{ address: answer, family: 4 }]);
    const blockReason = (address) => (address === '127.0.0.1' ? null : addressBlockReason(address));
    const client = new OutboundClient({ internal: { resolve, blockReason } });
    const url = `http://rebind.test:${up.port}/`;
    for (let i = 0; i < 3; i++) expect(await (await client.request({ url })).text()).toBe('public');
    expect(resolve).toHaveBeenCalledTimes(1);
    expect(up.stats.connections).toBe(1);

    answer = '127.0.0.2';
    // Two at once: one takes the kept connection (to the address checked before), the other
    // needs a new connection, resolves the name again and is refused.
    const [kept, fresh] = await Promise.allSettled([client.request({ url }), client.request({ url })]);
    expect(await kept.value.text()).toBe('public');
    expect(fresh.reason).toMatchObject({ errorName: 'OUTBOUND_BLOCKED', code: 270500 });
    // (the script learns what kind of address the name led to, not the address: no map of the host's network)
    expect(fresh.reason.message).toBe('destination rebind.test resolves to a loopback address; private networks are not allowed');
    expect(fresh.reason.message).not.toContain('127.0.0.2');
    expect(resolve).toHaveBeenCalledTimes(2);
    expect(up.stats.connections).toBe(1);
    if (rebound) expect(rebound.stats.connections).toBe(0);
    client.close();
  });

  test('a redirect into a private network is refused on a warm pool', async () => {
    const inner = await serve((req, res) => res.end('secret'));
    const outer = await serve((req, res) => {
      if (req.url === '/to-ip') return res.writeHead(302, { location: `http://127.0.0.1:${inner.port}/admin` }).end();
      if (req.url === '/to-name') return res.writeHead(302, { location: `http://localhost:${inner.port}/admin` }).end();
      res.end('public');
    });
    const resolve = async () => [{ address: '127.0.0.1', family: 4 }];
    const client = new OutboundClient({ internal: { resolve, blockReason: (address, host) => (host === 'public.test' ? null : addressBlockReason(address)) } });
    const base = `http://public.test:${outer.port}`;
    for (let i = 0; i < 3; i++) expect(await (await client.request({ url: `${base}/` })).text()).toBe('public');
    expect(outer.stats.connections).toBe(1);

    const toIp = await rejection(client.request({ url: `${base}/to-ip` }));
    expect(toIp).toMatchObject({ errorName: 'OUTBOUND_BLOCKED' });
    expect(toIp.message).toBe('destination 127.0.0.1 is a loopback address; private networks are not allowed');
    const toName = await rejection(client.request({ url: `${base}/to-name` }));
    expect(toName.message).toBe('destination localhost resolves to a loopback address; private networks are not allowed');
    expect(inner.stats.connections).toBe(0);
    // the pool still serves the allowed host
    expect(await (await client.request({ url: `${base}/` })).text()).toBe('public');
    client.close();
  });

  test('the connect-time check refuses a socket before it sends the request', async () => {
    const up = await serve((req, res) => res.end('reached'));
    const agents = createAgents((address, host) => {
      throw Object.assign(new Error(`refused ${host} at ${address}`), { code: 'TEST_REFUSED' });
    });
    const err = await new Promise((resolve) => {
      const req = http.request({ host: '127.0.0.1', port: up.port, agent: agents.http }, () => resolve(new Error('answered')));
      req.on('error', resolve);
      req.end();
    });
    expect(err.message).toBe('refused 127.0.0.1 at 127.0.0.1');
    expect(up.stats.requests).toBe(0);
    agents.http.close();
  });
});

describe('platform.http.request through the router', () => {
  const SCRIPT = `export function fn(ctx) {
    const out = [];
    for (let i = 0; i < 4; i++) {
      const res = platform.http.request({ url: ctx.query.url + '/json?i=' + i });
      out.push({ status: res.status, body: res.body, text: res.text() === res.body, n: res.json().i });
    }
    return out;
  }`;

  test('the body comes with the response (one host call per request) and connections are reused', async () => {
    const up = await serve((req, res) => {
      res.setHeader('content-type', 'application/json');
      res.end(JSON.stringify({ i: Number(new URL(req.url, 'http://x').searchParams.get('i')) }));
    });
    const calls = jest.spyOn(HostServices.prototype, 'call');
    const { app, router } = oneApi(SCRIPT, {}, { outbound: { allowPrivateNetworks: true } });
    try {
      for (let r = 0; r < 3; r++) {
        const res = await request(app).get('/web0/api/app1/p').query({ url: up.url });
        expect(res.status).toBe(200);
        expect(res.body).toEqual([0, 1, 2, 3].map((i) => ({ status: 200, body: `{"i":${i}}`, text: true, n: i })));
      }
      expect(calls.mock.calls.map(([op]) => op)).toEqual(Array(12).fill('http.request'));
      expect(up.stats.requests).toBe(12);
      expect(up.stats.connections).toBe(1);
      // router.close() closes the kept connection
      const [socket] = up.stats.open;
      const closed = new Promise((resolve) => socket.once('close', resolve));
      await router.close();
      await closed;
    } finally {
      await router.close();
    }
  });

  test('a body the host could not read fails when the script reads it, not before', async () => {
    const up = await serve((req, res) => res.end('x'.repeat(500)));
    const script = `export function fn(ctx) {
      const res = platform.http.request({ url: ctx.query.url });
      const out = { status: res.status };
      for (const read of [() => res.body, () => res.text(), () => res.json()]) {
        try { read(); out.read = true; } catch (e) { (out.codes ??= []).push(e.code); }
      }
      return out;
    }`;
    const { app, router } = oneApi(script, {}, { outbound: { allowPrivateNetworks: true, maxBodyBytes: 100 } });
    try {
      const res = await request(app).get('/web0/api/app1/p').query({ url: up.url });
      expect(res.body).toEqual({ status: 200, codes: [270501, 270501, 270501] });
    } finally {
      await router.close();
    }
  });
});

describe('large bodies', () => {
  test('a body over 1 MiB crosses into the script only when read; saveBodyAsFile writes it', async () => {
    const fs = require('node:fs');
    const os = require('node:os');
    const path = require('node:path');
    const big = Buffer.alloc(2 * 1024 * 1024 + 5, 'b');
    const up = await serve((req, res) => res.end(big));
    const sandboxDir = fs.mkdtempSync(path.join(os.tmpdir(), 'sapi-outbound-big-'));
    const script = `export function fn(ctx) {
      const res = platform.http.request({ url: ctx.query.url });
      if (ctx.query.save) return res.saveBodyAsFile('big.bin');
      return { length: res.body.length, again: res.text().length };
    }`;
    const calls = jest.spyOn(HostServices.prototype, 'call');
    const { app, router } = oneApi(script, {}, { sandboxDir, outbound: { allowPrivateNetworks: true } });
    try {
      const read = await request(app).get('/web0/api/app1/p').query({ url: up.url });
      expect(read.body).toEqual({ length: big.length, again: big.length });
      expect(calls.mock.calls.map(([op]) => op)).toEqual(['http.request', 'http.body']);
      const saved = await request(app).get('/web0/api/app1/p').query({ url: up.url, save: '1' });
      expect(saved.body).toEqual({ path: 'big.bin', size: big.length });
      expect(fs.readFileSync(path.join(sandboxDir, 'app1', 'big.bin')).equals(big)).toBe(true);
    } finally {
      await router.close();
      fs.rmSync(sandboxDir, { recursive: true, force: true });
    }
  });

  test('a body declared over 1 MiB is not read ahead: saveBodyAsFile streams it to its file as it arrives, never held whole', async () => {
    const fs = require('node:fs');
    const os = require('node:os');
    const path = require('node:path');
    const MiB = 1024 * 1024;
    const SIZE = 64 * MiB;
    // 4 MiB at once, the rest once the file holds the first bytes: a host that read the body whole
    // before the script could save it would wait for good
    let sendRest;
    const rest = new Promise((resolve) => (sendRest = resolve));
    const up = await serve(async (req, res) => {
      res.writeHead(200, { 'content-length': SIZE });
      res.write(Buffer.alloc(4 * MiB, 'a'));
      await rest;
      for (let sent = 4 * MiB; sent < SIZE; sent += 4 * MiB) if (!res.write(Buffer.alloc(4 * MiB, 'b'))) await new Promise((r) => res.once('drain', r));
      res.end();
    });
    const sandboxDir = fs.mkdtempSync(path.join(os.tmpdir(), 'sapi-outbound-stream-'));
    const script = `export function fn(ctx) {
      return platform.http.request({ url: ctx.query.url }).saveBodyAsFile('dl/big.bin');
    }`;
    // (limits that let the host read the whole body into memory, were it to)
    const { app, router } = oneApi(script, {}, { sandboxDir, outbound: { allowPrivateNetworks: true, maxBodyBytes: 128 * MiB, maxBufferedBytes: 512 * MiB } });
    const dir = path.join(sandboxDir, 'app1', 'dl');
    try {
      const answer = request(app).get('/web0/api/app1/p').query({ url: up.url });
      const done = answer.then((r) => r);
      await firstBytesIn(dir, done);
      sendRest();
      const res = await done;
      expect(res.body).toEqual({ path: 'dl/big.bin', size: SIZE });
      expect(fs.statSync(path.join(dir, 'big.bin')).size).toBe(SIZE);
    } finally {
      sendRest();
      await router.close();
      fs.rmSync(sandboxDir, { recursive: true, force: true });
    }
  });

  test('a body of no declared length is read ahead only to past 1 MiB: saveBodyAsFile streams the rest as it arrives; a read takes it whole', async () => {
    const fs = require('node:fs');
    const os = require('node:os');
    const path = require('node:path');
    const MiB = 1024 * 1024;
    // chunked: 3 MiB at once, the rest (61 MiB) once the file holds more than the first 3 MiB
    let sendRest;
    const rest = new Promise((resolve) => (sendRest = resolve));
    const part = (i) => Buffer.alloc(MiB, i % 251);
    const up = await serve(async (req, res) => {
      res.writeHead(200, { 'content-type': 'application/octet-stream' });
      for (let i = 0; i < 3; i++) res.write(part(i));
      if (req.url === '/wait') await rest;
      for (let i = 3; i < (req.url === '/wait' ? 64 : 6); i++) if (!res.write(part(i))) await new Promise((r) => res.once('drain', r));
      res.end();
    });
    const sandboxDir = fs.mkdtempSync(path.join(os.tmpdir(), 'sapi-outbound-chunked-'));
    const script = `export function fn(ctx) {
      const res = platform.http.request({ url: ctx.query.url });
      if (ctx.query.read) { const b = res.body; return { length: b.length, again: res.text().length, firsts: [0, 1, 2, 3, 4, 5].map((i) => b.charCodeAt(i * 1048576)), last: b.charCodeAt(b.length - 1) }; }
      return res.saveBodyAsFile('dl/big.bin');
    }`;
    // (limits that let the host read the whole body into memory, were it to)
    const { app, router } = oneApi(script, {}, { sandboxDir, outbound: { allowPrivateNetworks: true, maxBodyBytes: 128 * MiB, maxBufferedBytes: 512 * MiB } });
    const dir = path.join(sandboxDir, 'app1', 'dl');
    try {
      const done = request(app).get('/web0/api/app1/p').query({ url: `${up.url}/wait` }).then((r) => r);
      await firstBytesIn(dir, done);
      sendRest();
      expect((await done).body).toEqual({ path: 'dl/big.bin', size: 64 * MiB });
      const saved = fs.readFileSync(path.join(dir, 'big.bin'));
      for (const i of [0, 1, 2, 3, 40, 63]) expect(saved.subarray(i * MiB, (i + 1) * MiB).equals(part(i))).toBe(true);
      // read (6 MiB): the part read ahead and the rest, whole, in order
      const read = await request(app).get('/web0/api/app1/p').query({ url: `${up.url}/now`, read: '1' });
      expect(read.body).toEqual({ length: 6 * MiB, again: 6 * MiB, firsts: [0, 1, 2, 3, 4, 5], last: 5 });
    } finally {
      sendRest();
      await router.close();
      fs.rmSync(sandboxDir, { recursive: true, force: true });
    }
  });

  test('a body of no declared length that fails once read ahead fails its read and its save with 270501', async () => {
    const fs = require('node:fs');
    const os = require('node:os');
    const path = require('node:path');
    const MiB = 1024 * 1024;
    // chunked: 1.5 MiB, then the connection is cut (after the host read ahead past 1 MiB)
    const up = await serve((req, res) => {
      res.writeHead(200);
      res.write(Buffer.alloc(1.5 * MiB, 'x'), () => setTimeout(() => res.socket.destroy(), 50));
    });
    const sandboxDir = fs.mkdtempSync(path.join(os.tmpdir(), 'sapi-outbound-cut-'));
    const script = `export function fn(ctx) {
      const res = platform.http.request({ url: ctx.query.url });
      const tryIt = (f) => { try { return f(); } catch (e) { return e.code; } };
      return { save: tryIt(() => res.saveBodyAsFile('cut.bin')), read: tryIt(() => res.body.length) };
    }`;
    const { app, router } = oneApi(script, {}, { sandboxDir, outbound: { allowPrivateNetworks: true } });
    try {
      const res = await request(app).get('/web0/api/app1/p').query({ url: up.url });
      expect(res.body).toEqual({ save: 270501, read: 270501 });
      expect(fs.readdirSync(path.join(sandboxDir, 'app1'))).toEqual([]);
    } finally {
      await router.close();
      fs.rmSync(sandboxDir, { recursive: true, force: true });
    }
  });

  test.each(['quickjs', 'vm2'])("a body larger than a script's memory can hold fails its read with 270501 naming saveBodyAsFile (%s); one that fits is read", async (engine) => {
    const MiB = 1024 * 1024;
    // 24 MiB of bytes that are no UTF-8 (each a U+FFFD): past a 64 MiB script's memory as it crosses; 8 MiB of ASCII fits
    const up = await serve((req, res) => {
      if (req.url !== '/declared') return res.end(Buffer.alloc(req.url === '/big' ? 24 * MiB : 8 * MiB, req.url === '/big' ? 0xc8 : 0x61));
      res.writeHead(200, { 'content-length': 48 * MiB });
      res.write('a');
    });
    const script = `export function fn(ctx) {
      const res = platform.http.request({ url: ctx.query.url });
      try { return { length: res.body.length }; } catch (e) { return { code: e.code, message: e.message }; }
    }`;
    const { app, router } = oneApi(script, {}, { engine, outbound: { allowPrivateNetworks: true, maxBodyBytes: 128 * MiB, maxBufferedBytes: 512 * MiB } });
    try {
      const big = await request(app).get('/web0/api/app1/p').query({ url: `${up.url}/big` });
      expect(big.body).toEqual({ code: 270501, message: expect.stringMatching(/^response body from 127\.0\.0\.1:\d+ is 25165824 characters: more than a script's memory \(scriptMemoryLimitMb: 64\) holds; stream it to a file with saveBodyAsFile$/) });
      const fits = await request(app).get('/web0/api/app1/p').query({ url: `${up.url}/fits` });
      expect(fits.body).toEqual({ length: 8 * MiB });
      // a length declared past what any text of it could fit: refused at once, nothing of it read
      // (this upstream sends a byte of its 48 MiB, then nothing)
      const declared = await request(app).get('/web0/api/app1/p').query({ url: `${up.url}/declared` });
      expect(declared.body).toEqual({ code: 270501, message: expect.stringMatching(/^response body from 127\.0\.0\.1:\d+ is 50331648 bytes: more than a script's memory \(scriptMemoryLimitMb: 64\) holds; stream it to a file with saveBodyAsFile$/) });
    } finally {
      await router.close();
    }
  });

  test("with a WorkerPool of one's own, a body's read is checked against the pool's memoryLimitMb (the router's scriptMemoryLimitMb cannot be set beside it)", async () => {
    const { WorkerPool } = require('..');
    const MiB = 1024 * 1024;
    // 40 MiB of ASCII: past what a 64 MiB script holds, within a 128 MiB one; 30 MiB that are no UTF-8 (each a U+FFFD): past 128 MiB
    const up = await serve((req, res) => res.end(Buffer.alloc(req.url === '/big' ? 30 * MiB : 40 * MiB, req.url === '/big' ? 0xc8 : 0x61)));
    const script = `export function fn(ctx) {
      const res = platform.http.request({ url: ctx.query.url });
      try { return { length: res.body.length }; } catch (e) { return { code: e.code, message: e.message }; }
    }`;
    const pool = new WorkerPool({ size: 1, memoryLimitMb: 128 });
    const { app, router } = oneApi(script, {}, { engine: pool, outbound: { allowPrivateNetworks: true, maxBodyBytes: 128 * MiB, maxBufferedBytes: 512 * MiB, timeoutMs: 60_000 } });
    try {
      const fits = await request(app).get('/web0/api/app1/p').query({ url: `${up.url}/fits` });
      expect(fits.body).toEqual({ length: 40 * MiB });
      const big = await request(app).get('/web0/api/app1/p').query({ url: `${up.url}/big` });
      expect(big.body).toEqual({ code: 270501, message: expect.stringMatching(/^response body from 127\.0\.0\.1:\d+ is 31457280 characters: more than a script's memory \(the WorkerPool's memoryLimitMb: 128\) holds; stream it to a file with saveBodyAsFile$/) });
    } finally {
      await router.close();
      await pool.close();
    }
  }, 60_000);

  test('saveBodyAsFile answers the path as stored (normalized); a response no longer held makes no folder', async () => {
    const fs = require('node:fs');
    const os = require('node:os');
    const path = require('node:path');
    const up = await serve((req, res) => res.end('body'));
    const sandboxDir = fs.mkdtempSync(path.join(os.tmpdir(), 'sapi-outbound-save-'));
    const script = `export function fn(ctx) {
      const res = platform.http.request({ url: ctx.query.url });
      return { saved: res.saveBodyAsFile('./dl//a.txt') };
    }`;
    const { app, router } = oneApi(script, {}, { sandboxDir, outbound: { allowPrivateNetworks: true } });
    try {
      const res = await request(app).get('/web0/api/app1/p').query({ url: up.url });
      expect(res.body).toEqual({ saved: { path: 'dl/a.txt', size: 4 } });
      expect(fs.readFileSync(path.join(sandboxDir, 'app1', 'dl', 'a.txt'), 'utf8')).toBe('body');
      // an id the call does not hold: refused before any folder is made
      const services = new HostServices({ options: { sandboxDir }, logger: undefined, files: {} }, { appId: 'app1', requestId: 'r', parts: [] });
      await expect(services.call('http.saveBodyAsFile', { id: '99', path: 'never/made/x.bin' })).rejects.toThrow('That response body is no longer available');
      expect(fs.existsSync(path.join(sandboxDir, 'app1', 'never'))).toBe(false);
    } finally {
      await router.close();
      fs.rmSync(sandboxDir, { recursive: true, force: true });
    }
  });
});

describe('router.close() and saveBodyAsFile', () => {
  test('close({ force: true }) while saveBodyAsFile streams: its temporary file is gone from the sandbox when close() resolves', async () => {
    const fs = require('node:fs');
    const os = require('node:os');
    const path = require('node:path');
    const MiB = 1024 * 1024;
    // 2 MiB declared (more than comes with a response: saveBodyAsFile streams it), 256 KiB sent, then nothing
    const up = await serve((req, res) => {
      res.writeHead(200, { 'content-length': 2 * MiB });
      res.write(Buffer.alloc(256 * 1024, 's'));
    });
    const sandboxDir = fs.mkdtempSync(path.join(os.tmpdir(), 'sapi-outbound-close-'));
    const script = `export function fn(ctx) {
      return platform.http.request({ url: ctx.query.url }).saveBodyAsFile('dl/x.bin');
    }`;
    const { app, router } = oneApi(script, {}, { sandboxDir, scriptTimeoutMs: 30_000, outbound: { allowPrivateNetworks: true, timeoutMs: 30_000 } });
    const dir = path.join(sandboxDir, 'app1', 'dl');
    try {
      const answer = request(app).get('/web0/api/app1/p').query({ url: up.url }).then((r) => r, (e) => e);
      // (the temporary file holds the bytes sent so far)
      await firstBytesIn(dir, answer);
      await router.close({ force: true });
      expect(fs.readdirSync(dir)).toEqual([]);
      expect((await answer).status).toBe(503);
    } finally {
      await router.close();
      fs.rmSync(sandboxDir, { recursive: true, force: true });
    }
  });
});

describe('how many responses a call holds', () => {
  test('a call has at most 32 requests at once, counting those whose body is still arriving', async () => {
    // '/': headers at once, then a byte every 100 ms, never the end; '/fast': answered at once
    let open = 0;
    let most = 0;
    const up = await serve((req, res) => {
      if (req.url === '/fast') return res.end('f');
      most = Math.max(most, ++open);
      res.on('close', () => open--);
      res.writeHead(200, { 'content-type': 'text/plain' });
      const trickle = setInterval(() => res.write('x'), 100);
      res.on('close', () => clearInterval(trickle));
    });
    // a request in the background for each of 80 requests one after another
    const script = `
      async function slow(url, st) { try { platform.http.request({ url }); st.done++ } catch (e) { st.refused++ } }
      export async function fn(ctx) {
        const st = { done: 0, refused: 0 };
        const pending = [];
        for (let i = 0; i < 80; i++) {
          pending.push(slow(ctx.query.url + '/', st));
          try { platform.http.request({ url: ctx.query.url + '/fast' }) } catch (e) {}
        }
        await Promise.all(pending);
        return st;
      }`;
    const { app, router } = oneApi(script, {}, { outbound: { allowPrivateNetworks: true, timeoutMs: 1500 } });
    try {
      const res = await request(app).get('/web0/api/app1/p').query({ url: up.url });
      expect(res.status).toBe(200);
      expect(res.body.done + res.body.refused).toBe(80);
      expect(res.body.refused).toBeGreaterThan(0);
      expect(most).toBeLessThanOrEqual(32);
    } finally {
      await router.close();
    }
  });

  test('a body saveBodyAsFile streams to its file counts among the 32 at once', async () => {
    // '/big': 1 MiB at once; '/gate': answered when the test opens it; '/': 1 MiB declared, then a
    // byte every 100 ms
    let open = 0;
    let most = 0;
    let openGate;
    const gate = new Promise((resolve) => (openGate = resolve));
    const up = await serve((req, res) => {
      if (req.url === '/big') return res.end(Buffer.alloc(1024 * 1024));
      if (req.url === '/gate') return void gate.then(() => res.end('go'));
      most = Math.max(most, ++open);
      res.on('close', () => open--);
      res.writeHead(200, { 'content-length': String(1024 * 1024) });
      res.flushHeaders();
      const trickle = setInterval(() => res.write('x'), 100);
      res.on('close', () => clearInterval(trickle));
    });
    const fs = require('node:fs');
    const os = require('node:os');
    const path = require('node:path');
    const sandboxDir = fs.mkdtempSync(path.join(os.tmpdir(), 'sapi-outbound-saving-'));
    // 'hold' spends the router's budget for bodies and waits at the gate: the bodies of 'p' are
    // left unread, so saveBodyAsFile streams each from its connection; 'p' saves 3 x 32 of them
    const { app, router } = makeApp({
      router: { sandboxDir, outbound: { allowPrivateNetworks: true, timeoutMs: 3000, maxBodyBytes: 1024 * 1024, maxBufferedBytes: 1024 * 1024 } },
      apps: {
        app1: {
          scripts: {
            'hold.js': `export function fn(ctx) { const n = platform.http.request({ url: ctx.query.url + '/big' }).body.length; platform.http.request({ url: ctx.query.url + '/gate' }); return n }`,
            'main.js': `export async function fn(ctx) {
              const saves = [];
              for (let w = 0; w < 3; w++) {
                const rs = [];
                for (let i = 0; i < 32; i++) { try { rs.push(platform.http.request({ url: ctx.query.url + '/' })) } catch (e) {} }
                saves.push(Promise.allSettled(rs.map(async (r, i) => r.saveBodyAsFile('w' + w + '-' + i))));
              }
              return (await Promise.all(saves)).flat().length;
            }`,
          },
          apis: [
            { path: 'hold', call: { script: 'hold.js', function: 'fn' }, returnType: 'JSON' },
            { path: 'p', call: { script: 'main.js', function: 'fn' }, returnType: 'JSON' },
          ],
        },
      },
    });
    try {
      const held = request(app).get('/web0/api/app1/hold').query({ url: up.url }).then(() => undefined);
      while (!up.stats.open.size || up.stats.requests < 2) await new Promise((r) => setTimeout(r, 20)); // (at the gate: /big then /gate)
      const res = await request(app).get('/web0/api/app1/p').query({ url: up.url });
      expect(res.status).toBe(200);
      expect(most).toBeLessThanOrEqual(32);
      openGate();
      await held;
    } finally {
      openGate();
      await router.close();
      fs.rmSync(sandboxDir, { recursive: true, force: true });
    }
  });

  test('a call may make any number of requests one after another; it keeps the last 32 responses', async () => {
    const fs = require('node:fs');
    const os = require('node:os');
    const path = require('node:path');
    const up = await serve((req, res) => {
      res.setHeader('content-type', 'application/json');
      res.end(JSON.stringify({ page: Number(new URL(req.url, 'http://x').searchParams.get('p')) }));
    });
    const sandboxDir = fs.mkdtempSync(path.join(os.tmpdir(), 'sapi-outbound-held-'));
    const script = `export function fn(ctx) {
      const rs = [];
      for (let i = 0; i < 40; i++) rs.push(platform.http.request(ctx.query.url + '/?p=' + i));
      const save = (r) => { try { return r.saveBodyAsFile('p.json').size } catch (e) { return e.code + ' ' + e.message } };
      return { pages: rs.map((r) => r.json().page), first: save(rs[0]), last: save(rs[39]), eighth: save(rs[8]), seventh: save(rs[7]) };
    }`;
    const { app, router } = oneApi(script, {}, { sandboxDir, outbound: { allowPrivateNetworks: true } });
    try {
      const res = await request(app).get('/web0/api/app1/p').query({ url: up.url });
      expect(res.body).toEqual({
        pages: Array.from({ length: 40 }, (_, i) => i), // (bodies that came with their response stay readable)
        first: '270501 That response body is no longer available',
        last: 11,
        eighth: 10,
        seventh: '270501 That response body is no longer available',
      });
    } finally {
      await router.close();
      fs.rmSync(sandboxDir, { recursive: true, force: true });
    }
  });
});

describe('outbound requests at once', () => {
  test('32 requests in flight in one call print no warning on the host (each listens for the end of its call)', async () => {
    const { execFile } = require('node:child_process');
    const path = require('node:path');
    const { stdout, stderr } = await new Promise((resolve, reject) =>
      execFile(process.execPath, [path.join(__dirname, 'helpers', 'outbound-burst.js')], { timeout: 60_000 }, (err, out, errOut) => (err ? reject(err) : resolve({ stdout: out, stderr: errOut }))),
    );
    expect(stdout).toBe('200 32\n');
    expect(stderr).not.toMatch(/MaxListenersExceededWarning/);
  }, 70_000);
});

describe('outbound calls end with the call that made them', () => {
  /** Resolves when the upstream's request `req` closes, or with 'still open' after `ms`. */
  const closedWithin = (req, ms) =>
    new Promise((resolve) => {
      const timer = setTimeout(() => resolve('still open'), ms);
      req.socket.once('close', () => {
        clearTimeout(timer);
        resolve('closed');
      });
    });

  test('an upstream still answering when the script times out is disconnected then, not at the outbound timeout', async () => {
    let arrived;
    const requests = new Promise((resolve) => (arrived = resolve));
    const up = await serve((req, res) => {
      res.writeHead(200, { 'content-type': 'text/plain' });
      res.write('x'); // a slow upstream: headers and a first byte, then nothing
      arrived(req);
    });
    const script = `export function fn(ctx) { return { n: platform.http.request({ url: ctx.query.url }).body.length } }`;
    const { app, router } = oneApi(script, {}, { scriptTimeoutMs: 1000, outbound: { allowPrivateNetworks: true, timeoutMs: 60_000 } });
    try {
      const res = await request(app).get('/web0/api/app1/p').query({ url: up.url });
      expect(res.body.code).toBe(270200);
      expect(await closedWithin(await requests, 10_000)).toBe('closed');
    } finally {
      await router.close();
    }
  });

  /**
   * A raw upstream that answers `200 ok` as soon as it has the request's head and then stops
   * reading: a POST body larger than the socket buffers (8 MiB) does not finish going out. `first`
   * resolves with the first connection's socket; `drained(socket)` reads what the host sent,
   * then tells whether the host closed that connection (a connection the host still holds, its
   * body sent at last, goes back to its pool and stays open).
   */
  async function answersWithoutReading() {
    const net = require('node:net');
    const sockets = [];
    let arrived;
    const first = new Promise((resolve) => (arrived = resolve));
    const server = net.createServer((socket) => {
      sockets.push(socket);
      socket.on('error', () => undefined);
      let head = '';
      const onData = (chunk) => {
        head += chunk.toString('latin1');
        if (!head.includes('\r\n\r\n')) return;
        socket.removeListener('data', onData);
        socket.pause();
        socket.write('HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok');
        arrived(socket);
      };
      socket.on('data', onData);
    });
    await new Promise((resolve) => server.listen(0, '127.0.0.1', resolve));
    servers.push({ closeAllConnections: () => sockets.forEach((s) => s.destroy()), close: (cb) => server.close(cb) });
    const drained = (socket) => {
      socket.resume();
      return closedWithin({ socket }, 10_000);
    };
    return { url: `http://127.0.0.1:${server.address().port}/`, first, drained };
  }

  test('OutboundClient: an answer read whole while the request body is still going out closes its connection', async () => {
    const up = await answersWithoutReading();
    const client = new OutboundClient({ allowPrivateNetworks: true, timeoutMs: 60_000 });
    try {
      const res = await client.request({ url: up.url, method: 'POST', body: 'x'.repeat(8 * 1024 * 1024) });
      expect(await res.text()).toBe('ok');
      // (the upstream does not read the rest: kept, the connection and the body would be held for good)
      expect(await up.drained(await up.first)).toBe('closed');
    } finally {
      client.close();
    }
  });

  test.each(['quickjs', 'vm2'])('%s: a POST whose upstream answered without reading the body holds no connection past its call', async (engine) => {
    const up = await answersWithoutReading();
    const script = `export function fn(ctx) { const r = platform.http.request({ url: ctx.query.url, method: 'POST', body: 'x'.repeat(8 * 1024 * 1024) }); return { status: r.status, body: r.body } }`;
    const { app, router } = oneApi(script, {}, { engine, scriptTimeoutMs: 30_000, outbound: { allowPrivateNetworks: true, timeoutMs: 60_000 } });
    try {
      const res = await request(app).get('/web0/api/app1/p').query({ url: up.url });
      expect(res.body).toEqual({ status: 200, body: 'ok' });
      expect(await up.drained(await up.first)).toBe('closed');
    } finally {
      await router.close();
    }
  }, 60_000);

  test('OutboundClient: a signal aborted while the body arrives closes the connection (270501)', async () => {
    let arrived;
    const requests = new Promise((resolve) => (arrived = resolve));
    const up = await serve((req, res) => {
      res.writeHead(200);
      res.write('x');
      arrived(req);
    });
    const client = new OutboundClient({ allowPrivateNetworks: true, timeoutMs: 60_000 });
    const ended = new AbortController();
    try {
      const res = await client.request({ url: up.url, signal: ended.signal });
      const body = res.text();
      const req = await requests;
      ended.abort();
      const err = await rejection(body);
      expect(err).toMatchObject({ code: 270501, message: expect.stringMatching(/cancelled/) });
      expect(await closedWithin(req, 10_000)).toBe('closed');
      // an aborted signal: nothing is sent
      expect(await rejection(client.request({ url: up.url, signal: ended.signal }))).toMatchObject({ code: 270501 });
      expect(up.stats.requests).toBe(1);
    } finally {
      client.close();
    }
  });
});

describe('outbound requests open at once per app (outbound.maxRequestsPerApp)', () => {
  const SCRIPT = `export async function fn(ctx) {
    const n = Number(ctx.query.n);
    const one = async () => { try { return platform.http.request({ url: ctx.query.url }).status } catch (e) { return e.code } };
    return Promise.all(Array.from({ length: n }, one));
  }`;

  test.each(['quickjs', 'vm2'])('%s: past the cap an app\'s requests fail with 270501 while another app\'s go through; answered ones count no more', async (engine) => {
    // '/': held until released; the first three of app1 fill its cap
    const held = [];
    let arrived;
    let waiting = 3;
    const filled = new Promise((resolve) => (arrived = resolve));
    const up = await serve((req, res) => {
      held.push(res);
      if (--waiting === 0) arrived();
    });
    const apis = [{ path: 'p', call: { script: 'main.js', function: 'fn' }, returnType: 'JSON' }];
    const { app, router } = makeApp({
      router: { engine, outbound: { allowPrivateNetworks: true, maxRequestsPerApp: 3 } },
      apps: { app1: { scripts: { 'main.js': SCRIPT }, apis }, app2: { scripts: { 'main.js': SCRIPT }, apis } },
    });
    try {
      const first = request(app).get('/web0/api/app1/p').query({ url: up.url, n: 3 }).then((r) => r);
      await filled;
      // app1 has 3 open: a 4th is refused at once; app2 is not held back by app1's
      const refused = await request(app).get('/web0/api/app1/p').query({ url: up.url, n: 1 });
      expect(refused.body).toEqual([270501]);
      waiting = 1;
      const other = request(app).get('/web0/api/app2/p').query({ url: up.url, n: 1 }).then((r) => r);
      await new Promise((resolve) => (arrived = resolve));
      for (const res of held.splice(0)) res.end('ok');
      expect((await first).body).toEqual([200, 200, 200]);
      expect((await other).body).toEqual([200]);
      // the answered requests gave their places back (their bodies came with them)
      const up2 = await serve((req, res) => res.end('ok'));
      expect((await request(app).get('/web0/api/app1/p').query({ url: up2.url, n: 3 })).body).toEqual([200, 200, 200]);
    } finally {
      for (const res of held) res.end();
      await router.close();
    }
  });

  test('maxRequestsPerApp must be a positive integer', () => {
    const { ConfigError, createApiRouter, MemoryRegistry } = require('..');
    for (const bad of [0, -1, 1.5, '10']) {
      let error;
      try {
        createApiRouter({ registry: new MemoryRegistry(), outbound: { maxRequestsPerApp: bad } });
      } catch (e) {
        error = e;
      }
      expect(error).toBeInstanceOf(ConfigError);
      expect(error.field).toBe('outbound.maxRequestsPerApp');
    }
  });
});

describe('idle connections kept across hosts', () => {
  test('an agent keeps at most 1024 idle connections in all, whatever the number of hosts', async () => {
    // 1,100 host names resolving to one server: the agent keeps a pool per name
    const up = await serve((req, res) => res.end('ok'));
    up.server.keepAliveTimeout = 120_000; // (its default, 5 s, would close idle ones on a slow machine)
    const client = new OutboundClient({ allowPrivateNetworks: true, internal: { resolve: async () => [{ address: '127.0.0.1', family: 4 }] } });
    try {
      for (let i = 0; i < 1100; i += 50) {
        await Promise.all(Array.from({ length: 50 }, async (_, j) => (await client.request({ url: `http://h${i + j}.test:${up.port}/` })).text()));
      }
      let idle = 0;
      // eslint-disable-next-line dot-notation
      const { http: agent } = client['agents'];
      for (const name in agent.freeSockets) idle += agent.freeSockets[name].length;
      expect(up.stats.connections).toBe(1100);
      expect(idle).toBe(1024);
      expect(up.stats.open.size).toBeLessThanOrEqual(1024 + 50);
    } finally {
      client.close();
    }
  });
});
