/**
 * The command line of `scriptable-api`, read with node:util parseArgs:
 *
 *   scriptable-api serve <root> [--port 3000] [--host 127.0.0.1] [--mount /web0/api]
 *     [--preview-root DIR] [--sandbox-dir DIR] [--storage-dir DIR] [--redis-url URL]
 *     [--engine quickjs|vm2] [--script-timeout-ms N] [--trust-proxy VALUE] [--config FILE]
 *     [--no-index] [--quiet]
 */
import { parseArgs } from 'node:util';
import { parseTrustProxy, TRUST_PROXY_RULE, trustProxyProblem, type TrustProxy } from './trust-proxy';

export const USAGE = `Usage: scriptable-api serve <root> [options]
       scriptable-api serve --config FILE [options]   (the folder as \`root\` in the file)

Serves the apps in <root> (<root>/<appId>/apis/*.json, scripts/**, automations/*.json) at
http://HOST:PORT<mount>/<appId>/<path>. Files are watched: an edit is live without a restart.

Options:
  --port N                 port to listen on (default 3000; 0 picks a free one)
  --host ADDR              address to listen on (default 127.0.0.1; 0.0.0.0 for every interface)
  --mount PATH             where the APIs are mounted (default /web0/api)
  --preview-root DIR       apps served on the preview stage (same layout as <root>); needs
                           preview: { authorize(req) } in a --config module
  --sandbox-dir DIR        root of each app's file sandbox (<dir>/<appId>/)
  --storage-dir DIR        root of shared storage (<dir>/<appId>/)
  --redis-url URL          share rate limits through Redis (redis://host:6379)
  --engine NAME            quickjs (default) or vm2 (trusted scripts only)
  --script-timeout-ms N    time limit of one request's scripts (default 10000)
  --trust-proxy VALUE      behind a reverse proxy: Express's \`trust proxy\` (a number of hops, or
                           the proxies' addresses/subnets, e.g. loopback); decides the client
                           address scripts and {ip} rate limits see (default: none trusted)
  --config FILE            options from a file: JSON, or a JavaScript module exporting them
                           (any createApiRouter option, e.g. outbound, accounts); flags win
  --no-index               do not list the apps and their APIs at the mount point
  --quiet                  no line per request
  -h, --help               this text
  -v, --version            the version
`;

/**
 * A mount point Express takes literally: `:name`, `*`, `(`, `?`... would make it a route pattern
 * (`/api/:t` serves any first segment) or fail deep in Express with a message naming no option.
 */
export const PLAIN_MOUNT = /^\/[A-Za-z0-9._~/-]*$/;
export const MOUNT_RULE = "must be a plain path of letters, digits, '-', '.', '_', '~' and '/' (such as /web0/api)";

/** An error in the command line: printed with the usage, exit code 2. */
export class UsageError extends Error {}

/** What the command line asks for (a config file's options are merged later). */
export interface CliArgs {
  command: 'serve' | 'help' | 'version';
  root?: string;
  port?: number;
  host?: string;
  mount?: string;
  previewRoot?: string;
  sandboxDir?: string;
  storageDir?: string;
  redisUrl?: string;
  engine?: 'quickjs' | 'vm2';
  scriptTimeoutMs?: number;
  trustProxy?: TrustProxy;
  config?: string;
  index?: boolean;
  quiet?: boolean;
}

function integer(v: string | undefined, flag: string, min: number, max: number): number | undefined {
  if (v === undefined) return undefined;
  const n = Number(v);
  if (!/^\d+$/.test(v) || !Number.isSafeInteger(n) || n < min || n > max) throw new UsageError(`${flag} must be an integer from ${min} to ${max}, got '${v}'`);
  return n;
}

export function parseCli(argv: string[]): CliArgs {
  let parsed;
  try {
    parsed = parseArgs({
      args: argv,
      allowPositionals: true,
      strict: true,
      options: {
        port: { type: 'string' },
        host: { type: 'string' },
        mount: { type: 'string' },
        'preview-root': { type: 'string' },
        'sandbox-dir': { type: 'string' },
        'storage-dir': { type: 'string' },
        'redis-url': { type: 'string' },
        engine: { type: 'string' },
        'script-timeout-ms': { type: 'string' },
        'trust-proxy': { type: 'string' },
        config: { type: 'string' },
        'no-index': { type: 'boolean' },
        quiet: { type: 'boolean' },
        help: { type: 'boolean', short: 'h' },
        version: { type: 'boolean', short: 'v' },
      },
    });
  } catch (e) {
    throw new UsageError((e as Error).message);
  }
  const { values: v, positionals } = parsed;
  if (v.help) return { command: 'help' };
  if (v.version) return { command: 'version' };
  const [command, root, ...extra] = positionals;
  if (command === undefined || command === 'help') return { command: 'help' };
  if (command !== 'serve') throw new UsageError(`unknown command '${command}' (the command is serve)`);
  if (root === undefined && v.config === undefined) throw new UsageError('serve needs the folder of apps: scriptable-api serve <root> (or `root` in a --config file)');
  if (root === '') throw new UsageError("serve needs the folder of apps, got ''");
  // (an unset variable in `--host "$HOST"`: '' would mean every interface, or the current folder)
  for (const [name, value] of Object.entries(v)) {
    if (value === '') throw new UsageError(`--${name} needs a value, got ''`);
  }
  if (extra.length > 0) throw new UsageError(`unexpected argument '${extra[0]}'`);
  if (v.engine !== undefined && v.engine !== 'quickjs' && v.engine !== 'vm2') throw new UsageError(`--engine must be quickjs or vm2, got '${v.engine}'`);
  if (v.mount !== undefined && !v.mount.startsWith('/')) throw new UsageError(`--mount must start with '/', got '${v.mount}'`);
  if (v.mount !== undefined && !PLAIN_MOUNT.test(v.mount)) throw new UsageError(`--mount ${MOUNT_RULE}, got '${v.mount}'`);
  const trustProxy = v['trust-proxy'] === undefined ? undefined : parseTrustProxy(v['trust-proxy']);
  const trustProblem = trustProxy === undefined ? undefined : trustProxyProblem(trustProxy);
  if (trustProblem !== undefined) throw new UsageError(`--trust-proxy must be ${TRUST_PROXY_RULE}, got '${v['trust-proxy']}' (${trustProblem})`);
  return {
    command: 'serve',
    root,
    port: integer(v.port, '--port', 0, 65535),
    host: v.host,
    mount: v.mount,
    previewRoot: v['preview-root'],
    sandboxDir: v['sandbox-dir'],
    storageDir: v['storage-dir'],
    redisUrl: v['redis-url'],
    engine: v.engine as CliArgs['engine'],
    scriptTimeoutMs: integer(v['script-timeout-ms'], '--script-timeout-ms', 1, 2147483647),
    trustProxy,
    config: v.config,
    index: v['no-index'] ? false : undefined,
    quiet: v.quiet,
  };
}
