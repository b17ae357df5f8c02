'use strict';
/**
 * Options for `scriptable-api serve examples/apps --config examples/serve.config.js` (`npm start`).
 * A config module may hold what a JSON config cannot: here the accounts lookup that
 * `platform.system.getAccountByToken` (shop's auth.js) uses. Command-line flags win over it.
 */
const os = require('node:os');
const path = require('node:path');
const { accounts } = require('./accounts');

module.exports = {
  port: 3000,
  mount: '/web0/api',
  // shop's report.csv lives in the app's sandbox; files' uploads go to shared storage
  sandboxDir: path.join(__dirname, 'data', 'sandbox'),
  storageDir: process.env.STORAGE_DIR || path.join(os.tmpdir(), 'scriptable-api-example-storage'),
  accounts,
};
