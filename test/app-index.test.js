'use strict';
// The index of `scriptable-api serve` at the mount point with thousands of apps: what it lists is
// bounded (a request cannot make the server build a body of every API of every app).
const express = require('express');
const request = require('supertest');
const { appIndex } = require('../dist/cjs/cli/app-index.js');

/** A registry's listing side: `apps` app ids with `per` APIs each; counts the APIs it hands out. */
function registry(apps, per) {
  const ids = Array.from({ length: apps }, (_, i) => `app${String(i).padStart(4, '0')}`);
  const defs = Array.from({ length: per }, (_, j) => Object.freeze({ path: `api${String(j).padStart(3, '0')}`, returnType: 'JSON', call: { script: 's.js', function: 'f' } }));
  const counts = { listed: 0 };
  return {
    counts,
    listApps: () => [...ids],
    listApis: (appId) => {
      if (!ids.includes(appId)) return [];
      counts.listed += per;
      return [...defs];
    },
  };
}
function server(reg) {
  const app = express();
  app.get('/web0/api', appIndex(reg, '/web0/api'));
  return app;
}
const listed = (body) => body.apps.reduce((n, a) => n + a.apis.length, 0);

test('with 2,000 apps of 200 APIs, the index lists every app but at most 1,000 APIs, says it is cut short, and stays small', async () => {
  const reg = registry(2000, 200);
  const res = await request(server(reg)).get('/web0/api');
  expect(res.status).toBe(200);
  expect(res.body.apps).toHaveLength(2000);
  expect(listed(res.body)).toBe(1000);
  expect(res.body.truncated).toBe(true);
  // the apps listed in full first (in name order), then the ones cut short with their number of APIs
  expect(res.body.apps[0]).toEqual(expect.objectContaining({ appId: 'app0000' }));
  expect(res.body.apps[0].apiCount).toBeUndefined();
  expect(res.body.apps[0].apis[0].url).toMatch(/\/web0\/api\/app0000\/api000$/);
  expect(res.body.apps[5]).toEqual({ appId: 'app0005', apis: [], apiCount: 200 });
  expect(res.text.length).toBeLessThan(1_000_000);
});

test('?app= lists one app (its APIs bounded the same way); a small folder is listed whole, as before', async () => {
  const reg = registry(2000, 200);
  const one = await request(server(reg)).get('/web0/api?app=app1500');
  expect(one.body.apps).toHaveLength(1);
  expect(one.body.apps[0].appId).toBe('app1500');
  expect(one.body.apps[0].apis).toHaveLength(200);
  expect(one.body.truncated).toBeUndefined();
  expect((await request(server(reg)).get('/web0/api?app=nope')).body).toEqual({ service: 'scriptable-api', apps: [] });
  const big = await request(server(registry(1, 1500))).get('/web0/api?app=app0000');
  expect(big.body.apps[0].apis).toHaveLength(1000);
  expect(big.body.apps[0].apiCount).toBe(1500);
  expect(big.body.truncated).toBe(true);

  const small = await request(server(registry(3, 2))).get('/web0/api');
  expect(small.body.truncated).toBeUndefined();
  expect(small.body.apps.map((a) => [a.appId, a.apis.length, a.apiCount])).toEqual([['app0000', 2, undefined], ['app0001', 2, undefined], ['app0002', 2, undefined]]);
});
