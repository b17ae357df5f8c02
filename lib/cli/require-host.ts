/**
 * An HTTP/1.1 request without a Host header, and any request with more than one or with one that
 * is no `host[:port]` (RFC 9112 3.2: the server must answer 400), gets the library's JSON error
 * body, then its connection closes. The standalone server turns Node.js's own check off
 * (`requireHostHeader: false`), which answered with an empty body; Node.js never checked for a
 * second Host, which it drops (scripts saw the first, a proxy or cache in front may have read the
 * other), nor its value: `Host: evil.example/x?` made getRequestURL() `http://evil.example/x?:8080/…`,
 * and the index listed such URLs.
 */
import { randomUUID } from 'node:crypto';
import type { NextFunction, Request, Response } from 'express';
import { ApiError } from '../errors';
import { sendError } from '../response/error';

/**
 * A Host value of the URI grammar (RFC 3986 3.2.2, 3.2.3): an IP literal in brackets (with a zone,
 * RFC 6874), or a name of unreserved characters, percent-escapes and sub-delims (an IPv4 address
 * is one), then an optional `:port` of at most 65535. Empty is allowed (a target without
 * authority, RFC 9112 3.2).
 */
const HOST = /^(?:\[[0-9A-Fa-f:.]+(?:%25[\w.~-]+)?\]|\[v[0-9A-Fa-f]+\.[\w.~!$&'()*+,;=:-]+\]|[\w.~!$&'()*+,;=%-]*)(?::(\d{0,5}))?$/;

function validHost(host: string): boolean {
  const m = HOST.exec(host);
  return m !== null && (m[1] === undefined || m[1] === '' || Number(m[1]) <= 65535);
}

/** How many Host header lines the request has. */
function hostCount(raw: string[]): number {
  let n = 0;
  for (let i = 0; i < raw.length; i += 2) if (raw[i].length === 4 && raw[i].toLowerCase() === 'host') n++;
  return n;
}

export function requireHost() {
  return (req: Request, res: Response, next: NextFunction): void => {
    const hosts = hostCount(req.rawHeaders);
    const valid = hosts === 1 ? validHost(req.headers.host ?? '') : hosts === 0 && req.httpVersion !== '1.1';
    if (valid) {
      next();
      return;
    }
    const requestId = randomUUID();
    res.setHeader('X-Request-Id', requestId);
    res.setHeader('Connection', 'close');
    const message = hosts === 0 ? 'An HTTP/1.1 request needs a Host header' : hosts > 1 ? 'A request may have only one Host header' : 'The Host header is not a host and port';
    sendError(res, requestId, new ApiError('BAD_REQUEST', message));
  };
}
