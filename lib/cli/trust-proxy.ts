/**
 * The serve command's `trust proxy` setting (`--trust-proxy`, `trustProxy` in --config): what
 * Express's `app.set('trust proxy', …)` takes. A number of hops, true or false, or addresses,
 * subnets and the names loopback / linklocal / uniquelocal (a comma-separated string or a list);
 * a function in a JavaScript config. Checked by Express itself (its proxy-addr names a bad address).
 */

export type TrustProxy = boolean | number | string | string[] | ((address: string, hop: number) => unknown);

export const TRUST_PROXY_RULE = 'a number of hops, true, false or a comma-separated list of addresses, subnets and loopback/linklocal/uniquelocal';

/** Why Express would refuse `value`, or undefined when it takes it. */
export function trustProxyProblem(value: unknown): string | undefined {
  if (typeof value === 'boolean' || typeof value === 'function') return undefined;
  if (typeof value === 'number') return Number.isSafeInteger(value) && value >= 0 ? undefined : 'not a whole number of hops';
  const list = Array.isArray(value) ? value : [value];
  if (list.length === 0 || !list.every((v) => typeof v === 'string' && v.trim() !== '')) return 'not addresses or subnets';
  try {
    // eslint-disable-next-line @typescript-eslint/no-require-imports
    (require('express') as typeof import('express'))().set('trust proxy', value);
    return undefined;
  } catch (e) {
    return (e as Error).message;
  }
}

/** The flag's text as Express takes it: a number of hops, true, false, else the list as written. */
export function parseTrustProxy(text: string): TrustProxy {
  if (/^\d+$/.test(text)) return Number(text);
  if (text === 'true' || text === 'false') return text === 'true';
  return text;
}
