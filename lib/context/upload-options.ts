/** The `upload` option: limits of multipart/form-data uploads, validated, with their defaults. */
import * as os from 'node:os';
import { ConfigError } from '../errors';
import type { UploadOptions } from '../types';
import { parseSize, shown, type Same } from '../validations';

/** `upload` with every default filled in (sizes in bytes). */
export interface UploadLimits {
  fileSize: number;
  files: number;
  fields: number;
  fieldSize: number;
  tmpDir: string;
}

export const UPLOAD_DEFAULTS = {
  fileSize: 1024 ** 3,
  files: 10,
  fields: 1000,
  fieldSize: 1024 ** 2,
} as const;

const UPLOAD_KEYS = ['fileSize', 'files', 'fields', 'fieldSize', 'tmpDir'] as const;
const keysMatch: Same<keyof UploadOptions, (typeof UPLOAD_KEYS)[number]> = true;
void keysMatch;

function isObject(v: unknown): v is Record<string, unknown> {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

function count(v: unknown, field: string, min: number): void {
  if (v !== undefined && (typeof v !== 'number' || !Number.isInteger(v) || v < min)) throw new ConfigError(field, `must be an integer >= ${min}, got ${shown(v)}`);
}

function size(v: unknown, field: string): void {
  if (v === undefined) return;
  if (parseSize(v, field) < 1) throw new ConfigError(field, `must be at least 1 byte, got ${shown(v)}`);
}

/** Checks the `upload` option; throws ConfigError naming the field. */
export function validateUploadOptions(v: unknown): void {
  if (v === undefined) return;
  if (!isObject(v)) throw new ConfigError('upload', 'must be an object such as { fileSize: "100mb", files: 10 }');
  for (const k of Object.keys(v)) {
    if (!(UPLOAD_KEYS as readonly string[]).includes(k)) throw new ConfigError(`upload.${k}`, `is not an option; the options are ${UPLOAD_KEYS.join(', ')}`);
  }
  size(v.fileSize, 'upload.fileSize');
  count(v.files, 'upload.files', 0);
  count(v.fields, 'upload.fields', 0);
  size(v.fieldSize, 'upload.fieldSize');
  if (v.tmpDir !== undefined && (typeof v.tmpDir !== 'string' || v.tmpDir === '')) throw new ConfigError('upload.tmpDir', 'must be a directory path');
}

/** The limits in force (call after validateUploadOptions). */
export function resolveUploadOptions(v: UploadOptions | undefined): UploadLimits {
  return {
    fileSize: v?.fileSize === undefined ? UPLOAD_DEFAULTS.fileSize : parseSize(v.fileSize, 'upload.fileSize'),
    files: v?.files ?? UPLOAD_DEFAULTS.files,
    fields: v?.fields ?? UPLOAD_DEFAULTS.fields,
    fieldSize: v?.fieldSize === undefined ? UPLOAD_DEFAULTS.fieldSize : parseSize(v.fieldSize, 'upload.fieldSize'),
    tmpDir: v?.tmpDir ?? os.tmpdir(),
  };
}
