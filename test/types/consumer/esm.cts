// A TypeScript CommonJS consumer (module nodenext).
import api = require('scriptable-api');

export const router = api.createApiRouter({ registry: new api.MemoryRegistry() });
