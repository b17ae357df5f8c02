/**
 * Watches a registry root for changes: the root itself (apps appearing, going) and, per app,
 * the app folder, apis/, automations/, scripts/ and every folder below scripts/. One
 * non-recursive fs.watch per folder (recursive watching is not on every platform Node 20 runs
 * on). Events only say "something in this app changed": the registry reloads the whole app.
 */
import * as fs from 'node:fs';
import * as path from 'node:path';
import { isRealFolder } from './app-folder';

/** How often the root's identity is checked, ms. */
const ROOT_POLL_MS = 1000;
/** How often folders left unwatched by the system's limit of watchers are tried again, ms. */
const WATCH_RETRY_MS = 10_000;
/** fs.watch's errors when the system's limit is reached (Linux inotify watches or instances, open files). */
const LIMIT_CODES = new Set(['ENOSPC', 'EMFILE', 'ENFILE']);

/**
 * Events reported in one turn of the event loop (by every FolderWatch: they share the process's
 * one queue of file events). The system keeps at most fs.inotify.max_queued_events of them (Linux)
 * while the thread is busy, drops the rest, and Node.js does not say so: a turn that brings half
 * that many may have lost some, and every watched root is read again.
 */
let burst = 0;
let overflowAt: number | undefined;
const live = new Set<FolderWatch>();

function queueLimit(): number {
  try {
    return Number(fs.readFileSync('/proc/sys/fs/inotify/max_queued_events', 'utf8')) || 16384;
  } catch {
    return 16384;
  }
}

function counted(): void {
  if (burst++ > 0) return;
  setImmediate(() => {
    const n = burst;
    burst = 0;
    if (n >= (overflowAt ??= Math.max(1, Math.floor(queueLimit() / 2)))) for (const w of live) w.overflowed(n);
  });
}

/** Where FolderWatch reports. */
export interface WatchLog {
  info(message: string): void;
  warn(message: string): void;
  error(message: string): void;
}

export class FolderWatch {
  /**
   * By folder, with the folder's identity (inode and birth time: a file system may give a folder
   * made again the inode of the one deleted): a folder deleted and made again needs a new watcher.
   */
  private readonly watchers = new Map<string, { w: fs.FSWatcher; id: string; appId: string | null }>();
  /**
   * Folders fs.watch refused because the system's limit of watchers is reached, by folder (with
   * their app): tried again every WATCH_RETRY_MS, their app read again once watched (it may have
   * changed meanwhile). Reported once (one line, not one per folder) until every one is watched.
   */
  private readonly unwatched = new Map<string, string | null>();
  /**
   * The folders of each app (null: the root) in `watchers` or `unwatched` (and maybe some since
   * gone from both): a reload of one app goes through its own folders, not every app's (a deploy
   * reloading each of thousands of apps went through all their watchers each time).
   */
  private readonly ofApp = new Map<string | null, Set<string>>();
  private limitError: string | undefined;
  private reported = false;
  private retry: NodeJS.Timeout | undefined;
  private closed = false;

  /** `onChange(appId)`: something in that app changed; `onChange(null)`: re-read the root. */
  constructor(
    private readonly root: string,
    private readonly onChange: (appId: string | null) => void,
    private readonly log: WatchLog,
  ) {
    fs.watchFile(root, { persistent: false, interval: ROOT_POLL_MS }, this.rootPoll);
    live.add(this);
  }

  /** So many events came at once that some may have been dropped: every app is read again. */
  overflowed(events: number): void {
    if (this.closed) return;
    this.log.warn(
      `scriptable-api: ${events} file events at once: the system keeps a limited number of them (on Linux fs.inotify.max_queued_events) and drops the rest unsaid, so changes in ${this.root} may have been missed: every app is read again`,
    );
    this.onChange(null);
  }

  /**
   * A watcher follows its folder, not its path: the root removed and made again, renamed away
   * with another put in its place, or a link moved to another folder (how deploys swap a
   * release) would leave the registry on a folder no longer at the path. Polling the root's
   * identity sees that, and the root is read again (each app watched again as it is read).
   */
  private readonly rootPoll = (now: fs.Stats, before: fs.Stats): void => {
    if (now.ino !== before.ino || now.birthtimeMs !== before.birthtimeMs) this.onChange(null);
  };

  private folders(appId: string): string[] {
    const app = path.join(this.root, appId);
    // (a link is not read, so not watched: a scripts/ linked to / would be walked to depth 16;
    // below scripts/, a Dirent of a link is no directory)
    const out = [app, path.join(app, 'apis'), path.join(app, 'automations')].filter(isRealFolder);
    const walk = (dir: string, depth: number): void => {
      out.push(dir);
      if (depth > 16) return;
      let list: fs.Dirent[] = [];
      try {
        list = fs.readdirSync(dir, { withFileTypes: true });
      } catch {
        return;
      }
      for (const e of list) if (e.isDirectory() && !e.name.startsWith('.')) walk(path.join(dir, e.name), depth + 1);
    };
    const scripts = path.join(app, 'scripts');
    if (isRealFolder(scripts)) walk(scripts, 0);
    return out;
  }

  private watch(dir: string, appId: string | null): void {
    let id: string;
    try {
      const st = fs.statSync(dir);
      id = `${st.ino}:${st.birthtimeMs}`;
    } catch {
      this.unwatched.delete(dir);
      return;
    }
    const had = this.watchers.get(dir);
    if (had !== undefined && had.id === id) return;
    had?.w.close();
    let w: fs.FSWatcher;
    try {
      w = fs.watch(dir, { persistent: false }, (_event, file) => {
        counted();
        if (appId !== null) return this.onChange(appId);
        this.onChange(file ? String(file) : null);
      });
    } catch (e) {
      if (had !== undefined) this.watchers.delete(dir);
      if (LIMIT_CODES.has((e as NodeJS.ErrnoException)?.code ?? '')) {
        this.unwatched.set(dir, appId);
        this.own(dir, appId);
        this.limitError = (e as Error).message.replace(/, watch '.*'$/, '');
      } else {
        this.log.warn(`scriptable-api: cannot watch ${dir}: ${(e as Error).message}`);
      }
      return;
    }
    this.unwatched.delete(dir);
    w.on('error', () => {
      // (the folder went away: the reload that follows re-syncs the watchers)
      w.close();
      if (this.watchers.get(dir)?.w === w) this.watchers.delete(dir);
      this.onChange(appId);
    });
    this.watchers.set(dir, { w, id, appId });
    this.own(dir, appId);
  }

  private own(dir: string, appId: string | null): void {
    let dirs = this.ofApp.get(appId);
    if (dirs === undefined) this.ofApp.set(appId, (dirs = new Set()));
    dirs.add(dir);
  }

  /** Stops watching a folder of `appId` (or trying to). */
  private forget(dir: string, appId: string | null): void {
    this.watchers.get(dir)?.w.close();
    this.watchers.delete(dir);
    this.unwatched.delete(dir);
    const dirs = this.ofApp.get(appId);
    dirs?.delete(dir);
    if (dirs?.size === 0) this.ofApp.delete(appId);
  }

  /** Watches the root as it is now (another folder at its path: that one). */
  syncRoot(): void {
    if (this.closed) return;
    this.watch(this.root, null);
    this.checkLimit();
  }

  /** Watches the root and exactly the folders of `appIds` as they are now. */
  sync(appIds: Iterable<string>): void {
    if (this.closed) return;
    const wanted = new Map<string, string | null>([[this.root, null]]);
    for (const appId of appIds) for (const d of this.folders(appId)) wanted.set(d, appId);
    for (const [appId, dirs] of [...this.ofApp]) for (const dir of [...dirs]) if (wanted.get(dir) !== appId) this.forget(dir, appId);
    for (const [dir, appId] of wanted) this.watch(dir, appId);
    this.checkLimit();
  }

  /**
   * Watches exactly the folders of one app as they are now (none when it is gone): a reload of
   * one app touches only its own folders, not every app's (thousands of apps: a stall per change).
   */
  syncApp(appId: string, present: boolean): void {
    if (this.closed) return;
    const wanted = new Set(present ? this.folders(appId) : []);
    for (const dir of [...(this.ofApp.get(appId) ?? [])]) if (!wanted.has(dir)) this.forget(dir, appId);
    for (const dir of wanted) this.watch(dir, appId);
    this.checkLimit();
  }

  /**
   * Folders the limit left unwatched: reported once, in one line (thousands of apps would log a
   * line per folder), and tried again until watched; once every one is, that is reported too.
   */
  private checkLimit(): void {
    if (this.unwatched.size === 0) {
      clearInterval(this.retry);
      this.retry = undefined;
      if (this.reported) this.log.info('scriptable-api: every app folder is watched again: changes are picked up');
      this.reported = false;
      return;
    }
    if (this.retry === undefined) {
      this.retry = setInterval(() => this.retryUnwatched(), WATCH_RETRY_MS);
      this.retry.unref();
    }
    if (this.reported) return;
    this.reported = true;
    const apps = [...new Set(this.unwatched.values())].map((a) => (a === null ? '(the apps folder itself)' : a));
    const named = apps.slice(0, 5).join(', ') + (apps.length > 5 ? ` and ${apps.length - 5} more` : '');
    this.log.error(
      `scriptable-api: cannot watch ${this.unwatched.size} folders of ${apps.length} apps (${named}): the system's limit of file watchers is reached (${this.limitError}). ` +
        `Changes to them are not picked up until they can be watched (tried again every ${WATCH_RETRY_MS / 1000} s; registry.reload(appId) reads one now). ` +
        'Each app takes a watcher per folder (the app, apis/, automations/, scripts/ and each folder below it); ' +
        (this.limitError?.startsWith('ENOSPC')
          ? 'on Linux raise fs.inotify.max_user_watches (sysctl fs.inotify.max_user_watches=524288).'
          : 'raise the limit of open files (ulimit -n) or, on Linux, fs.inotify.max_user_instances.'),
    );
  }

  /** Tries the unwatched folders again; an app watched again is read again (it may have changed meanwhile). */
  private retryUnwatched(): void {
    if (this.closed) return;
    const recovered = new Set<string | null>();
    for (const [dir, appId] of [...this.unwatched]) {
      this.watch(dir, appId);
      // (still refused: so would the others be; thousands of them are not tried every time)
      if (this.unwatched.has(dir)) break;
      recovered.add(appId);
    }
    for (const appId of recovered) this.onChange(appId);
    this.checkLimit();
  }

  close(): void {
    this.closed = true;
    live.delete(this);
    clearInterval(this.retry);
    this.unwatched.clear();
    this.ofApp.clear();
    fs.unwatchFile(this.root, this.rootPoll);
    for (const { w } of this.watchers.values()) w.close();
    this.watchers.clear();
  }
}
