'use strict';
/**
 * Embedding the router in your own Express app, over the same folder of apps `npm start` serves
 * (examples/apps) — what `scriptable-api serve` does, written out:
 *
 *   node examples/server.js        # PORT=3000 by default; Ctrl+C stops it (its data is in a temp folder, removed then)
 *   curl 'http://localhost:3000/web0/api/shop/orders/list?token=demo-token'
 *   curl 'http://localhost:3000/web0/api/shop/orders/list'              # 401 from the before hook
 *   curl -X POST 'http://localhost:3000/web0/api/shop/orders/create?token=demo-token' -d '{"item":"pen","qty":0}'
 *   curl 'http://localhost:3000/web0/api/shop/hello?name=Ada'
 *   curl -i 'http://localhost:3000/web0/api/shop/report?token=demo-token'
 *   curl 'http://localhost:3000/metrics'                                  # Prometheus metrics
 */
const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');
const express = require('express');
const { createApiRouter, DirectoryRegistry } = require('scriptable-api');
const { ACCOUNTS, accounts } = require('./accounts');

function createServer({ dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'scriptable-api-example-')), logger } = {}) {
  const sandboxDir = path.join(dataDir, 'sandbox');
  const storageDir = path.join(dataDir, 'storage');
  // the file the shop's `report` API serves from its sandbox
  fs.mkdirSync(path.join(sandboxDir, 'shop'), { recursive: true });
  fs.copyFileSync(path.join(__dirname, 'data', 'sandbox', 'shop', 'report.csv'), path.join(sandboxDir, 'shop', 'report.csv'));

  // apps as files: validated on load, watched, an edit is live on the next request
  const registry = new DirectoryRegistry({ root: path.join(__dirname, 'apps'), logger });
  const router = createApiRouter({
    registry,
    accounts,
    sandboxDir,
    storageDir,
    logger,
  });
  const app = express();
  app.use('/web0/api', router);
  app.get('/metrics', router.metrics.handler);
  // the router does not own the registry: close both
  const close = async () => {
    await router.close();
    await registry.close();
  };
  return { app, router, registry, close, dataDir };
}

if (require.main === module) {
  const { app, close, dataDir } = createServer();
  const server = app.listen(Number(process.env.PORT ?? 3000), '127.0.0.1', () => {
    console.log(`scriptable-api example listening on http://127.0.0.1:${server.address().port}/web0/api`);
  });
  // Ctrl+C or SIGTERM: stop listening, let the requests in flight finish, remove the data folder
  const stop = () =>
    server.close(() =>
      close().then(() => {
        fs.rmSync(dataDir, { recursive: true, force: true });
        process.exit(0);
      }),
    );
  process.once('SIGTERM', stop);
  process.once('SIGINT', stop);
}

module.exports = { createServer, ACCOUNTS };
