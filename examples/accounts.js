'use strict';
// The demo accounts behind `platform.system.getAccountByToken` in the examples (shop's auth.js).
const ACCOUNTS = {
  'demo-token': { id: 'u1', userName: 'ada', name: 'Ada Lovelace', email: 'ada@example.com', companyId: 'c1', isValid: true, valid: true, createTime: 1700000000000, updateTime: 1700000000000 },
};

/**
 * The `accounts` option: `{ getAccountByToken(token) }`. The token is the client's text: an own
 * key only (ACCOUNTS['__proto__'] is Object.prototype, an "account" for anyone who sends it).
 */
const accounts = { getAccountByToken: async (token) => (Object.hasOwn(ACCOUNTS, token) ? ACCOUNTS[token] : null) };

module.exports = { ACCOUNTS, accounts };
