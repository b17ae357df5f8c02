/**
 * The folders that hold apps' files (`sandboxDir`, `storageDir`) and uploads' temporary files
 * (`upload.tmpDir`) must stay apart: in `<root>/<appId>/`, a root inside another root makes one of
 * its sub-folders an app's area, and the app with that id would read every app's files there.
 */
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { ConfigError } from '../errors';

const inside = (dir: string, root: string) => dir.startsWith(root.endsWith(path.sep) ? root : root + path.sep);

/**
 * Throws ConfigError (naming the inner folder's option) when `sandboxDir` and `storageDir` lie one
 * inside the other (the same folder is allowed: each app keeps one folder), or `upload.tmpDir`
 * (default: the OS temp folder) inside or at either. Call after the options' types are checked.
 */
export function validateFileRoots(o: { sandboxDir?: string; storageDir?: string; upload?: { tmpDir?: string } }): void {
  const roots = (['sandboxDir', 'storageDir'] as const).filter((k) => typeof o[k] === 'string').map((k) => ({ field: k, dir: path.resolve(o[k]!) }));
  for (const a of roots) {
    for (const b of roots) {
      if (a !== b && inside(a.dir, b.dir)) {
        throw new ConfigError(a.field, `must not be inside ${b.field}: the app whose id is the folder between them would reach every app's files`);
      }
    }
  }
  if (roots.length === 0) return;
  const tmpDir = path.resolve(o.upload?.tmpDir ?? os.tmpdir());
  for (const r of roots) {
    if (tmpDir === r.dir || inside(tmpDir, r.dir)) {
      const dflt = o.upload?.tmpDir === undefined ? ` (its default is the OS temp folder, ${tmpDir})` : '';
      throw new ConfigError('upload.tmpDir', `must not be inside ${r.field}${dflt}: an app would reach other requests' uploads`);
    }
  }
}

/**
 * Throws ConfigError when `sandboxDir`, `storageDir` or `upload.tmpDir` names something that is
 * there and is not a folder (a missing folder is made on first use): every file operation under it
 * would fail. Call after the options' types are checked.
 */
export function validateFileRootKinds(o: { sandboxDir?: string; storageDir?: string; upload?: { tmpDir?: string } }): void {
  const given: [string, string | undefined][] = [['sandboxDir', o.sandboxDir], ['storageDir', o.storageDir], ['upload.tmpDir', o.upload?.tmpDir]];
  for (const [field, dir] of given) {
    if (typeof dir !== 'string') continue;
    let stat: fs.Stats | undefined;
    try {
      stat = fs.statSync(dir);
    } catch (e) {
      // (ENOTDIR: a file on the way (throwIfNoEntry: false hides it too from Node.js 22 on); ENOENT:
      // made on first use; other failures, such as EACCES, are left to the file operations)
      if ((e as NodeJS.ErrnoException).code === 'ENOTDIR') throw new ConfigError(field, `${JSON.stringify(dir)} is under a file, not a folder`);
    }
    if (stat && !stat.isDirectory()) throw new ConfigError(field, `${JSON.stringify(dir)} is a file, not a folder`);
  }
}
