/**
 * What the automations running on one thread hold in values (variables, steps' results, a
 * `forEach`'s list as it grows), counted as json.ts counts them (a byte a character, 8 a list
 * item or map entry), against one budget for the thread. The interpreter's values live on the
 * worker's own V8 heap, shared by every call on it, where running out ends the worker and every
 * call on it: a call that would take the thread past the budget fails instead.
 */

/** Most the automations on one QuickJS worker hold at once, MiB (its heap has room for it: pool-worker.ts). */
export const AUTOMATION_HELD_MB = 128;

let budgetMb = AUTOMATION_HELD_MB;
let heldOnThread = 0;

/**
 * Sets this thread's budget (a vm2 worker's heap is its scripts' memory limit: its automations get
 * a share of that heap, not room beside it).
 */
export function setHeldBudgetMb(mb: number): void {
  budgetMb = mb;
}

/** What the automations on this thread hold now, in bytes (for tests and diagnostics). */
export function heldBytes(): number {
  return heldOnThread;
}

/** One run's share of the thread's budget, by slot (`vars.total`, `steps.fetch`...). */
export class Holdings {
  private readonly slots = new Map<unknown, number>();

  /** Sets what `slot` holds to `bytes`; throws RangeError, changing nothing, past the thread's budget. */
  set(slot: unknown, bytes: number): void {
    const delta = bytes - (this.slots.get(slot) ?? 0);
    if (delta > 0 && heldOnThread + delta > budgetMb * 1024 * 1024) {
      throw new RangeError(`the automations running on this worker would hold more than ${budgetMb} MiB of values`);
    }
    heldOnThread += delta;
    if (bytes > 0) this.slots.set(slot, bytes);
    else this.slots.delete(slot);
  }

  /** Gives back everything the run holds (it ended). */
  releaseAll(): void {
    for (const bytes of this.slots.values()) heldOnThread -= bytes;
    this.slots.clear();
  }
}
