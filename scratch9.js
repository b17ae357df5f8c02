const { makeApp } = require('./test/helpers/app');
const request = require('supertest');
(async () => {
  for (const engine of ['quickjs', 'vm2']) {
    const { app, router } = makeApp({ apps: { app1: { scripts: { 'main.js': 'export function fn() { return Object.getOwnPropertyNames(globalThis).sort() }' }, apis: [{ path: 'p', call: { script: 'main.js', function: 'fn' }, returnType: 'JSON' }] } }, router: { engine } });
    const r = await request(app).get('/web0/api/app1/p');
    console.log(engine, JSON.stringify(r.body));
    await router.close();
  }
})();
