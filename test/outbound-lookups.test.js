'use strict';
// Name lookups of outbound calls take turns across apps: the system resolver runs two at a time
// for the whole process (libuv), so one app calling many new names must not hold every other
// app's lookups. The resolver is the client's test seam (a slow one); the upstream is real, on
// loopback (port 0).
const http = require('node:http');
const request = require('supertest');
const { OutboundClient } = require('../dist/cjs/outbound/client.js');
const { lookupSlots } = require('../dist/cjs/outbound/lookups.js');
const { oneApi } = require('./helpers/app');

let upstream;
let port;
beforeAll(async () => {
  upstream = http.createServer((req, res) => res.end(req.headers.host.split(':')[0]));
  await new Promise((resolve) => upstream.listen(0, '127.0.0.1', resolve));
  port = upstream.address().port;
});
afterAll(async () => {
  upstream.closeAllConnections();
  await new Promise((resolve) => upstream.close(resolve));
});

/** A resolver answering 127.0.0.1 after `ms`; records the order lookups start in and how many ran at once. */
function slowResolver(ms) {
  const seen = { started: [], running: 0, most: 0 };
  const resolve = (host) => {
    seen.started.push(host);
    seen.most = Math.max(seen.most, ++seen.running);
    return new Promise((done) =>
      setTimeout(() => {
        seen.running--;
        done([{ address: '127.0.0.1', family: 4 }]);
      }, ms),
    );
  };
  return { resolve, seen };
}

test('libuv runs half its thread pool in lookups: two by default, UV_THREADPOOL_SIZE otherwise', () => {
  expect(lookupSlots({})).toBe(2);
  expect(lookupSlots({ UV_THREADPOOL_SIZE: '8' })).toBe(4);
  expect(lookupSlots({ UV_THREADPOOL_SIZE: '1' })).toBe(1);
  expect(lookupSlots({ UV_THREADPOOL_SIZE: 'x' })).toBe(2);
});

test("one app's twelve new names do not hold another app's lookup: apps take turns, at most two run at once", async () => {
  const { resolve, seen } = slowResolver(150);
  const client = new OutboundClient({ allowPrivateNetworks: true, internal: { resolve } });
  try {
    const flood = Array.from({ length: 12 }, (_, i) => client.request({ url: `http://a${i}.test:${port}/`, appId: 'busy' }));
    const other = client.request({ url: `http://b.test:${port}/`, appId: 'quiet' });
    const answers = await Promise.all([...flood, other].map(async (p) => (await p).text()));
    expect(answers).toEqual([...Array.from({ length: 12 }, (_, i) => `a${i}.test`), 'b.test']);
    expect(seen.most).toBe(lookupSlots());
    // two of 'busy' were running when 'quiet' came; then busy's turn, then quiet's: before busy's other nine
    expect(seen.started.indexOf('b.test')).toBe(lookupSlots() + 1);
  } finally {
    client.close();
  }
});

test('a lookup whose call ended while it waited in line never starts', async () => {
  const { resolve, seen } = slowResolver(1000);
  const client = new OutboundClient({ allowPrivateNetworks: true, internal: { resolve } });
  try {
    const calls = Array.from({ length: 8 }, (_, i) => client.request({ url: `http://c${i}.test:${port}/`, appId: 'app', timeoutMs: 200 }));
    const errors = await Promise.all(calls.map((p) => p.then(() => null, (e) => e)));
    for (const e of errors) expect(e).toMatchObject({ code: 270501, message: expect.stringMatching(/timed out after 200 ms/) });
    // the two running ones end on their own; wait for them, then for the line to be served
    await new Promise((r) => setTimeout(r, 1200));
    expect(seen.started).toEqual(['c0.test', 'c1.test']);
  } finally {
    client.close();
  }
});

test("the router's calls are made for their app", async () => {
  const spy = jest.spyOn(OutboundClient.prototype, 'request');
  const { app, router } = oneApi('export async function fn(ctx) { return { status: platform.http.request({ url: ctx.query.url }).status } }', {}, { outbound: { allowPrivateNetworks: true } });
  try {
    const res = await request(app).get('/web0/api/app1/p').query({ url: `http://127.0.0.1:${port}/` });
    expect(res.body).toEqual({ status: 200 });
    expect(spy.mock.calls.map(([r]) => r.appId)).toEqual(['app1']);
  } finally {
    spy.mockRestore();
    await router.close();
  }
});
