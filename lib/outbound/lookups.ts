/**
 * The name lookups of outbound calls, taken in turn across apps.
 *
 * Node resolves a name with the system's resolver (getaddrinfo) on libuv's thread pool, which runs
 * at most half its threads' worth of lookups at once for the whole process (2 of the default 4),
 * and a lookup holds its place until the resolver answers: about half a second for a name that does
 * not exist, seconds for one whose DNS server is slow. In one line, an app calling a thousand new
 * names held every other app's lookups, and so their calls to any host not yet connected, for
 * minutes. Here lookups wait in one line per app, served round-robin (lib/runtime/fair-queue.ts),
 * at most as many at once as libuv runs; a lookup whose call ended while it waited never runs.
 */
import type { LookupAddress } from 'node:dns';
import { FairQueue } from '../runtime/fair-queue';

/** Resolves every address of a name, as `dns.promises.lookup(host, { all: true })`. */
export type Resolve = (host: string) => Promise<LookupAddress[]>;

interface Waiting {
  appId: string;
  host: string;
  /** False once the call the lookup is for has ended (it is then not started). */
  wanted: () => boolean;
  resolve: (all: LookupAddress[]) => void;
  reject: (err: unknown) => void;
}

/** How many lookups libuv runs at once: half its thread pool (UV_THREADPOOL_SIZE, default 4), rounded up. */
export function lookupSlots(env: NodeJS.ProcessEnv = process.env): number {
  const threads = Math.min(1024, Math.max(1, Math.floor(Number(env.UV_THREADPOOL_SIZE)) || 4));
  return Math.floor((threads + 1) / 2);
}

export class LookupQueue {
  private readonly waiting = new FairQueue<Waiting>();
  private running = 0;

  constructor(
    private readonly resolveName: Resolve,
    private readonly slots = lookupSlots(),
  ) {}

  /** Resolves `host` for app `appId` when its turn comes; rejects (never starting) if `wanted()` turns false first. */
  lookup(appId: string, host: string, wanted: () => boolean): Promise<LookupAddress[]> {
    return new Promise((resolve, reject) => {
      this.waiting.push({ appId, host, wanted, resolve, reject });
      this.next();
    });
  }

  private next(): void {
    while (this.running < this.slots) {
      const item = this.waiting.take(() => true);
      if (!item) return;
      if (!item.wanted()) {
        item.reject(Object.assign(new Error(`lookup of ${item.host} not started: its call has ended`), { code: 'ECANCELLED' }));
        continue;
      }
      this.running++;
      this.resolveName(item.host)
        .then(item.resolve, item.reject)
        .finally(() => {
          this.running--;
          this.next();
        });
    }
  }
}
