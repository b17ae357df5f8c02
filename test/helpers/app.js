'use strict';
// Builds a real Express app with the router mounted at /web0/api, as a host app would.
const { createApiRouter, MemoryRegistry } = require('../..');

const EXPRESS = { 5: require('express'), 4: require('express4') };

/**
 * @param {object} [opts]
 * @param {Record<string, {apis?: any[], scripts?: Record<string,string>}>} [opts.apps]
 * @param {object} [opts.router] extra createApiRouter options
 * @param {4|5} [opts.express]
 * @param {(app: any) => void} [opts.setup] host middleware before the router
 */
function makeApp(opts = {}) {
  const express = EXPRESS[opts.express ?? 5];
  const registry = opts.registry ?? new MemoryRegistry({ apps: opts.apps ?? {} });
  // (one worker for the built-in engine; an engine of one's own has its own workers)
  const ownEngine = typeof opts.router?.engine === 'object';
  const router = createApiRouter({ registry, ...(ownEngine ? {} : { workers: 1 }), ...(opts.router ?? {}) });
  const app = express();
  if (opts.setup) opts.setup(app);
  app.use('/web0/api', router);
  return { app, router, registry };
}

/** One app `app1` with one API `path` calling `main.js#fn`. */
function oneApi(source, def = {}, routerOpts = {}, extra = {}) {
  return makeApp({
    ...extra,
    router: routerOpts,
    apps: {
      app1: {
        scripts: { 'main.js': source, ...(extra.scripts ?? {}) },
        apis: [{ path: 'p', call: { script: 'main.js', function: 'fn' }, returnType: 'JSON', ...def }],
      },
    },
  });
}

module.exports = { makeApp, oneApi, EXPRESS };
