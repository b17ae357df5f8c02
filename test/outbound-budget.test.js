'use strict';
// The router's memory budget for outbound bodies (`outbound.maxBufferedBytes`): what the
// host holds for scripts' responses is bounded for all calls together and for each call, a body
// that does not fit fails in the script (270501, catchable) without being read, and the bytes
// come back when a response is released. Real upstream on 127.0.0.1 (port 0), the real router.
const fs = require('node:fs');
const http = require('node:http');
const os = require('node:os');
const path = require('node:path');
const request = require('supertest');
const { createApiRouter, MemoryRegistry } = require('..');
const { makeApp, oneApi } = require('./helpers/app');

const MiB = 1024 * 1024;
const servers = [];

/**
 * An upstream: `/big?n=BYTES` answers that many bytes (`&chunked=1`: without a Content-Length);
 * `/gate` answers once `gate.open()` is called, counting the requests waiting there.
 */
async function upstream() {
  const gate = { waiting: 0, release: [], arrived: null };
  gate.open = () => gate.release.splice(0).forEach((end) => end());
  const server = http.createServer((req, res) => {
    const url = new URL(req.url, 'http://x');
    if (url.pathname === '/gate') {
      gate.waiting++;
      gate.release.push(() => res.end('go'));
      gate.arrived?.(gate.waiting);
      return;
    }
    const body = Buffer.alloc(Number(url.searchParams.get('n')), 'b');
    if (url.searchParams.get('chunked')) {
      res.write(body.subarray(0, body.length >> 1));
      res.end(body.subarray(body.length >> 1));
    } else res.end(body);
  });
  await new Promise((resolve) => server.listen(0, '127.0.0.1', resolve));
  servers.push(server);
  return { url: `http://127.0.0.1:${server.address().port}`, gate };
}

afterEach(async () => {
  for (const s of servers.splice(0)) {
    s.closeAllConnections();
    await new Promise((resolve) => s.close(resolve));
  }
});

describe('a call holds at most its share of the budget', () => {
  const SCRIPT = `export function fn(ctx) {
    const out = [];
    for (let i = 0; i < 4; i++) {
      const res = platform.http.request({ url: ctx.query.url + '/big?n=' + ctx.query.n + (ctx.query.chunked ? '&chunked=1' : '') });
      try { out.push(res.body.length) } catch (e) { out.push(e.code + ' ' + e.message) }
    }
    return out;
  }`;

  test.each([['declared', ''], ['chunked', '1']])('bodies past the share fail in the script (270501) while other calls still read theirs (%s length)', async (_, chunked) => {
    const up = await upstream();
    // a call may hold max(maxBodyBytes, maxBufferedBytes / 8) = 2 MiB: two bodies of 1 MiB
    const { app, router } = oneApi(SCRIPT, {}, { outbound: { allowPrivateNetworks: true, maxBodyBytes: MiB, maxBufferedBytes: 16 * MiB } });
    try {
      const calls = await Promise.all([0, 1, 2].map(() => request(app).get('/web0/api/app1/p').query({ url: up.url, n: MiB, chunked })));
      for (const res of calls) {
        expect(res.status).toBe(200);
        expect(res.body.slice(0, 2)).toEqual([MiB, MiB]);
        for (const failure of res.body.slice(2)) {
          expect(failure).toMatch(/^270501 response body from 127\.0\.0\.1:\d+ does not fit: this call's share \(2097152 bytes\) of the host's memory budget for outbound bodies is spent/);
        }
      }
    } finally {
      await router.close();
    }
  });

  test('a response leaving the 32-response window gives its bytes back', async () => {
    const up = await upstream();
    const script = `export function fn(ctx) {
      let total = 0;
      for (let i = 0; i < 40; i++) total += platform.http.request({ url: ctx.query.url + '/big?n=65536' }).body.length;
      return { total };
    }`;
    // a share of 2 MiB is exactly 32 bodies of 64 KiB
    const { app, router } = oneApi(script, {}, { outbound: { allowPrivateNetworks: true, maxBodyBytes: 65536, maxBufferedBytes: 16 * MiB } });
    try {
      const res = await request(app).get('/web0/api/app1/p').query({ url: up.url });
      expect(res.body).toEqual({ total: 40 * 65536 });
    } finally {
      await router.close();
    }
  });

  // (chunked: the host's read ahead of its first MiB finds no room either, and leaves the body to saveBodyAsFile)
  test.each([['declared', ''], ['chunked', '&chunked=1']])('a body the budget has no room for is not read: saveBodyAsFile still streams it to the file (%s length)', async (_, chunked) => {
    const up = await upstream();
    const sandboxDir = fs.mkdtempSync(path.join(os.tmpdir(), 'sapi-outbound-budget-'));
    const script = `export function fn(ctx) {
      const held = [1, 2].map(() => platform.http.request({ url: ctx.query.url + '/big?n=1048576' }).body.length);
      const res = platform.http.request({ url: ctx.query.url + '/big?n=1048576${chunked}' });
      let read;
      try { read = res.body.length } catch (e) { read = e.code }
      return { held, read, saved: res.saveBodyAsFile('big.bin') };
    }`;
    const { app, router } = oneApi(script, {}, { sandboxDir, outbound: { allowPrivateNetworks: true, maxBodyBytes: MiB, maxBufferedBytes: 16 * MiB } });
    try {
      const res = await request(app).get('/web0/api/app1/p').query({ url: up.url });
      expect(res.body).toEqual({ held: [MiB, MiB], read: 270501, saved: { path: 'big.bin', size: MiB } });
      expect(fs.statSync(path.join(sandboxDir, 'app1', 'big.bin')).size).toBe(MiB);
    } finally {
      await router.close();
      fs.rmSync(sandboxDir, { recursive: true, force: true });
    }
  });
});

describe('request bodies count while they are sent', () => {
  test.each(['quickjs', 'vm2'])('%s: bodies past the call\'s share fail (270501) before they are sent; their bytes come back once answered', async (engine) => {
    // '/gate' answers once '/open' is called; counts the bodies it received
    let received = 0;
    const held = [];
    const server = http.createServer((req, res) => {
      if (req.url === '/open') {
        held.splice(0).forEach((end) => end());
        return res.end('opened');
      }
      req.resume();
      req.on('end', () => {
        received++;
        held.push(() => res.end('go'));
      });
    });
    await new Promise((resolve) => server.listen(0, '127.0.0.1', resolve));
    servers.push(server);
    const url = `http://127.0.0.1:${server.address().port}`;
    // a call may hold max(maxBodyBytes, maxBufferedBytes / 8) = 1 MiB: one body of 600 KiB at a time
    const script = `export async function fn(ctx) {
      const body = 'x'.repeat(600 * 1024);
      const post = async () => { try { return (await platform.http.request({ url: ctx.query.url + '/gate', method: 'POST', body })).body } catch (e) { return e.code + ' ' + e.message } };
      const first = post(); // held at the gate, its body counted
      const second = await post();
      await platform.http.request({ url: ctx.query.url + '/open' });
      return [await first, second];
    }`;
    const { app, router } = oneApi(script, {}, { engine, outbound: { allowPrivateNetworks: true, maxBodyBytes: MiB, maxBufferedBytes: 4 * MiB } });
    try {
      for (let round = 0; round < 2; round++) {
        const res = await request(app).get('/web0/api/app1/p').query({ url });
        expect(res.status).toBe(200);
        expect(res.body[0]).toBe('go');
        expect(res.body[1]).toMatch(/^270501 request body to 127\.0\.0\.1:\d+ does not fit: this call's share \(1048576 bytes\) of the host's memory budget for outbound bodies is spent/);
      }
      expect(received).toBe(2); // (one body sent a round: the other was refused before sending)
    } finally {
      await router.close();
    }
  });
});

describe('all calls together hold at most maxBufferedBytes', () => {
  test('concurrent calls cannot pass the router budget; their bytes come back when they end', async () => {
    const up = await upstream();
    // each call reads one 1 MiB body, then waits at the gate until all eight hold what they got
    const script = `export function fn(ctx) {
      const res = platform.http.request({ url: ctx.query.url + '/big?n=1048576' });
      let read;
      try { read = res.body.length } catch (e) { read = e.code + ' ' + e.message }
      platform.http.request({ url: ctx.query.url + '/gate' });
      return { read };
    }`;
    const { app, router } = oneApi(script, {}, { outbound: { allowPrivateNetworks: true, maxBodyBytes: MiB, maxBufferedBytes: 4 * MiB } });
    try {
      const round = async () => {
        const all = new Promise((resolve) => (up.gate.arrived = (n) => n === 8 && resolve()));
        up.gate.waiting = 0;
        const calls = Promise.all(Array.from({ length: 8 }, () => request(app).get('/web0/api/app1/p').query({ url: up.url })));
        await all;
        up.gate.open();
        return (await calls).map((res) => res.body.read);
      };
      for (let r = 0; r < 2; r++) {
        const reads = await round();
        expect(reads.filter((read) => read === MiB)).toHaveLength(4);
        for (const failure of reads.filter((read) => read !== MiB)) {
          expect(failure).toMatch(/^270501 response body from 127\.0\.0\.1:\d+ does not fit: the host's memory budget for outbound bodies \(4194304 bytes\) is spent; try again later/);
        }
      }
      // one at a time, every call reads its body
      for (let i = 0; i < 6; i++) {
        up.gate.arrived = () => up.gate.open();
        const res = await request(app).get('/web0/api/app1/p').query({ url: up.url });
        expect(res.body).toEqual({ read: MiB });
      }
    } finally {
      await router.close();
    }
  });
});

describe('outbound.maxBufferedBytes is checked at startup', () => {
  const make = (outbound) => () => createApiRouter({ registry: new MemoryRegistry(), outbound });
  test.each([0, -1, 1.5, '256mb', Number.MAX_SAFE_INTEGER + 1, Infinity])('%p fails naming the field', (value) => {
    expect(make({ maxBufferedBytes: value })).toThrow(/invalid outbound\.maxBufferedBytes: must be/);
  });
  test('it may not be below maxBodyBytes (default 10 MiB)', () => {
    expect(make({ maxBufferedBytes: 5 * MiB })).toThrow(/invalid outbound\.maxBufferedBytes: must be at least outbound\.maxBodyBytes \(10485760\)/);
    expect(make({ maxBodyBytes: 2 * MiB, maxBufferedBytes: MiB })).toThrow(/invalid outbound\.maxBufferedBytes: must be at least outbound\.maxBodyBytes \(2097152\)/);
  });
  test('valid values, and a maxBodyBytes above the default budget alone, are accepted', async () => {
    for (const outbound of [{ maxBufferedBytes: 10 * MiB }, { maxBodyBytes: MiB, maxBufferedBytes: MiB }, { maxBodyBytes: 512 * MiB }]) {
      const router = make(outbound)();
      await router.close();
    }
  });
});

describe('a call gives its bodies back when its script ends, not when its client has read the answer', () => {
  test('a File answer a client is slow to read holds none of the budget', async () => {
    const up = await upstream();
    const sandboxDir = fs.mkdtempSync(path.join(os.tmpdir(), 'sapi-outbound-budget-'));
    fs.mkdirSync(path.join(sandboxDir, 'app1'));
    // larger than what the socket buffers take: the download waits for a client that reads nothing
    fs.writeFileSync(path.join(sandboxDir, 'app1', 'big.bin'), '');
    fs.truncateSync(path.join(sandboxDir, 'app1', 'big.bin'), 256 * MiB);
    const script = `export function fn(ctx) {
      const res = platform.http.request({ url: ctx.query.url + '/big?n=1048576' });
      let read;
      try { read = res.body.length } catch (e) { read = e.code + ' ' + e.message }
      return ctx.path === 'file' ? { path: 'big.bin' } : { read };
    }`;
    const { app, router } = makeApp({
      router: { sandboxDir, outbound: { allowPrivateNetworks: true, maxBodyBytes: MiB, maxBufferedBytes: MiB } },
      apps: {
        app1: {
          scripts: { 'main.js': script },
          apis: [
            { path: 'p', call: { script: 'main.js', function: 'fn' }, returnType: 'JSON' },
            { path: 'file', call: { script: 'main.js', function: 'fn' }, returnType: 'File' },
          ],
        },
      },
    });
    const server = http.createServer(app);
    await new Promise((resolve) => server.listen(0, '127.0.0.1', resolve));
    servers.push(server);
    const file = `http://127.0.0.1:${server.address().port}/web0/api/app1/file?url=${encodeURIComponent(up.url)}`;
    let slow;
    try {
      // the script read 1 MiB (all of the budget) and returned; its client reads nothing of the file
      slow = await new Promise((resolve, reject) => http.get(file, resolve).on('error', reject));
      expect(slow.statusCode).toBe(200);
      const res = await request(app).get('/web0/api/app1/p').query({ url: up.url });
      expect(res.body).toEqual({ read: MiB });
    } finally {
      slow?.destroy();
      await router.close();
      fs.rmSync(sandboxDir, { recursive: true, force: true });
    }
  });
});
