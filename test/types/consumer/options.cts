// The options of the package's constructors as TypeScript checks them: what the runtime refuses
// does not type-check (`@ts-expect-error`), what it accepts does.
import api = require('scriptable-api');

// RedisRateLimitStore: `{ url }` or `{ client }`, not both, nor neither; the settings of a client
// made from url only with url.
declare const client: Extract<api.RedisRateLimitStoreOptions, { client: object }>['client'];
export const redisStores = [
  new api.RedisRateLimitStore({ url: 'redis://127.0.0.1:6379', prefix: 'p:', commandTimeoutMs: 500, connectTimeoutMs: 500, redisOptions: { db: 1 } }),
  new api.RedisRateLimitStore({ client, prefix: 'p:', commandTimeoutMs: 500 }),
  // @ts-expect-error neither url nor client
  new api.RedisRateLimitStore({}),
  // @ts-expect-error url beside client
  new api.RedisRateLimitStore({ client, url: 'redis://127.0.0.1:6379' }),
  // @ts-expect-error connectTimeoutMs configures a client made from url
  new api.RedisRateLimitStore({ client, connectTimeoutMs: 500 }),
  // @ts-expect-error redisOptions configure a client made from url
  new api.RedisRateLimitStore({ client, redisOptions: { db: 1 } }),
];

// S3FileStorage: static credentials or a provider function (the SDK's fromIni()...), as the runtime takes them.
export const s3Credentials: api.S3FileStorageOptions[] = [
  { bucket: 'b', credentials: { accessKeyId: 'a', secretAccessKey: 's', sessionToken: 't' } },
  { bucket: 'b', credentials: async () => ({ accessKeyId: 'a', secretAccessKey: 's' }) },
  // @ts-expect-error a secret key is needed
  { bucket: 'b', credentials: { accessKeyId: 'a' } },
  // @ts-expect-error credentials are not a string
  { bucket: 'b', credentials: 'AKIA...' },
];

// S3FileStorage: a client of one's own, or the settings of the one it makes, not both.
declare const s3Client: { send(command: unknown): Promise<unknown> };
export const s3Clients: api.S3FileStorageOptions[] = [
  { bucket: 'b', client: s3Client, prefix: 'files/', partSize: 8 * 1024 * 1024, queueSize: 2 },
  // @ts-expect-error region configures a client the storage makes
  { bucket: 'b', client: s3Client, region: 'eu-west-1' },
  // @ts-expect-error credentials configure a client the storage makes
  { bucket: 'b', client: s3Client, credentials: { accessKeyId: 'a', secretAccessKey: 's' } },
  // @ts-expect-error clientOptions configure a client the storage makes
  { bucket: 'b', client: s3Client, clientOptions: { maxAttempts: 1 } },
];

// createApiRouter: values the validation refuses do not type-check either.
const registry = new api.MemoryRegistry();
export const routerOptions: api.ApiRouterOptions[] = [
  { registry, engine: 'vm2', scriptMemoryLimitMb: 128, workers: 2, maxWorkers: 4, contextBudgetMb: 64, bodyLimit: '2mb', upload: { fileSize: '100mb', fieldSize: 65536 } },
  { registry, logger: false, preview: false, metrics: false, rateLimit: { onStoreError: 'open', maxWaiting: 0, ipv6Subnet: 64 }, cors: { origins: '*', maxAge: 600 } },
  // @ts-expect-error the router's cors is an object (false is for one API)
  { registry, cors: false },
  // @ts-expect-error preview needs authorize(req)
  { registry, preview: true },
  // @ts-expect-error onStoreError is 'memory' or 'open'
  { registry, rateLimit: { onStoreError: 'closed' } },
  // @ts-expect-error loggerStyle is 'message-first' or 'meta-first'
  { registry, loggerStyle: 'pino' },
  // @ts-expect-error engine is 'quickjs', 'vm2' or a ScriptEngine
  { registry, engine: 'QuickJS' },
  // @ts-expect-error a key that is not an option
  { registry, scriptTimeoutMS: 500 },
  // @ts-expect-error a key that is not an outbound option
  { registry, outbound: { timeout: 500 } },
];
