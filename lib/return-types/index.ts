/**
 * Return-type handlers: one per return type, each turning a SerializedOutput into the response.
 */
import type { IncomingHttpHeaders, ServerResponse } from 'node:http';
import type { FileStorage } from '../files/storage';
import { ApiError } from '../errors';
import type { ResponseState, SerializedOutput } from '../runtime/protocol';
import { applyHeaders, removeHeaders, type AppliedHeaders } from '../response/apply';
import { checkRedirectLocation } from '../response/framing';
import { sendJson } from './json';
import { sendText } from './text';
import { sendRedirect } from './redirect';
import { sendFile } from './file';
import { shown } from '../definitions/names';

const SENT_TYPES: ReadonlySet<string> = new Set<SerializedOutput['type']>(['JSON', 'Text', 'Redirect', 'File']);

export interface SendContext {
  res: ServerResponse;
  requestId: string;
  appId: string;
  method: string;
  /** The request's headers (conditional and range requests of File responses). */
  headers: IncomingHttpHeaders;
  /** Status and headers scripts set through ctx.response apply to the final response. */
  state: ResponseState;
  /** The apps' local sandboxes and shared storage. */
  files: { sandbox?: FileStorage; storage?: FileStorage };
  /** The headers the script set, now on `res` (an error body a handler sends goes without them). */
  scriptHeaders?: AppliedHeaders;
}

export type ReturnTypeHandler<T extends SerializedOutput['type']> = (
  output: Extract<SerializedOutput, { type: T }>,
  ctx: SendContext,
) => void | Promise<void>;

export async function sendOutput(output: SerializedOutput, ctx: SendContext): Promise<void> {
  if (output.type === 'invalid') throw new ApiError('INVALID_RESULT', output.message);
  // (an engine of one's own that misspells a type: nothing would be sent, the request left unanswered)
  if (!SENT_TYPES.has(output.type)) throw new Error(`the engine returned an output of type ${shown((output as { type?: unknown }).type)}, not JSON, Text, Redirect, File or invalid`);
  if (output.type === 'Redirect') checkRedirectLocation(output.location); // before any header is set
  const applied = applyHeaders(ctx.res, ctx.state);
  try {
    switch (output.type) {
      case 'JSON':
        return sendJson(output, ctx);
      case 'Text':
        return sendText(output, ctx);
      case 'Redirect':
        return sendRedirect(output, ctx);
      case 'File':
        return await sendFile(output, { ...ctx, scriptHeaders: applied });
    }
  } catch (e) {
    // (a file not found, not readable...: the error body goes without the script's headers)
    removeHeaders(ctx.res, applied);
    throw e;
  }
}
