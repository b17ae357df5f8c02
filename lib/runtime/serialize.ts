/**
 * Host-side serialization of a value for a return type. Script results are serialized inside the
 * sandbox by the adapter (their Dates and toString methods live there); this serves automation
 * results, which arrive as plain JSON values.
 */
import type { ReturnType } from '../types';
import type { SerializedOutput } from './protocol';
import { ApiError } from '../errors';
import { checkRedirectLocation } from '../response/framing';

function dateToMs(this: unknown, key: string, value: unknown): unknown {
  const raw = (this as Record<string, unknown>)[key];
  if (Object.prototype.toString.call(raw) === '[object Date]') {
    const t = (raw as Date).getTime();
    return Number.isNaN(t) ? null : t;
  }
  return value;
}

/** dateToMs, and BigInts as numbers (JSON.stringify has no text for them). */
function hostValueToJson(this: unknown, key: string, value: unknown): unknown {
  return typeof value === 'bigint' ? Number(value) : dateToMs.call(this, key, value);
}

/**
 * A value from one of the host's own services (accounts, attachments, an automations runner) as
 * the plain JSON value that crosses to the worker: its toJSON methods applied, Dates as ms
 * timestamps (as in script results), BigInts as numbers, undefined as null. Throws a TypeError for
 * what JSON cannot hold (a cycle), which would otherwise fail the message that carries it.
 */
export function hostJson(value: unknown): unknown {
  const text = JSON.stringify(value, hostValueToJson); // (undefined for undefined)
  return text === undefined ? null : JSON.parse(text);
}

/**
 * A Redirect output whose location is no http(s) or relative URL (`javascript:`, `data:`) does not
 * fit its return type, as a non-string does: `invalid`, the stage's INVALID_RESULT (onError runs for
 * the call's), not a failure found only when the router sends it.
 */
export function fittedOutput(output: SerializedOutput): SerializedOutput {
  if (output.type !== 'Redirect') return output;
  const problem = unfitRedirect(output.location);
  return problem === null ? output : { type: 'invalid', message: problem };
}

/** Why a redirect cannot go to `location` (no http(s) or relative URL), or null when it can. */
export function unfitRedirect(location: string): string | null {
  try {
    checkRedirectLocation(location);
    return null;
  } catch (e) {
    if (e instanceof ApiError) return e.message;
    throw e;
  }
}

export function serializeForReturnType(value: unknown, returnType: ReturnType): SerializedOutput {
  switch (returnType) {
    case 'JSON':
      return { type: 'JSON', json: JSON.stringify(value, dateToMs) ?? 'null' };
    case 'Text':
      return { type: 'Text', text: value == null ? '' : String(value) };
    case 'Redirect':
      return typeof value === 'string' && value !== ''
        ? fittedOutput({ type: 'Redirect', location: value })
        : { type: 'invalid', message: `Redirect return type needs a URL string, got ${value === null ? 'null' : typeof value}` };
    case 'File': {
      if (value === null || typeof value !== 'object') {
        return { type: 'invalid', message: `File return type needs a file result object, got ${value === null ? 'null' : typeof value}` };
      }
      const v = value as Record<string, unknown>;
      // (a field that is there but no string does not fit, as in a script's File result)
      for (const field of ['path', 'storagePath', 'name', 'contentDisposition'] as const) {
        const x = v[field];
        if (x !== undefined && x !== null && typeof x !== 'string') return { type: 'invalid', message: `A File result's ${field} must be a string, got ${typeof x}` };
      }
      const str = (x: unknown) => (typeof x === 'string' ? x : null);
      return {
        type: 'File',
        file: { path: str(v.path), storagePath: str(v.storagePath), name: str(v.name), contentDisposition: str(v.contentDisposition) },
      };
    }
  }
}
