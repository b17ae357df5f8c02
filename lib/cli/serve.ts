/**
 * `scriptable-api serve <root>`: an Express app with the router over a DirectoryRegistry.
 * Prints where it listens (a line with http://HOST:PORT), one line per request, and on SIGTERM /
 * SIGINT stops accepting connections, lets the requests in flight finish (for at most
 * shutdownTimeoutMs: then their connections close and their scripts stop), closes the router,
 * the registry and the rate-limit store, then exits. A second signal exits at once.
 */
import * as http from 'node:http';
import type { AddressInfo, Socket } from 'node:net';
import { createApiRouter } from '../router';
import { DirectoryRegistry } from '../registry/directory';
import { ConfigError } from '../errors';
import { RedisRateLimitStore } from '../rate-limit';
import type { ApiRouter, Logger } from '../types';
import { appIndex } from './app-index';
import { clientErrorHandler, connectHandler, expectationHandler } from './client-error';
import { notFound } from './not-found';
import { DEFAULT_REQUEST_TIMEOUT_MS, type ServeConfig } from './config';
import { requestLog } from './request-log';
import { requireHost } from './require-host';

export interface RunningServer {
  server: http.Server;
  router: ApiRouter;
  registry: DirectoryRegistry;
  /** `http://HOST:PORT<mount>` */
  url: string;
  /** Stops accepting, waits for the requests in flight, closes everything. */
  shutdown(): Promise<void>;
}

/** Node.js's default time for a request's headers to arrive, ms. */
const HEADERS_TIMEOUT_MS = 60_000;

function hostForUrl(address: string): string {
  return address.includes(':') ? `[${address}]` : address;
}

/**
 * Routes the server answers beside the APIs: the index at the mount point. Operational
 * endpoints of the standalone server (such as /metrics) belong here too, mounted before the APIs.
 */
function mountServerRoutes(app: import('express').Express, config: ServeConfig, registry: DirectoryRegistry, router: ApiRouter): void {
  // Prometheus metrics of the router (absent with `metrics: false` in --config)
  if (router.metrics) app.get('/metrics', router.metrics.handler);
  if (config.index) app.get(config.mount === '/' ? '/' : [config.mount, `${config.mount}/`], appIndex(registry, config.mount));
}

/** Fields of the store's errors that are --redis-url's: a url it refuses, ioredis missing (reported as the router's `rateLimit.store`). */
const REDIS_URL_FIELDS = ['url', 'rateLimit.store'];

/** The store of --redis-url (or `redisUrl` in --config): an error of the url or of the package it needs is reported under that name. */
function redisStore(url: string): RedisRateLimitStore {
  try {
    return new RedisRateLimitStore({ url });
  } catch (e) {
    if (e instanceof ConfigError && REDIS_URL_FIELDS.includes(e.field)) throw new ConfigError('--redis-url', e.message.slice(`scriptable-api: invalid ${e.field}: `.length));
    throw e;
  }
}

/** Starts the server; rejects with a clear message when it cannot listen (port taken...). */
export async function startServer(config: ServeConfig, logger: Logger): Promise<RunningServer> {
  // eslint-disable-next-line @typescript-eslint/no-require-imports
  const express = require('express') as typeof import('express');
  const registry = new DirectoryRegistry({ root: config.root, previewRoot: config.previewRoot, logger });
  let store: RedisRateLimitStore | undefined;
  let router: ApiRouter;
  try {
    store = config.redisUrl ? redisStore(config.redisUrl) : undefined;
    const rateLimit = store ? { ...(config.router.rateLimit ?? {}), store } : config.router.rateLimit;
    router = createApiRouter({ logger, ...config.router, ...(rateLimit ? { rateLimit } : {}), registry });
  } catch (e) {
    await registry.close();
    await store?.close();
    throw e;
  }
  const app = express();
  app.disable('x-powered-by');
  // (behind a reverse proxy: the client's address, protocol and host, for scripts and {ip} rate limits)
  if (config.trustProxy !== undefined) app.set('trust proxy', config.trustProxy);
  // responses in flight: at shutdown each one closes its connection once sent
  const inFlight = new Set<http.ServerResponse>();
  let draining = false;
  // (past the shutdown's limit: the connections still open are the server's to close, not their clients')
  let cutting = false;
  app.use((req, res, next) => {
    if (draining) res.setHeader('Connection', 'close');
    inFlight.add(res);
    res.once('close', () => {
      inFlight.delete(res);
      if (draining) server.closeIdleConnections();
    });
    next();
  });
  if (!config.quiet) app.use(requestLog((line) => logger.info(line), () => cutting));
  app.use(requireHost());
  mountServerRoutes(app, config, registry, router);
  app.use(config.mount, router);
  app.use(notFound(config.mount));

  // (a request without Host is answered by requireHost, with the JSON error body)
  // (the limit on a request's arrival, 0 for none: the headers' own 60 s stays within it, and a
  // short one is checked as often as it needs, not every 30 s)
  const requestTimeout = config.requestTimeoutMs ?? DEFAULT_REQUEST_TIMEOUT_MS;
  const server = http.createServer(
    {
      requireHostHeader: false,
      requestTimeout,
      headersTimeout: requestTimeout > 0 ? Math.min(HEADERS_TIMEOUT_MS, requestTimeout) : HEADERS_TIMEOUT_MS,
      connectionsCheckingInterval: requestTimeout > 0 ? Math.min(30_000, Math.max(250, Math.floor(requestTimeout / 4))) : 30_000,
    },
    app,
  );
  // a request the HTTP parser refuses gets the JSON error body, after the ones before it on its connection
  const responsesOn = (socket: Socket) => [...inFlight].filter((res) => res.req.socket === socket);
  server.on('clientError', clientErrorHandler(responsesOn));
  // (and so does a CONNECT request: this server is not a proxy)
  server.on('connect', connectHandler(responsesOn));
  // (and so does an Expect other than 100-continue)
  server.on('checkExpectation', expectationHandler());
  // connections open, to close at shutdown the ones that never sent a byte (Node.js counts them busy)
  const sockets = new Set<Socket>();
  /** Set while the shutdown waits for the last socket's 'close'. */
  let socketsClosed: (() => void) | undefined;
  server.on('connection', (socket: Socket) => {
    sockets.add(socket);
    socket.once('close', () => {
      sockets.delete(socket);
      if (sockets.size === 0) socketsClosed?.();
    });
  });
  const closeAll = async () => {
    await router.close();
    await registry.close();
    await store?.close();
  };
  try {
    await new Promise<void>((resolve, reject) => {
      server.once('error', reject);
      server.listen(config.port, config.host, () => {
        server.off('error', reject);
        resolve();
      });
    });
  } catch (e) {
    await closeAll();
    const err = e as NodeJS.ErrnoException;
    if (err.code === 'EADDRINUSE') throw new Error(`port ${config.port} on ${config.host} is already in use: stop the other server or choose another port (--port)`);
    if (err.code === 'EACCES') throw new Error(`not allowed to listen on port ${config.port} of ${config.host} (ports below 1024 need privileges): choose another port (--port)`);
    if (err.code === 'EADDRNOTAVAIL' || err.code === 'ENOTFOUND') throw new Error(`cannot listen on ${config.host}: no such local address (--host)`);
    throw e;
  }
  const { address, port } = server.address() as AddressInfo;
  const url = `http://${hostForUrl(address)}:${port}${config.mount === '/' ? '' : config.mount}`;

  let closing: Promise<void> | undefined;
  const shutdown = () =>
    (closing ??= (async () => {
      // no new connections; idle keep-alive ones and unused ones close now, busy ones once their response is sent
      draining = true;
      const closed = new Promise<void>((resolve) => server.close(() => resolve()));
      for (const res of inFlight) if (!res.headersSent) res.setHeader('Connection', 'close');
      server.closeIdleConnections();
      // (a connection opened and never used, such as a browser's preconnect, has no request to finish)
      for (const socket of sockets) if (socket.bytesRead === 0) socket.destroy();
      // a request that never ends (a client stalling an upload, a script running to its own
      // timeout, also one whose client left) does not hold the exit past the limit
      const limit = setTimeout(() => {
        logger.warn(`scriptable-api: ${inFlight.size} request(s) still open after ${config.shutdownTimeoutMs} ms: closing their connections and stopping their scripts`);
        cutting = true;
        server.closeAllConnections();
        // (the graceful router.close() below, waiting for them, then ends too)
        router.close({ force: true }).catch((e: unknown) => logger.error(`scriptable-api: error while stopping the scripts: ${(e as Error)?.message ?? e}`));
      }, config.shutdownTimeoutMs);
      limit.unref();
      try {
        await closed;
        // (the server closes once it has counted its connections down, before they emit 'close':
        // wait for them, so that every request is logged, also one cut at the limit, before exit)
        if (sockets.size > 0) await new Promise<void>((resolve) => (socketsClosed = resolve));
        await closeAll();
      } finally {
        clearTimeout(limit);
      }
    })());
  return { server, router, registry, url, shutdown };
}
