/**
 * Fairness between apps: at most `max` script calls of one app run at once; more wait in line
 * (first come, first served) until their deadline. One flooded app cannot take every worker.
 */
import { MAX_TIMER_MS } from '../timers';
import { ApiError } from '../errors';

interface AppSlots {
  running: number;
  waiting: Array<{ grant: () => void; timer: NodeJS.Timeout }>;
}

export class AppLimiter {
  private readonly apps = new Map<string, AppSlots>();
  constructor(private readonly max: number) {}

  /** Resolves when the app may run one more call; rejects with SCRIPT_TIMEOUT at `deadline`. */
  acquire(appId: string, deadline: number): Promise<void> | undefined {
    let slots = this.apps.get(appId);
    if (!slots) this.apps.set(appId, (slots = { running: 0, waiting: [] }));
    if (slots.running < this.max) {
      slots.running++;
      return undefined;
    }
    const s = slots;
    return new Promise<void>((resolve, reject) => {
      const entry = {
        grant: () => {
          clearTimeout(entry.timer);
          resolve();
        },
        timer: setTimeout(() => {
          const i = s.waiting.indexOf(entry);
          if (i >= 0) s.waiting.splice(i, 1);
          reject(new ApiError('SCRIPT_TIMEOUT', `The call timed out waiting behind ${this.max} running calls of app '${appId}'`));
        }, Math.min(MAX_TIMER_MS, Math.max(0, deadline - Date.now()))),
      };
      s.waiting.push(entry);
    });
  }

  release(appId: string): void {
    const slots = this.apps.get(appId);
    if (!slots) return;
    const next = slots.waiting.shift();
    if (next) {
      next.grant(); // the slot passes to the next caller
      return;
    }
    slots.running--;
    if (slots.running === 0) this.apps.delete(appId);
  }
}
