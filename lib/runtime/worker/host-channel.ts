/**
 * The worker's side of host calls. A script's `__host(op, args)` must return synchronously, so the
 * worker posts the call to the main thread and blocks on an Atomics.wait until the reply lands on
 * a dedicated MessagePort (read with receiveMessageOnPort). While blocked, the pool counts this
 * worker as waiting and may start another, so a script waiting on an upstream never stalls others.
 */
import { MessagePort, receiveMessageOnPort } from 'node:worker_threads';

export interface HostReply {
  seq: number;
  ok: boolean;
  value?: unknown;
  error?: { name: string; message: string; code?: number; status?: number };
}

export class HostTimeoutError extends Error {
  constructor() {
    super('The script timed out while waiting for a host call');
    this.name = 'TimeoutError';
  }
}

export class HostChannel {
  private seq = 0;
  constructor(
    private readonly post: (msg: unknown) => void,
    private readonly replies: MessagePort,
    private readonly flag: Int32Array,
  ) {}

  /** Fire-and-forget message to the main thread (console output). */
  notify(jobId: number, op: string, args: unknown): void {
    this.post({ type: 'host', jobId, seq: 0, op, args, noReply: true });
  }

  /** Blocking call; throws HostTimeoutError when `deadline` passes first. */
  call(jobId: number, op: string, args: unknown, deadline: number): HostReply {
    const seq = ++this.seq;
    Atomics.store(this.flag, 0, 0);
    this.post({ type: 'host', jobId, seq, op, args });
    for (;;) {
      const remaining = deadline - Date.now();
      if (remaining <= 0) throw new HostTimeoutError();
      Atomics.wait(this.flag, 0, 0, remaining);
      // Read every queued reply: stale ones (from a call that timed out earlier) are dropped.
      for (let m = receiveMessageOnPort(this.replies); m; m = receiveMessageOnPort(this.replies)) {
        const reply = m.message as HostReply;
        if (reply.seq === seq) return reply;
      }
      Atomics.store(this.flag, 0, 0);
    }
  }
}
