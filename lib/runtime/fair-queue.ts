/**
 * The pool's waiting line: one first-in-first-out line per app, served round-robin across apps,
 * so an app with a thousand calls waiting delays another app's next call by one turn, not a
 * thousand.
 */
export class FairQueue<T extends { appId: string }> {
  /** Apps with calls waiting, in serving order (an app served moves to the end). */
  private readonly apps = new Map<string, T[]>();
  private count = 0;

  get size(): number {
    return this.count;
  }

  /** Adds a call at the end of its app's line (`front`: back at the front, it was in line first). */
  push(item: T, front = false): void {
    const line = this.apps.get(item.appId);
    if (!line) this.apps.set(item.appId, [item]);
    else if (front) line.unshift(item);
    else line.push(item);
    this.count++;
  }

  remove(item: T): boolean {
    const line = this.apps.get(item.appId);
    const i = line ? line.indexOf(item) : -1;
    if (i < 0) return false;
    line!.splice(i, 1);
    if (line!.length === 0) this.apps.delete(item.appId);
    this.count--;
    return true;
  }

  /** Takes the first call of the next app in turn that `allowed` lets run now. */
  take(allowed: (appId: string) => boolean): T | undefined {
    for (const [appId, line] of this.apps) {
      if (!allowed(appId)) continue;
      const item = line.shift()!;
      this.apps.delete(appId);
      if (line.length > 0) this.apps.set(appId, line); // to the end of the turn
      this.count--;
      return item;
    }
    return undefined;
  }

  /** Whether any app with calls waiting may run now. */
  any(allowed: (appId: string) => boolean): boolean {
    for (const appId of this.apps.keys()) if (allowed(appId)) return true;
    return false;
  }

  /** Every call waiting (in no particular order). */
  *[Symbol.iterator](): IterableIterator<T> {
    for (const line of this.apps.values()) yield* line;
  }

  /** Takes every call out. */
  clear(): T[] {
    const all = [...this.apps.values()].flat();
    this.apps.clear();
    this.count = 0;
    return all;
  }
}
