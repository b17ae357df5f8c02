/**
 * The serve command's settings: the command line over a config file (`--config`), over the
 * defaults. A config file is JSON, or a JavaScript module exporting the options (or a function
 * returning them, maybe async) for what JSON cannot hold (accounts, automations...). Besides the
 * server's own keys it holds any createApiRouter option; relative paths are taken from the
 * file's folder.
 */
import * as fs from 'node:fs';
import * as path from 'node:path';
import { pathToFileURL } from 'node:url';
import type { ApiRouterOptions, Logger } from '../types';
import { MOUNT_RULE, PLAIN_MOUNT, type CliArgs } from './args';
import { nearestName, shown } from '../definitions/names';
import { ROUTER_KEYS } from '../validations';
import { logLine, lostLine } from '../logging';
import { TRUST_PROXY_RULE, trustProxyProblem, type TrustProxy } from './trust-proxy';

/** What `serve` runs with. */
export interface ServeConfig {
  root: string;
  previewRoot?: string;
  port: number;
  host: string;
  mount: string;
  /** List the apps and their APIs at the mount point. */
  index: boolean;
  /** No line per request. */
  quiet: boolean;
  redisUrl?: string;
  /** Express's `trust proxy` setting of the server's app (unset: no proxy is trusted). */
  trustProxy?: TrustProxy;
  /** Longest wait at shutdown for the requests in flight, ms (then their connections are closed). */
  shutdownTimeoutMs: number;
  /**
   * Longest time a request's headers and body may take to arrive, ms (Node.js's `requestTimeout`;
   * 0: no limit). Past it the request is answered 408 (270107).
   */
  requestTimeoutMs: number;
  /** createApiRouter options other than the registry. */
  router: Omit<ApiRouterOptions, 'registry'>;
}

export const DEFAULT_PORT = 3000;
export const DEFAULT_HOST = '127.0.0.1';
export const DEFAULT_MOUNT = '/web0/api';

/** Keys of a config file that are the server's, not the router's. */
const SERVER_KEYS = ['root', 'previewRoot', 'port', 'host', 'mount', 'index', 'quiet', 'redisUrl', 'trustProxy', 'shutdownTimeoutMs', 'requestTimeoutMs'] as const;
export const DEFAULT_SHUTDOWN_TIMEOUT_MS = 30_000;
/** Node.js's own default: an upload of `upload.fileSize` (1 GB) needs 3.4 MB/s to arrive within it. */
export const DEFAULT_REQUEST_TIMEOUT_MS = 300_000;
const PATH_KEYS = ['root', 'previewRoot', 'sandboxDir', 'storageDir'];

export class ConfigFileError extends Error {}

/**
 * Node.js's own `import()`: tsc (module commonjs) turns an `import()` written in this file into
 * `require()`, which refuses an ES module with top-level await (and any ES module before Node.js
 * 20.19). Made only when needed (`--disallow-code-generation-from-strings` refuses it).
 */
function importModule(url: string): Promise<unknown> {
  // eslint-disable-next-line @typescript-eslint/no-implied-eval
  return (new Function('url', 'return import(url)') as (url: string) => Promise<unknown>)(url);
}

/** A JavaScript config file: `require` (CommonJS, and ES modules Node.js can require), else `import()`. */
async function loadModule(abs: string): Promise<unknown> {
  try {
    // eslint-disable-next-line @typescript-eslint/no-require-imports
    return require(abs);
  } catch (e) {
    const code = (e as NodeJS.ErrnoException)?.code;
    if (code !== 'ERR_REQUIRE_ASYNC_MODULE' && code !== 'ERR_REQUIRE_ESM') throw e;
    return importModule(pathToFileURL(abs).href);
  }
}

async function readConfigFile(file: string): Promise<Record<string, unknown>> {
  const abs = path.resolve(file);
  if (!fs.existsSync(abs)) throw new ConfigFileError(`the config file ${file} does not exist`);
  let value: unknown;
  if (abs.endsWith('.json')) {
    try {
      const text = fs.readFileSync(abs, 'utf8');
      // (a byte order mark, as some editors save UTF-8, is no part of the JSON: as in an app's definitions)
      value = JSON.parse(text.charCodeAt(0) === 0xfeff ? text.slice(1) : text);
    } catch (e) {
      throw new ConfigFileError(`the config file ${file} is not valid JSON (${(e as Error).message})`);
    }
  } else {
    try {
      const mod = (await loadModule(abs)) as { default?: unknown };
      value = mod && typeof mod === 'object' && 'default' in mod ? mod.default : mod;
      if (typeof value === 'function') value = await (value as () => unknown)();
    } catch (e) {
      // (a syntax error's message names no file: the reader would not know which one failed)
      const why = e instanceof Error ? `${e.name}: ${e.message}` : String(e);
      throw new ConfigFileError(`the config file ${file} could not be loaded (${why})`);
    }
  }
  if (typeof value !== 'object' || value === null || Array.isArray(value)) throw new ConfigFileError(`the config file ${file} must hold an object of options`);
  const out: Record<string, unknown> = { ...(value as Record<string, unknown>) };
  checkKeys(out);
  for (const k of PATH_KEYS) {
    if (out[k] === '') throw new ConfigFileError(`${k} must be a folder path, got ""`); // (path.resolve would make it the file's folder)
    if (typeof out[k] === 'string') out[k] = path.resolve(path.dirname(abs), out[k] as string);
  }
  // upload.tmpDir is a folder path too (an empty one is left to the router's check, which names it)
  const upload = out.upload;
  if (upload !== null && typeof upload === 'object' && !Array.isArray(upload)) {
    const tmpDir = (upload as Record<string, unknown>).tmpDir;
    if (typeof tmpDir === 'string' && tmpDir !== '') out.upload = { ...upload, tmpDir: path.resolve(path.dirname(abs), tmpDir) };
  }
  return out;
}

/** The keys a config file may hold: the server's own, then the router's (the command makes the registry). */
const FILE_KEYS: readonly string[] = [...SERVER_KEYS, ...ROUTER_KEYS.filter((k) => k !== 'registry')];

/** An unknown key is a typo (`shutdownTimeoutMS` would silently keep the default): refused, naming the one meant. */
function checkKeys(file: Record<string, unknown>): void {
  for (const k of Object.keys(file)) {
    if (k === 'registry') throw new ConfigFileError('invalid registry: is not an option of a config file: the apps folder (root) is the registry');
    if (FILE_KEYS.includes(k)) continue;
    const near = nearestName(k, FILE_KEYS);
    throw new ConfigFileError(
      `invalid ${k}: is not an option${near ? ` (did you mean '${near}'?)` : `; the options are ${SERVER_KEYS.join(', ')} and the createApiRouter options`}`,
    );
  }
}

/** A server key of the config file that must be a string (or absent). */
function fileString(file: Record<string, unknown>, key: string): string | undefined {
  const v = file[key];
  if (v !== undefined && typeof v !== 'string') throw new ConfigFileError(`${key} must be a string, got ${shown(v)}`);
  return v;
}

/** A server key of the config file that must be a boolean (or absent): `"false"` is not false. */
function fileBoolean(file: Record<string, unknown>, key: string): boolean | undefined {
  const v = file[key];
  if (v !== undefined && typeof v !== 'boolean') throw new ConfigFileError(`${key} must be true or false, got ${shown(v)}`);
  return v;
}

/** A server key of the config file that is a duration in ms (0 to 2147483647), `fallback` when absent. */
function fileMs(file: Record<string, unknown>, key: string, fallback: number): number {
  const v = file[key] ?? fallback;
  if (typeof v !== 'number' || !Number.isInteger(v) || v < 0 || v > 2147483647) throw new ConfigFileError(`${key} must be an integer of ms from 0 to 2147483647, got ${JSON.stringify(v)}`);
  return v;
}

/** Whether folder `inner` is `outer` or inside it. */
function within(inner: string, outer: string): boolean {
  const rel = path.relative(path.resolve(outer), path.resolve(inner));
  return rel === '' || (!rel.startsWith('..') && !path.isAbsolute(rel));
}

/**
 * The folders scripts write to (`sandboxDir`, `storageDir`) apart from the apps folders: an app's
 * sandbox inside its own folder would let its scripts rewrite its APIs and scripts, as files.
 */
function checkAreasApart(root: string, previewRoot: string | undefined, router: Record<string, unknown>): void {
  const apps = previewRoot === undefined ? [['root', root]] : [['root', root], ['previewRoot', previewRoot]];
  for (const key of ['sandboxDir', 'storageDir']) {
    const area = router[key];
    if (typeof area !== 'string' || area === '') continue;
    for (const [name, folder] of apps) {
      if (within(area, folder) || within(folder, area)) {
        throw new ConfigFileError(`${key} (${area}) and ${name} (${folder}) must be apart, neither inside the other: scripts write to ${key}, and would rewrite the apps' own files`);
      }
    }
  }
}

function pick<T>(flag: T | undefined, file: unknown, fallback: T): T {
  return flag !== undefined ? flag : file !== undefined ? (file as T) : fallback;
}

export async function resolveConfig(args: CliArgs, cwd = process.cwd()): Promise<ServeConfig> {
  const file = args.config === undefined ? {} : await readConfigFile(path.resolve(cwd, args.config));
  const router: Record<string, unknown> = {};
  for (const [k, v] of Object.entries(file)) if (!(SERVER_KEYS as readonly string[]).includes(k)) router[k] = v;
  const abs = (p: string | undefined) => (p === undefined ? undefined : path.resolve(cwd, p));
  if (args.sandboxDir !== undefined) router.sandboxDir = abs(args.sandboxDir);
  if (args.storageDir !== undefined) {
    router.storageDir = abs(args.storageDir);
    // (the flag names the shared storage, as a file's storage does: flags win, as --redis-url over rateLimit.store)
    delete router.storage;
  }
  if (args.engine !== undefined) router.engine = args.engine;
  if (args.scriptTimeoutMs !== undefined) router.scriptTimeoutMs = args.scriptTimeoutMs;
  const root = abs(args.root) ?? (file.root as string | undefined);
  if (root === undefined) throw new ConfigFileError('no apps folder: scriptable-api serve <root>');
  if (typeof root !== 'string') throw new ConfigFileError(`root must be the path of the apps folder, got ${JSON.stringify(root)}`);
  const mount = pick(args.mount, fileString(file, 'mount'), DEFAULT_MOUNT);
  if (!mount.startsWith('/')) throw new ConfigFileError(`mount must start with '/', got ${JSON.stringify(mount)}`);
  if (!PLAIN_MOUNT.test(mount)) throw new ConfigFileError(`mount ${MOUNT_RULE}, got ${JSON.stringify(mount)}`);
  const shutdownTimeoutMs = fileMs(file, 'shutdownTimeoutMs', DEFAULT_SHUTDOWN_TIMEOUT_MS);
  const requestTimeoutMs = fileMs(file, 'requestTimeoutMs', DEFAULT_REQUEST_TIMEOUT_MS);
  const previewRoot = abs(args.previewRoot) ?? fileString(file, 'previewRoot');
  if (previewRoot !== undefined && !router.preview) {
    // (without it the router serves no preview path: `/preview/…` would name an app called 'preview')
    throw new ConfigFileError(
      '--preview-root (previewRoot) serves nothing without `preview: { authorize(req) }` in a --config file (a JavaScript module): previews are never public, authorize decides who sees them',
    );
  }
  const host = pick(args.host, fileString(file, 'host'), DEFAULT_HOST);
  if (host === '') throw new ConfigFileError('host must be an address such as 127.0.0.1 or 0.0.0.0, got ""');
  // (the flag, parseCli checked; the file's value, when the flag does not override it)
  const trustProxy = args.trustProxy ?? file.trustProxy;
  const trustProblem = args.trustProxy !== undefined || trustProxy === undefined ? undefined : trustProxyProblem(trustProxy);
  if (trustProblem !== undefined) throw new ConfigFileError(`trustProxy must be ${TRUST_PROXY_RULE}, got ${shown(trustProxy)} (${trustProblem})`);
  const redisUrl = pick(args.redisUrl, fileString(file, 'redisUrl'), undefined as string | undefined);
  // (as --redis-url '': the rate limits would stay in this process without a word)
  if (redisUrl === '') throw new ConfigFileError(`redisUrl must be a Redis URL such as 'redis://host:6379', got ""`);
  // (the store redisUrl makes takes the place of rateLimit.store: one of the file's two would be dropped; a --redis-url flag wins, as flags do)
  const fileStore = (file.rateLimit as { store?: unknown } | null | undefined)?.store;
  if (args.redisUrl === undefined && file.redisUrl !== undefined && fileStore !== undefined) {
    throw new ConfigFileError('redisUrl and rateLimit.store both name the rate-limit store: give one of them');
  }
  checkAreasApart(root, previewRoot, router);
  const port = pick(args.port, file.port, DEFAULT_PORT);
  if (typeof port !== 'number' || !Number.isInteger(port) || port < 0 || port > 65535) throw new ConfigFileError(`port must be an integer from 0 to 65535, got ${JSON.stringify(port)}`);
  return {
    root,
    previewRoot,
    port,
    host,
    mount: mount.replace(/\/+$/, '') || '/',
    index: pick(args.index, fileBoolean(file, 'index'), true),
    quiet: pick(args.quiet, fileBoolean(file, 'quiet'), false),
    redisUrl,
    shutdownTimeoutMs,
    requestTimeoutMs,
    trustProxy: trustProxy as TrustProxy | undefined,
    router: router as Omit<ApiRouterOptions, 'registry'>,
  };
}

/**
 * The reader of stdout or stderr going away (`serve … | head`, a log shipper restarting) fails the
 * next write with EPIPE: an 'error' event nobody listened to, which ended the process and every
 * request in flight. Such a line is lost; the server goes on.
 */
function loseLinesOnWriteError(stream: NodeJS.WriteStream): NodeJS.WriteStream {
  if (!stream.listeners('error').includes(lostLine)) stream.on('error', lostLine);
  return stream;
}

/** The CLI's logger: info to stdout, warnings and errors to stderr, one line each with its meta as JSON (control characters escaped). */
export function consoleLogger(): Logger {
  const line = (stream: NodeJS.WriteStream) => {
    loseLinesOnWriteError(stream);
    return (message: string, meta?: Record<string, unknown>) => void stream.write(`${logLine(message, meta)}\n`);
  };
  return { info: line(process.stdout), debug: line(process.stdout), warn: line(process.stderr), error: line(process.stderr) };
}
