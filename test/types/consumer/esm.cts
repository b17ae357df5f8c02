// A TypeScript CommonJS consumer (module nodenext).
import api = require('scriptable-api');

export const router = api.createApiRouter({ registry: new api.MemoryRegistry() });

// The options for running in production, as a TypeScript user writes them.
const registry = new api.MemoryRegistry();
registry.putApi('a', { path: 'p', call: { script: 'm.js', function: 'f' }, returnType: 'JSON', cors: { origins: ['https://*.example.com'], maxAge: 600 } }, { stage: 'preview' });
export const production = api.createApiRouter({
  registry,
  logger: console,
  loggerStyle: 'message-first',
  exposeErrorLocation: true,
  cors: { origins: '*', credentials: false, exposeHeaders: ['X-Request-Id'] },
  fallthrough: true,
  preview: { authorize: async (req) => req.get('x-preview') === 'yes' },
  metrics: { prefix: 'tenant_api_' },
});
export const scrape: Promise<string> | undefined = production.metrics?.text();
