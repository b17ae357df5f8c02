/**
 * Reads one app folder into memory, validating every file:
 *   <app>/apis/*.json          one ApiDefinition each
 *   <app>/scripts/**           .js / .ts sources, named by their path below scripts/ ('lib/util.js')
 *   <app>/automations/*.json   one AutomationDefinition each
 * A file that fails (bad JSON, a field the schema refuses, an interactive step...) is left out
 * and reported as a problem naming the file and the field; the rest of the app loads.
 */
import * as fs from 'node:fs';
import * as path from 'node:path';
import { isUtf8 } from 'node:buffer';
import { ConfigError } from '../errors';
import { apiName, validateApiDefinition } from '../validations';
import { deepFreeze } from '../definitions/frozen';
import { automationScripts } from '../automation/compile';
import type { ApiDefinition, AutomationDefinition, AutomationRef, ScriptRef } from '../types';

/** A file that was left out (`error`) or loaded with something to fix (`warning`). */
export interface RegistryProblem {
  level: 'error' | 'warning';
  /** Relative to the registry's root, e.g. `shop/apis/orders-list.json`. */
  file: string;
  message: string;
}

/** One app's content, replaced as a whole on every reload. */
export interface AppState {
  readonly apis: ReadonlyMap<string, ApiDefinition>;
  readonly scripts: ReadonlyMap<string, string>;
  readonly automations: ReadonlyMap<string, AutomationDefinition>;
  readonly problems: readonly RegistryProblem[];
}

/** Largest file read (a script or a definition). */
export const MAX_FILE_BYTES = 5 * 1024 * 1024;
const SCRIPT = /\.(js|ts)$/;

/** Whether `p` is a folder itself, not a symbolic link to one (an app reads only its own folder). */
export function isRealFolder(p: string): boolean {
  try {
    return fs.lstatSync(p).isDirectory();
  } catch {
    return false;
  }
}

/** Errors of a process short of file descriptors or memory for now (a busy server at its `ulimit -n`), not of the files. */
const NOT_NOW = new Set(['EMFILE', 'ENFILE', 'EAGAIN', 'EBUSY', 'ENOMEM']);

/**
 * An app's folder or file could not be read for now (NOT_NOW): the app is not replaced by what
 * could be read (an app with no APIs), it is served as it was and read again later.
 */
export class ReadLater extends Error {}

/** `e` as ReadLater when it is an error of the moment, else unchanged. */
export function readLater(e: unknown): unknown {
  const code = (e as NodeJS.ErrnoException)?.code;
  return typeof code === 'string' && NOT_NOW.has(code) ? new ReadLater((e as Error).message) : e;
}

/**
 * Entries of a folder (none when it does not exist or is a link); regular files, folders and
 * links (which the callers report and skip), no dot files. A folder that cannot be listed is
 * `unreadable` (and has none), or ReadLater.
 */
function entries(dir: string, unreadable: (e: unknown) => void): fs.Dirent[] {
  if (!isRealFolder(dir)) return [];
  let list: fs.Dirent[];
  try {
    list = fs.readdirSync(dir, { withFileTypes: true });
  } catch (e) {
    const code = (e as NodeJS.ErrnoException)?.code;
    if (code === 'ENOENT' || code === 'ENOTDIR') return []; // (gone meanwhile: its watcher reports it)
    const err = readLater(e);
    if (err instanceof ReadLater) throw err;
    unreadable(e);
    return [];
  }
  return list
    .filter((e) => !e.name.startsWith('.') && (e.isFile() || e.isDirectory() || e.isSymbolicLink()))
    .sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0));
}

/** What a file that is not UTF-8 text is read as: the problem says so (a warning). */
const NOT_UTF8 = "is not UTF-8 text: it is read with U+FFFD ('�') in place of each byte that is not (save it as UTF-8)";

/**
 * A file's text, read as UTF-8. A file saved as UTF-16 (a byte order mark FF FE or FE FF: Windows
 * PowerShell's `>`, some editors) is refused, naming its encoding (read as UTF-8 it would be a JSON
 * error of NULs, or a script failing each call with "unexpected character"); one with bytes that
 * are not UTF-8 (Latin-1: 'café') is read as UTF-8 all the same, and `notUtf8` is told.
 */
function readText(file: string, notUtf8: () => void): string {
  let bytes: Buffer;
  try {
    const size = fs.statSync(file).size;
    if (size > MAX_FILE_BYTES) throw new Error(`is larger than ${MAX_FILE_BYTES} bytes`);
    bytes = fs.readFileSync(file);
  } catch (e) {
    throw readLater(e);
  }
  if (bytes.length >= 2 && ((bytes[0] === 0xff && bytes[1] === 0xfe) || (bytes[0] === 0xfe && bytes[1] === 0xff))) {
    throw new Error(`is UTF-16 text (${bytes[0] === 0xff ? 'little' : 'big'}-endian, by its byte order mark): save it as UTF-8`);
  }
  if (!isUtf8(bytes)) notUtf8();
  return bytes.toString('utf8');
}

/** The message of a ConfigError without the library's prefix (the file name takes its place). */
function reason(e: unknown): string {
  const m = (e as Error)?.message ?? String(e);
  return m.replace(/^scriptable-api: /, '');
}

function refScript(ref: ScriptRef | AutomationRef | undefined): string | undefined {
  return ref && typeof (ref as ScriptRef).script === 'string' ? (ref as ScriptRef).script : undefined;
}

/**
 * Every `.js` / `.ts` file below `dir`, by its path relative to `dir` with '/' separators; links to
 * `onLink`, folders that cannot be listed to `unreadable` (by their path relative to `dir`).
 */
function listScripts(dir: string, onLink: (name: string) => void, unreadable: (name: string, e: unknown) => void, prefix = '', out: string[] = [], depth = 0): string[] {
  if (depth > 16) return out;
  for (const e of entries(dir, (err) => unreadable(prefix.replace(/\/$/, ''), err))) {
    if (e.isDirectory()) listScripts(path.join(dir, e.name), onLink, unreadable, `${prefix}${e.name}/`, out, depth + 1);
    // (a link to a folder of scripts, `scripts/lib`, is reported as a linked script is)
    else if (e.isSymbolicLink()) {
      if (SCRIPT.test(e.name) || leadsToFolder(path.join(dir, e.name))) onLink(prefix + e.name);
    } else if (SCRIPT.test(e.name)) out.push(prefix + e.name);
  }
  return out;
}

function leadsToFolder(p: string): boolean {
  try {
    return fs.statSync(p).isDirectory();
  } catch {
    return false;
  }
}

/** A link in an app's folders: not followed (it could reach another app's files), but reported. */
export const LINKED_FILE = 'is a link: not read (an app reads only its own files)';

/**
 * Loads `<root>/<appId>`; problems name files from the root (`<appId>/apis/x.json`). Throws
 * ReadLater when the process cannot read it for now (out of file descriptors).
 */
export function loadAppFolder(root: string, appId: string): AppState {
  const dir = path.join(root, appId);
  const problems: RegistryProblem[] = [];
  const rel = (...parts: string[]) => [appId, ...parts].join('/');

  for (const folder of ['apis', 'scripts', 'automations']) {
    const link = path.join(dir, folder);
    if (fs.existsSync(link) && !isRealFolder(link)) problems.push({ level: 'warning', file: rel(folder), message: 'is not a folder of the app (a link?): not read' });
  }

  // (a folder that cannot be listed, as a file that cannot be read, is reported: its files are not loaded)
  const unreadable = (file: string, e: unknown) => problems.push({ level: 'error', file, message: `could not be read: ${reason(e)}` });
  const scripts = new Map<string, string>();
  const linked = (file: string) => problems.push({ level: 'warning', file, message: LINKED_FILE });
  const scriptsDir = path.join(dir, 'scripts');
  for (const name of listScripts(scriptsDir, (name) => linked(rel('scripts', name)), (sub, e) => unreadable(sub === '' ? rel('scripts') : rel('scripts', sub), e))) {
    try {
      const file = rel('scripts', name);
      scripts.set(name, readText(path.join(scriptsDir, ...name.split('/')), () => problems.push({ level: 'warning', file, message: NOT_UTF8 })));
    } catch (e) {
      if (e instanceof ReadLater) throw e;
      problems.push({ level: 'error', file: rel('scripts', name), message: `could not be read: ${reason(e)}` });
    }
  }

  const readJson = (abs: string, file: string): unknown => {
    const text = readText(abs, () => problems.push({ level: 'warning', file, message: NOT_UTF8 }));
    try {
      // (a byte order mark, as some editors save UTF-8, is no part of the JSON)
      return JSON.parse(text.charCodeAt(0) === 0xfeff ? text.slice(1) : text);
    } catch (e) {
      throw new Error(`is not valid JSON (${(e as Error).message})`);
    }
  };

  const automations = new Map<string, AutomationDefinition>();
  const automationFile = new Map<string, string>();
  for (const e of entries(path.join(dir, 'automations'), (err) => unreadable(rel('automations'), err))) {
    if (e.isDirectory() || !e.name.endsWith('.json')) continue;
    const file = rel('automations', e.name);
    if (e.isSymbolicLink()) {
      linked(file);
      continue;
    }
    try {
      const def = deepFreeze(readJson(path.join(dir, 'automations', e.name), file)) as AutomationDefinition;
      const calls = automationScripts(def);
      const other = automationFile.get(def.id);
      if (other !== undefined) throw new Error(`the automation id '${def.id}' is already defined by ${other}`);
      automations.set(def.id, def);
      automationFile.set(def.id, file);
      for (const s of calls) {
        if (!scripts.has(s)) problems.push({ level: 'warning', file, message: `a script step calls '${s}', which is not in ${rel('scripts')}/` });
      }
    } catch (err) {
      if (err instanceof ReadLater) throw err;
      problems.push({ level: 'error', file, message: `${reason(err)}; the automation is disabled until the file is fixed` });
    }
  }

  const apis = new Map<string, ApiDefinition>();
  const apiFile = new Map<string, string>();
  for (const e of entries(path.join(dir, 'apis'), (err) => unreadable(rel('apis'), err))) {
    if (e.isDirectory() || !e.name.endsWith('.json')) continue;
    const file = rel('apis', e.name);
    if (e.isSymbolicLink()) {
      linked(file);
      continue;
    }
    try {
      const raw = readJson(path.join(dir, 'apis', e.name), file) as { path?: unknown };
      const def = deepFreeze(validateApiDefinition(raw, apiName(raw)));
      const other = apiFile.get(def.path);
      if (other !== undefined) throw new ConfigError(`api '${def.path}'.path`, `is already defined by ${other}`);
      apis.set(def.path, def);
      apiFile.set(def.path, file);
      for (const ref of [def.before, def.call, def.after, def.onError]) {
        const s = refScript(ref);
        if (s !== undefined && !scripts.has(s)) problems.push({ level: 'warning', file, message: `refers to the script '${s}', which is not in ${rel('scripts')}/` });
      }
      for (const ref of [def.call, def.after]) {
        const a = ref && (ref as AutomationRef).automation;
        if (typeof a === 'string' && !automations.has(a)) problems.push({ level: 'warning', file, message: `refers to the automation '${a}', which is not in ${rel('automations')}/ (or is disabled)` });
      }
    } catch (err) {
      if (err instanceof ReadLater) throw err;
      problems.push({ level: 'error', file, message: `${reason(err)}; the API is disabled until the file is fixed` });
    }
  }
  return { apis, scripts, automations, problems };
}

/** Whether a folder name can be an app id. */
export function isAppId(name: string): boolean {
  return name !== '' && !name.startsWith('.') && !/[/\\\0]/.test(name);
}
