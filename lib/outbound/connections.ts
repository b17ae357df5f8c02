/**
 * The connections behind the outbound client: one keep-alive `http.Agent` and one `https.Agent`
 * per client (so per router), reusing a connection for later calls to the same host and port.
 *
 * The address policy holds on every connection an agent opens, not only on the first call to a
 * host: each request passes the client's checking `lookup`, which resolves the name and refuses
 * it when any address is refused (the checked addresses are the ones the socket connects to), and
 * once connected the socket's remote address is checked again, before the request is written
 * (over TLS the handshake's first message may already be on its way: the address it goes to was
 * checked at lookup). A kept
 * connection is only reused for the same host name and port, so a name that later resolves
 * elsewhere (DNS rebinding) or a redirect to another host gets a new, checked connection.
 *
 * A connection goes back to the pool only once its response has been read to the end; a response
 * destroyed unread (a redirect's body, a discarded body, a timeout) closes its connection, so no
 * connection carries a half-read answer into the next call. One whose request body is still going
 * out when its response has been read is closed too (lib/outbound/client.ts).
 */
import * as http from 'node:http';
import * as https from 'node:https';
import type { Socket } from 'node:net';
import type { Duplex } from 'node:stream';

/** Throws when `address` (connected for `host`) may not be reached. */
export type AddressCheck = (address: string, host: string) => void;

/** Most idle connections an agent keeps, to one host or to all together. */
const MAX_IDLE = 1024;

const AGENT_OPTIONS: http.AgentOptions = {
  keepAlive: true,
  // A burst of concurrent calls to one upstream keeps its connections for the next burst.
  maxFreeSockets: MAX_IDLE,
  // Idle connections close after this (sooner when the server's Keep-Alive header says so).
  timeout: 30_000,
};

/** A keep-alive agent whose every connection passes the address check. */
export interface CheckedAgent extends http.Agent {
  /** Drops the idle connections; those in use close when their call ends. */
  close(): void;
}

function checkedAgent(Base: typeof http.Agent, check: AddressCheck): CheckedAgent {
  class Checked extends Base implements CheckedAgent {
    private closed = false;

    override createConnection(options: http.ClientRequestArgs, callback?: (err: Error | null, stream: Duplex) => void): Duplex | null | undefined {
      const socket = super.createConnection(options, callback) as Socket;
      const host = String(options.hostname ?? options.host ?? '');
      // Registered before the request's own listeners: a refused socket is destroyed before it writes.
      socket.once('connect', () => {
        try {
          check(socket.remoteAddress ?? '', host);
        } catch (err) {
          socket.destroy(err as Error);
        }
      });
      return socket;
    }

    /**
     * Node keeps the socket for reuse when this returns true (its typings say void). At most
     * MAX_IDLE are kept across all hosts (maxFreeSockets counts per host and port: calls to many
     * hosts would keep a file descriptor each until the idle timeout).
     */
    override keepSocketAlive(socket: Duplex): void {
      let idle = 0;
      for (const name in this.freeSockets) idle += this.freeSockets[name]?.length ?? 0;
      const keep = !this.closed && idle < MAX_IDLE && (super.keepSocketAlive(socket) as unknown) !== false;
      return keep as unknown as void;
    }

    close(): void {
      this.closed = true;
      for (const sockets of Object.values(this.freeSockets)) for (const s of sockets ?? []) s.destroy();
    }
  }
  return new Checked(AGENT_OPTIONS);
}

/** The client's agents, one per scheme. */
export interface Agents {
  http: CheckedAgent;
  https: CheckedAgent;
}

export function createAgents(check: AddressCheck): Agents {
  return { http: checkedAgent(http.Agent, check), https: checkedAgent(https.Agent, check) };
}
