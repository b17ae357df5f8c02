/**
 * What the standalone server answers for a request Node.js's HTTP parser refuses (a malformed
 * request line, method, target, header or chunk; conflicting Content-Length / Transfer-Encoding;
 * headers over `maxHeaderSize`; a request not in within `headersTimeout` / `requestTimeout`): the
 * library's JSON error body with a request id (431 for headers too large, 408 for a request too
 * slow, 400 otherwise), then the connection closes. Node.js's own answer had no body.
 *
 * Requests read before the bad one on the same connection (pipelined) are answered first, in
 * order, and the error after them: written at once, it would be read as their answer. An error in
 * a request's body answers that request, unless its response has begun (then the connection
 * just closes).
 */
import { randomUUID } from 'node:crypto';
import { STATUS_CODES, type ServerResponse } from 'node:http';
import type { Socket } from 'node:net';
import { ApiError } from '../errors';
import { JSON_TYPE } from '../response/error';

function errorFor(code: string | undefined): ApiError {
  switch (code) {
    case 'HPE_HEADER_OVERFLOW':
      return new ApiError('HEADERS_TOO_LARGE');
    case 'HPE_CHUNK_EXTENSIONS_OVERFLOW':
      return new ApiError('BODY_TOO_LARGE', 'Chunk extensions too large');
    case 'ERR_HTTP_REQUEST_TIMEOUT':
      return new ApiError('REQUEST_TIMEOUT');
    default:
      return new ApiError('BAD_REQUEST', 'Malformed HTTP request');
  }
}

/** The whole response, as bytes for the socket (there is no ServerResponse for such a request). */
function rawResponse(e: ApiError): Buffer {
  const requestId = randomUUID();
  const body = JSON.stringify({ requestId, message: e.message, code: e.code });
  return Buffer.from(
    `HTTP/1.1 ${e.status} ${STATUS_CODES[e.status]}\r\nX-Request-Id: ${requestId}\r\nContent-Type: ${JSON_TYPE}\r\n` +
      `Content-Length: ${Buffer.byteLength(body)}\r\nConnection: close\r\n\r\n${body}`,
  );
}

/**
 * The server's `clientError` listener. `responsesOn(socket)`: the responses of the requests on
 * that connection not answered yet.
 */
export function clientErrorHandler(responsesOn: (socket: Socket) => ServerResponse[]) {
  const answering = new WeakSet<Socket>();
  return (err: NodeJS.ErrnoException, socket: Socket): void => {
    // (the parser repeats its error for every later chunk: the first one is answered)
    if (answering.has(socket)) return;
    answering.add(socket);
    const answer = () => {
      if (err.code === 'ECONNRESET' || !socket.writable) socket.destroy();
      else socket.end(rawResponse(errorFor(err.code)), () => socket.destroy());
    };
    const open = responsesOn(socket);
    // the request whose body the error is in (a bad chunk, a body too slow), if it is one of them
    const culprit = open.find((res) => !res.req.complete);
    const before = open.filter((res) => res !== culprit);
    // its answer goes where its response would have; one already begun cannot be followed
    const settle = () => (culprit?.headersSent ? socket.destroy() : answer());
    if (before.length === 0) {
      settle();
      return;
    }
    // after the last of them (each one's 'close' comes once it is sent, or its connection gone)
    let left = before.length;
    for (const res of before) {
      res.once('close', () => {
        if (--left === 0) settle();
      });
    }
  };
}
