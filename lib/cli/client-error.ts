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
import { STATUS_CODES, type IncomingMessage, type ServerResponse } from 'node:http';
import type { Socket } from 'node:net';
import { ApiError } from '../errors';
import { JSON_TYPE, sendError } from '../response/error';

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

/** Runs `then` once every response of `responses` has closed (sent, or its connection gone). */
function afterAll(responses: ServerResponse[], then: () => void): void {
  let left = responses.length;
  if (left === 0) {
    then();
    return;
  }
  for (const res of responses) {
    res.once('close', () => {
      if (--left === 0) then();
    });
  }
}

/** Writes `e` as the connection's last response, then closes it. */
function endWith(socket: Socket, e: ApiError): void {
  if (!socket.writable) socket.destroy();
  else socket.end(rawResponse(e), () => socket.destroy());
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
    if (err.code === 'ECONNRESET') {
      socket.destroy();
      return;
    }
    const open = responsesOn(socket);
    // the request whose body the error is in (a bad chunk, a body too slow), if it is one of them
    const culprit = open.find((res) => !res.req.complete);
    // its answer goes where its response would have; one already begun cannot be followed
    afterAll(
      open.filter((res) => res !== culprit),
      () => (culprit?.headersSent ? socket.destroy() : endWith(socket, errorFor(err.code))),
    );
  };
}

/**
 * The server's `connect` listener: a CONNECT request (this server is not a proxy) gets the JSON
 * error body, after the requests before it on its connection, then the connection closes.
 * Without a listener, Node.js closed the connection without a word.
 */
export function connectHandler(responsesOn: (socket: Socket) => ServerResponse[]) {
  return (_req: IncomingMessage, socket: Socket): void => {
    socket.on('error', () => socket.destroy());
    afterAll(responsesOn(socket), () => endWith(socket, new ApiError('BAD_REQUEST', 'CONNECT is not served: this server is not a proxy')));
  };
}

/**
 * The server's `checkExpectation` listener: a request whose `Expect` is not `100-continue` (the only
 * expectation HTTP/1.1 defines, RFC 9110 10.1.1) gets 417 with the JSON error body, and its
 * connection closes (its body, sent or not, is not read). Without a listener, Node.js answered
 * 417 with an empty body.
 */
export function expectationHandler() {
  return (req: IncomingMessage, res: ServerResponse): void => {
    const requestId = randomUUID();
    res.setHeader('X-Request-Id', requestId);
    res.setHeader('Connection', 'close');
    const expectation = String(req.headers.expect ?? '').slice(0, 200);
    sendError(res, requestId, new ApiError('EXPECTATION_FAILED', `Expectation '${expectation}' cannot be met (only 100-continue is)`));
  };
}
