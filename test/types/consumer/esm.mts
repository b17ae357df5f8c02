// A TypeScript ESM consumer (module nodenext): named and default imports both type-check.
import api, { createApiRouter, MemoryRegistry, WorkerPool, type ApiRouterOptions, type PoolOptions } from 'scriptable-api';

const registry = new MemoryRegistry();
const options: ApiRouterOptions = { registry, scriptTimeoutMs: 5000 };
const router = createApiRouter(options);
const same: typeof createApiRouter = api.createApiRouter;
const pool: PoolOptions = { engine: 'vm2' };
export const made = [router, same, new WorkerPool(pool), new api.MemoryRegistry()];
