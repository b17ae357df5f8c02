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
