/**
 * Conditional and range requests for a file (RFC 9110 §13, §14), in the RFC's order:
 * If-Match / If-Unmodified-Since (412), If-None-Match / If-Modified-Since (304, via `fresh`),
 * then If-Range and Range (206 or 416, via `range-parser`; a suffix longer than the file is the
 * whole file). Several ranges at once, or a malformed Range header, get the whole file.
 */
import type { IncomingHttpHeaders } from 'node:http';
import fresh from 'fresh';
import rangeParser from 'range-parser';
import type { ByteRange, StoredFileInfo } from '../files/storage';

export type Verdict =
  | { kind: 'full' }
  | { kind: 'not-modified' }
  | { kind: 'precondition-failed' }
  | { kind: 'unsatisfiable' }
  | { kind: 'range'; range: ByteRange };

const isWeak = (tag: string) => tag.startsWith('W/');

/** Strong comparison: both tags strong and equal. */
function strongMatch(list: string, etag: string): boolean {
  if (isWeak(etag)) return false;
  return list.split(',').some((t) => t.trim() === etag);
}

const seconds = (ms: number) => Math.floor(ms / 1000);

function parseDate(v: string | undefined): number {
  return v ? Date.parse(v) : NaN;
}

/** If-Range: the stored file is still the one the client holds part of. */
function rangeStillValid(ifRange: string | undefined, info: StoredFileInfo): boolean {
  if (!ifRange) return true;
  const v = ifRange.trim();
  if (v.startsWith('"') || v.startsWith('W/')) return !isWeak(v) && v === info.etag;
  const d = parseDate(v);
  return !Number.isNaN(d) && seconds(info.modified.getTime()) <= seconds(d);
}

/** A suffix range (`-N`) in a Range header's list, and its length. */
const SUFFIX = /([=,]\s*)-(\d+)(?=\s*(?:,|$))/g;

/**
 * RFC 9110 14.1.2: a suffix longer than the file is the whole file (range-parser counts it
 * unsatisfiable), so `-N` with N above the size becomes `0-`.
 */
function longSuffixesWhole(header: string, size: number): string {
  return header.replace(SUFFIX, (spec, lead: string, n: string) => (Number(n) > size ? `${lead}0-` : spec));
}

/** RFC 9110 14.1.1: on a zero-length file, a suffix of non-zero length is satisfiable (no 206 can carry it). */
const hasNonZeroSuffix = (header: string) => [...header.matchAll(SUFFIX)].some((m) => Number(m[2]) > 0);

export function evaluateConditions(method: string, h: IncomingHttpHeaders, info: StoredFileInfo): Verdict {
  const lastModified = info.modified.toUTCString();
  const ifMatch = h['if-match'];
  if (ifMatch !== undefined) {
    if (ifMatch.trim() !== '*' && !strongMatch(ifMatch, info.etag)) return { kind: 'precondition-failed' };
  } else {
    const d = parseDate(h['if-unmodified-since']);
    if (!Number.isNaN(d) && seconds(info.modified.getTime()) > seconds(d)) return { kind: 'precondition-failed' };
  }
  if ((h['if-none-match'] !== undefined || h['if-modified-since'] !== undefined) && fresh(h, { etag: info.etag, 'last-modified': lastModified })) {
    return { kind: 'not-modified' };
  }
  const header = h.range;
  if (method !== 'GET' || header === undefined || !rangeStillValid(h['if-range'] as string | undefined, info)) return { kind: 'full' };
  const ranges = rangeParser(info.size, longSuffixesWhole(header, info.size), { combine: true });
  if (ranges === -1) return info.size === 0 && hasNonZeroSuffix(header) ? { kind: 'full' } : { kind: 'unsatisfiable' };
  if (ranges === -2 || ranges.type !== 'bytes' || ranges.length !== 1) return { kind: 'full' };
  return { kind: 'range', range: { start: ranges[0].start, end: ranges[0].end } };
}
