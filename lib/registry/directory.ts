/**
 * DirectoryRegistry: apps as a folder of files, live on disk.
 *
 *   <root>/<appId>/apis/*.json          one ApiDefinition each (schemas/api-definition.json)
 *   <root>/<appId>/scripts/**           .js / .ts ES modules, named by their path below scripts/
 *   <root>/<appId>/automations/*.json   one AutomationDefinition each (schemas/automation.json)
 *
 * Every file is validated when read; a bad one disables only its own API or automation and is
 * reported through the logger with the file and the field. Changes are picked up by watching the
 * folders (debounced), and an app's whole state is replaced at once: no request sees half an app.
 * `previewRoot` (same layout) holds the unpublished versions served on the preview path.
 */
import { EventEmitter } from 'node:events';
import * as fs from 'node:fs';
import * as path from 'node:path';
import { MAX_TIMER_MS } from '../timers';
import { ConfigError } from '../errors';
import { onlyKnownKeys, type Same } from '../validations';
import { shown } from '../definitions/names';
import { adaptLogger, defaultLogger } from '../logging';
import type { ApiDefinition, ApiRegistry, AutomationDefinition, Logger } from '../types';
import { isAppId, isRealFolder, LINKED_FILE, loadAppFolder, ReadLater, readLater, type AppState, type RegistryProblem } from './app-folder';
import { FolderWatch } from './folder-watch';

export type { RegistryProblem } from './app-folder';

export interface DirectoryRegistryOptions {
  /** The folder of published apps: one sub-folder per app id. */
  root: string;
  /** The folder of preview (unpublished) apps, same layout. Without it, the preview stage has nothing. */
  previewRoot?: string;
  /** Where problems and reloads are reported. Default: the console (nothing under NODE_ENV=test); `false`: nowhere. */
  logger?: Logger | false;
  /** Quiet time after the last change before an app is reloaded, ms. Default 100. */
  debounceMs?: number;
  /** Watch the folders for changes. Default true (`false`: call `reload()` yourself). */
  watch?: boolean;
}

/** What the `reload` event carries. */
export interface DirectoryReload {
  stage: 'published' | 'preview';
  appId: string;
  /** False when the app's folder is gone (the app was removed). */
  present: boolean;
  problems: readonly RegistryProblem[];
}

/** How soon an app (or the root) that could not be read for now (ReadLater: out of file descriptors) is read again, ms. */
const READ_AGAIN_MS = 1000;

/** A root read again by the watcher goes a slice of apps per turn of the event loop: at most this many apps... */
const SLICE_APPS = 50;
/** ...or this long, ms. */
const SLICE_MS = 20;

/** The next app incarnation (appGeneration): unique in the process, so never one a router saw before. */
let nextGeneration = 1;

/** One root's apps. */
class AppTree {
  readonly apps = new Map<string, AppState>();
  /** Each app's incarnation: a new one when its folder appears (again). */
  readonly generations = new Map<string, number>();
  private readonly timers = new Map<string | null, NodeJS.Timeout>();
  private readonly watch: FolderWatch | undefined;
  /** The next slice of a root being read again (reloadRoot). */
  private pass: NodeJS.Immediate | undefined;
  /**
   * Which pass is current: a pass stopped (by another, by `reload()` or by `close()`, maybe from a
   * `reload` listener in the middle of a slice) reads no further app.
   */
  private passes = 0;

  constructor(
    readonly root: string,
    readonly stage: 'published' | 'preview',
    private readonly owner: DirectoryRegistry,
    private readonly logger: Logger | undefined,
    private readonly debounceMs: number,
    watch: boolean,
  ) {
    // (watched first, then read: a file that changes while the apps are read, after its app was,
    // is a change the watchers see; read first, it would be seen by neither, and served stale)
    const ids = this.appIds() ?? [];
    if (watch) {
      const quiet = () => undefined;
      this.watch = new FolderWatch(root, (appId) => this.schedule(appId), logger ?? { info: quiet, warn: quiet, error: quiet });
      this.watch.sync(ids);
    }
    for (const appId of ids) this.load(appId, false);
  }

  /**
   * The app folders in the root (none when it cannot be read); undefined when it cannot be read
   * for now (out of file descriptors): the apps are kept as they are, and the root read again soon.
   */
  private appIds(): string[] | undefined {
    try {
      const all = fs.readdirSync(this.root, { withFileTypes: true });
      for (const e of all) if (e.isSymbolicLink() && isAppId(e.name)) this.linked(e.name);
      return all
        .filter((e) => e.isDirectory() && isAppId(e.name))
        .map((e) => e.name)
        .sort();
    } catch (e) {
      const err = readLater(e);
      if (err instanceof ReadLater) {
        this.notNow(null, err);
        return undefined;
      }
      this.logger?.warn(`scriptable-api: the apps folder ${this.root} cannot be read`);
      return [];
    }
  }

  /** A link in the apps folder: not an app (it could be another app's folder), but said so, as a linked file in an app is. */
  private linked(name: string): void {
    const where = this.stage === 'preview' ? ' (preview)' : '';
    this.logger?.warn(`scriptable-api: ${name}${where}: ${LINKED_FILE}`);
  }

  /**
   * An app (null: the root) that could not be read for now: reported, kept as it was (a busy
   * server out of file descriptors must not take that for an app with no APIs, nor for no apps:
   * nothing on disk changed to read it again later), and read again in READ_AGAIN_MS.
   */
  private notNow(appId: string | null, e: Error): void {
    const where = this.stage === 'preview' ? ' (preview)' : '';
    const what = appId === null ? `the apps folder ${this.root}${where}` : `app '${appId}'${where}`;
    const kept = appId === null ? 'its apps are served as they were' : this.apps.has(appId) ? 'it is served as it was' : 'it is not served yet';
    this.logger?.error(`scriptable-api: ${what} cannot be read now (${e.message}): ${kept}; read again in ${READ_AGAIN_MS / 1000} s`);
    this.schedule(appId, Math.max(this.debounceMs, READ_AGAIN_MS));
  }

  /** Whether `<root>/<appId>` is an app: a folder of its own, as at startup (not a link to another app's, nor a file). */
  private isApp(appId: string): boolean {
    return isAppId(appId) && isRealFolder(path.join(this.root, appId));
  }

  /**
   * Reads the app folder and swaps the app's state in one assignment. Nothing there, and no app
   * before (a file in the root such as deploy.lock, an app already removed): nothing to report.
   * A link in the root where an app could be is reported; an app that cannot be read for now
   * (ReadLater) is kept as it was and read again later.
   */
  load(appId: string, reloaded: boolean): void {
    const present = this.isApp(appId);
    if (!present && isAppId(appId) && isLink(path.join(this.root, appId))) this.linked(appId);
    if (!present && !this.apps.has(appId)) return;
    let state: AppState | undefined;
    try {
      state = present ? loadAppFolder(this.root, appId) : undefined;
    } catch (e) {
      if (!(e instanceof ReadLater)) throw e;
      this.notNow(appId, e);
      return;
    }
    if (state) {
      // (an app that appears, or appears again after its folder went, is a new incarnation)
      if (!this.apps.has(appId)) this.generations.set(appId, nextGeneration++);
      this.apps.set(appId, state);
    } else {
      this.apps.delete(appId);
      this.generations.delete(appId);
    }
    const where = this.stage === 'preview' ? ' (preview)' : '';
    for (const p of state?.problems ?? []) {
      const line = `scriptable-api: ${p.file}${where}: ${p.message}`;
      if (p.level === 'error') this.logger?.error(line);
      else this.logger?.warn(line);
    }
    if (reloaded) {
      const what = state ? `${state.apis.size} APIs, ${state.scripts.size} scripts, ${state.automations.size} automations` : 'removed';
      this.logger?.info(`scriptable-api: reloaded app '${appId}'${where}: ${what}`);
    }
    this.owner.emit('reload', { stage: this.stage, appId, present: state !== undefined, problems: state?.problems ?? [] } satisfies DirectoryReload);
  }

  /** `appId` null: re-read the root. A name in the root that cannot be an app (`.DS_Store`) is no change. */
  private schedule(appId: string | null, delayMs = this.debounceMs): void {
    if (appId !== null && !isAppId(appId)) return;
    clearTimeout(this.timers.get(appId));
    const timer = setTimeout(() => {
      this.timers.delete(appId);
      if (appId === null) this.reloadRoot();
      else this.reload(appId);
    }, delayMs);
    timer.unref();
    this.timers.set(appId, timer);
  }

  /** Reloads one app, or (null) re-reads the root: apps added, removed, or all of them. */
  reload(appId: string | null): void {
    if (appId === null) this.stopPass();
    // (each app's folders watched as they are now before they are read: see the constructor)
    if (appId !== null) {
      this.watch?.syncApp(appId, this.isApp(appId));
      this.load(appId, true);
      return;
    }
    const ids = this.appIds();
    if (ids === undefined) return;
    const now = new Set(ids);
    this.watch?.sync(now);
    for (const id of [...this.apps.keys()]) if (!now.has(id)) this.load(id, true);
    for (const id of now) this.load(id, true);
  }

  /**
   * Re-reads the root as the watcher asks (the folder replaced: a release swapped in): apps gone,
   * then every app, a slice per turn of the event loop, each app swapped in and watched as it is
   * read. In one go, thousands of apps blocked every request for seconds.
   */
  private reloadRoot(): void {
    this.stopPass();
    this.watch?.syncRoot();
    const now = this.appIds();
    if (now === undefined) return;
    const present = new Set(now);
    const queue = [...[...this.apps.keys()].filter((id) => !present.has(id)), ...now];
    let next = 0;
    const current = this.passes;
    const slice = (): void => {
      this.pass = undefined;
      const until = performance.now() + SLICE_MS;
      for (let n = 0; this.passes === current && next < queue.length && n < SLICE_APPS && (n === 0 || performance.now() < until); n++) this.reload(queue[next++]);
      if (this.passes === current && next < queue.length) {
        this.pass = setImmediate(slice);
        this.pass.unref();
      }
    };
    slice();
  }

  private stopPass(): void {
    this.passes++;
    if (this.pass !== undefined) clearImmediate(this.pass);
    this.pass = undefined;
  }

  close(): void {
    this.stopPass();
    for (const t of this.timers.values()) clearTimeout(t);
    this.timers.clear();
    this.watch?.close();
  }
}

/** The keys of DirectoryRegistryOptions (the build fails when one is added to the type and not here). */
const OPTION_KEYS = ['root', 'previewRoot', 'logger', 'debounceMs', 'watch'] as const;
const keysMatch: Same<keyof DirectoryRegistryOptions, (typeof OPTION_KEYS)[number]> = true;
void keysMatch;

/**
 * Whether `p` is a link. An apps folder that cannot be looked into (its permissions changed, or a
 * link to it that now leads to a file: ENOTDIR, EACCES) has no links: its apps go, as when it
 * cannot be listed, instead of the error ending the process from the watcher's timer.
 */
function isLink(p: string): boolean {
  try {
    return fs.lstatSync(p, { throwIfNoEntry: false })?.isSymbolicLink() === true;
  } catch {
    return false;
  }
}

/**
 * The stage argument of the registry's own methods: a typo (`'previw'`), or MemoryRegistry's
 * `{ stage: 'preview' }`, would otherwise answer for (or reload) the published apps.
 */
function checkStage(stage: unknown): 'published' | 'preview' | undefined {
  if (stage !== undefined && stage !== 'published' && stage !== 'preview') throw new ConfigError('stage', `must be 'published' or 'preview', got ${shown(stage)}`);
  return stage;
}

export class DirectoryRegistry extends EventEmitter implements ApiRegistry {
  private readonly published: AppTree;
  private readonly preview: AppTree | undefined;

  constructor(options: DirectoryRegistryOptions) {
    super();
    if (typeof options === 'object' && options !== null) onlyKnownKeys(options as unknown as Record<string, unknown>, OPTION_KEYS, '');
    if (typeof options !== 'object' || options === null || typeof options.root !== 'string' || options.root === '') {
      throw new ConfigError('root', 'new DirectoryRegistry({ root }) needs the path of the apps folder');
    }
    if (options.previewRoot !== undefined && (typeof options.previewRoot !== 'string' || options.previewRoot === '')) throw new ConfigError('previewRoot', 'must be a folder path');
    if (options.watch !== undefined && typeof options.watch !== 'boolean') throw new ConfigError('watch', `must be true or false, got ${shown(options.watch)}`);
    const l = options.logger as unknown as Record<string, unknown> | false | undefined;
    if (l !== undefined && l !== false && (typeof l !== 'object' || l === null || ['info', 'warn', 'error'].some((m) => typeof l[m] !== 'function'))) {
      throw new ConfigError('logger', 'must have info, warn and error methods (or be false)');
    }
    const debounceMs: unknown = options.debounceMs === undefined ? 100 : options.debounceMs; // (null is checked, not taken as left out)
    if (typeof debounceMs !== 'number' || !Number.isFinite(debounceMs) || debounceMs < 0 || debounceMs > MAX_TIMER_MS) {
      throw new ConfigError('debounceMs', `must be a number of ms from 0 to ${MAX_TIMER_MS}, got ${String(debounceMs)}`);
    }
    // (adapted as the router adapts its own: a logger that throws, or whose promise rejects, loses
    // that line; thrown from a reload the watcher's timer runs, it would end the process)
    const given = options.logger === false ? undefined : (options.logger ?? defaultLogger());
    const logger = given === undefined ? undefined : adaptLogger(given);
    const watch = options.watch ?? true;
    this.published = new AppTree(path.resolve(options.root), 'published', this, logger, debounceMs, watch);
    this.preview = options.previewRoot === undefined ? undefined : new AppTree(path.resolve(options.previewRoot), 'preview', this, logger, debounceMs, watch);
  }

  private tree(stage?: 'published' | 'preview'): AppTree | undefined {
    return stage === 'preview' ? this.preview : this.published;
  }

  getApi(appId: string, apiPath: string, stage?: 'published' | 'preview'): ApiDefinition | undefined {
    return this.tree(stage)?.apps.get(appId)?.apis.get(apiPath);
  }

  /** The app's incarnation: a folder removed and made again (or renamed back) gives another (ApiRegistry.appGeneration). */
  appGeneration(appId: string, stage?: 'published' | 'preview'): number | undefined {
    return this.tree(stage)?.generations.get(appId);
  }

  getScript(appId: string, name: string, stage?: 'published' | 'preview'): string | undefined {
    return this.tree(stage)?.apps.get(appId)?.scripts.get(name);
  }

  getAutomation(appId: string, id: string, stage?: 'published' | 'preview'): AutomationDefinition | undefined {
    return this.tree(stage)?.apps.get(appId)?.automations.get(id);
  }

  /** The app ids with a folder. */
  listApps(stage?: 'published' | 'preview'): string[] {
    return [...(this.tree(checkStage(stage))?.apps.keys() ?? [])].sort();
  }

  /** The APIs of an app that loaded (a file with an error is not among them). */
  listApis(appId: string, stage?: 'published' | 'preview'): ApiDefinition[] {
    return [...(this.tree(checkStage(stage))?.apps.get(appId)?.apis.values() ?? [])];
  }

  /** What the last load of each app reported: files left out (`error`) and things to fix (`warning`). */
  problems(stage?: 'published' | 'preview'): RegistryProblem[] {
    return [...(this.tree(checkStage(stage))?.apps.values() ?? [])].flatMap((a) => a.problems);
  }

  /** Reads one app (or every app) again now, without waiting for the watcher. */
  reload(appId?: string, stage?: 'published' | 'preview'): void {
    if (appId !== undefined && appId !== null && typeof appId !== 'string') throw new ConfigError('appId', `must be an app id (a string), got ${shown(appId)}`);
    this.tree(checkStage(stage))?.reload(appId ?? null);
  }

  /** Stops watching. The router does not own its registry: the host calls this when it shuts down. */
  async close(): Promise<void> {
    this.published.close();
    this.preview?.close();
  }
}
