/**
 * A signal for "the client left": aborted when the response closes before it was sent (at once
 * when it already has), or by `abort()` (the router's forced close). `done()` stops listening,
 * once the work the signal guards is over.
 */
import type { ServerResponse } from 'node:http';

export interface ClientGone {
  signal: AbortSignal;
  abort(): void;
  done(): void;
}

/**
 * The response's connection is closed or closing: its socket is destroyed (the client reset it, the
 * server cut it at shutdown) though the response may not have heard yet (its 'close' comes a turn
 * later). Nothing written now reaches anyone, and writing would make the response look answered.
 */
export function connectionClosed(res: ServerResponse): boolean {
  return res.destroyed || res.socket?.destroyed === true;
}

export function clientGone(res: ServerResponse): ClientGone {
  const ac = new AbortController();
  const onClose = () => {
    if (!res.writableFinished) ac.abort();
  };
  res.once('close', onClose);
  if (res.destroyed) onClose();
  return { signal: ac.signal, abort: () => ac.abort(), done: () => res.removeListener('close', onClose) };
}
