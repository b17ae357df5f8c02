'use strict';
/**
 * The example server: `npm start`. Serves the sample apps in examples/apps at /web0/api/<appId>/<path>.
 *
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
const { createApiRouter } = require('scriptable-api');
const { FileRegistry } = require('./file-registry');

const ACCOUNTS = {
  'demo-token': { id: 'u1', userName: 'ada', name: 'Ada Lovelace', email: 'ada@example.com', companyId: 'c1', isValid: true, valid: true, createTime: 1700000000000, updateTime: 1700000000000 },
};

function createServer({ dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'scriptable-api-example-')), logger } = {}) {
  const sandboxDir = path.join(dataDir, 'sandbox');
  const storageDir = path.join(dataDir, 'storage');
  // A file the `report` API serves from the shop app's sandbox.
  fs.mkdirSync(path.join(sandboxDir, 'shop'), { recursive: true });
  fs.writeFileSync(path.join(sandboxDir, 'shop', 'report.csv'), 'id,item,qty\n1,pen,2\n2,ink,1\n');

  const router = createApiRouter({
    registry: new FileRegistry(path.join(__dirname, 'apps')),
    accounts: { getAccountByToken: async (token) => ACCOUNTS[token] ?? null },
    sandboxDir,
    storageDir,
    logger,
  });
  const app = express();
  app.use('/web0/api', router);
  app.get('/metrics', router.metrics.handler);
  app.get('/', (req, res) => res.type('text').send('scriptable-api example: try /web0/api/shop/hello?name=you\n'));
  return { app, router };
}

if (require.main === module) {
  const { app } = createServer();
  const server = app.listen(Number(process.env.PORT ?? 3000), () => {
    console.log(`scriptable-api example listening on http://localhost:${server.address().port}/web0/api`);
  });
}

module.exports = { createServer, ACCOUNTS };
