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
// Shared storage: the bundled ones and one of the consumer's own, without the AWS SDK's types.
const local: api.FileStorage = new api.LocalFileStorage({ root: '/srv/storage' });
export const s3Options: api.S3FileStorageOptions = { bucket: 'files', prefix: 'p/', endpoint: 'http://127.0.0.1:9000', forcePathStyle: true, partSize: 8 * 1024 * 1024 };
class OwnStorage implements api.FileStorage {
  async put(): Promise<api.StoragePutResult> {
    return { size: 0 };
  }
  async get(_appId: string, _path: string, options?: { range?: api.ByteRange }): Promise<api.StoredFile | null> {
    void options;
    return null;
  }
  async stat(): Promise<api.StoredFileInfo | null> {
    return null;
  }
  async delete(): Promise<void> {}
}
export const routers = [
  api.createApiRouter({ registry: new api.MemoryRegistry(), storage: local, upload: { fileSize: '200mb', files: 4, tmpDir: '/var/tmp' } }),
  api.createApiRouter({ registry: new api.MemoryRegistry(), storage: new OwnStorage() }),
];
export const attachment: api.TableAttachment | undefined = undefined;
// A definition written with the `$schema` an editor checks it against (the schemas allow it).
registry.putApi('a', { $schema: '../../schemas/api-definition.json', path: 'q', call: { script: 'm.js', function: 'f' }, returnType: 'JSON' });
registry.putAutomation('a', { $schema: '../../schemas/automation.json', id: 'z', steps: [{ type: 'return', value: 1 }] });
export const withSchema: api.ApiDefinition = { $schema: '../../schemas/api-definition.json', path: 'r', call: { automation: 'z' }, returnType: 'Text' };
// An engine of one's own types its host calls with the table docs/script-engine.md names.
export async function accountOf(host: api.HostBridge, token: string): Promise<api.HostOps['system.getAccountByToken']['result']> {
  const op: api.HostOp = 'system.getAccountByToken';
  const args: api.HostOps[typeof op]['args'] = { token };
  return (await host.call(op, args)) as api.HostOps[typeof op]['result'];
}
