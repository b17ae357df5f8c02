/**
 * Optional peer dependencies (ioredis, vm2) are loaded only by the feature that needs them, so
 * `require('scriptable-api')` loads neither and an install without them works for everyone else.
 */
import { ConfigError } from './errors';

/** Packages the library can use when the host installs them, and the feature that needs each. */
export const OPTIONAL_PACKAGES = {
  ioredis: 'RedisRateLimitStore (created from a url)',
  vm2: "engine 'vm2'",
} as const;

export type OptionalPackage = keyof typeof OPTIONAL_PACKAGES;

function missing(name: OptionalPackage, field: string, cause?: unknown): ConfigError {
  const err = new ConfigError(field, `${OPTIONAL_PACKAGES[name]} needs the optional package '${name}': install it with \`npm install ${name}\``);
  if (cause !== undefined) (err as Error & { cause?: unknown }).cause = cause;
  return err;
}

function isNotFound(e: unknown, name: string): boolean {
  const err = e as { code?: string; message?: string };
  return err?.code === 'MODULE_NOT_FOUND' && typeof err.message === 'string' && err.message.includes(`'${name}'`);
}

/** Loads an optional package, or throws a ConfigError naming it and how to install it. */
export function requireOptional<T>(name: OptionalPackage, field: string): T {
  try {
    // eslint-disable-next-line @typescript-eslint/no-require-imports
    return require(name) as T;
  } catch (e) {
    if (isNotFound(e, name)) throw missing(name, field, e);
    throw e;
  }
}

/** Checks that an optional package can be found, without loading it (workers load it later). */
export function assertOptionalInstalled(name: OptionalPackage, field: string): void {
  try {
    require.resolve(name);
  } catch (e) {
    throw missing(name, field, e);
  }
}
