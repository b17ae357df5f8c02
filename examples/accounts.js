'use strict';
// The demo accounts behind `platform.system.getAccountByToken` in the examples (shop's auth.js).
const ACCOUNTS = {
  'demo-token': { id: 'u1', userName: 'ada', name: 'Ada Lovelace', email: 'ada@example.com', companyId: 'c1', isValid: true, valid: true, createTime: 1700000000000, updateTime: 1700000000000 },
};

/** The `accounts` option: `{ getAccountByToken(token) }`. */
const accounts = { getAccountByToken: async (token) => ACCOUNTS[token] ?? null };

module.exports = { ACCOUNTS, accounts };
