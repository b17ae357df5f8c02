/**
 * The preview path: `<mount>/preview/<appId>/<path>` serves an app's unpublished definitions and
 * scripts (the registry's `preview` stage) beside the published `<mount>/<appId>/<path>`.
 * Off unless the host enables it with an `authorize(req)` check: previews are never public.
 */
import type { Request } from 'express';
import { ApiError, ConfigError } from './errors';
import type { Awaitable } from './types';

/** Which version of an app the registry serves: what is live, or the unpublished work in progress. */
export type RegistryStage = 'published' | 'preview';

/** The `preview` option of createApiRouter. */
export interface PreviewOptions {
  /**
   * Decides whether a request may see previews (a staff session, a token header...): true lets it
   * through, false answers 403 `PREVIEW_FORBIDDEN`. May be async; a throw answers 500 `HOST_ERROR`.
   * Preflights (CORS) are answered without it: browsers send them without credentials.
   */
  authorize(req: Request): Awaitable<boolean>;
  /** First path segment of preview requests: letters, digits, `-`, `.`, `_` and `~` (not `.` or `..`). Default `preview` (an app with that id is then unreachable). */
  segment?: string;
}

/** Checks the `preview` option. */
export function validatePreview(v: unknown): void {
  if (v === undefined || v === false) return;
  if (typeof v !== 'object' || v === null || Array.isArray(v)) {
    throw new ConfigError('preview', 'must be { authorize(req) => boolean } (previews must not be public) or false');
  }
  const o = v as Record<string, unknown>;
  for (const k of Object.keys(o)) {
    if (k !== 'authorize' && k !== 'segment') throw new ConfigError(`preview.${k}`, 'is not an option; the options are authorize, segment');
  }
  if (typeof o.authorize !== 'function') {
    throw new ConfigError('preview.authorize', 'must be a function (req) => boolean | Promise<boolean>: previews serve unpublished scripts and must not be public');
  }
  // ('.' and '..' are removed from URLs by browsers and most clients: such a preview path never arrives)
  if (o.segment !== undefined && (typeof o.segment !== 'string' || !/^[A-Za-z0-9._~-]+$/.test(o.segment) || o.segment === '.' || o.segment === '..')) {
    throw new ConfigError('preview.segment', `must be one path segment like 'preview', got ${JSON.stringify(o.segment)}`);
  }
}

/** A request's path segments without the preview segment, and the stage it asks for. */
export interface StagedPath {
  stage: RegistryStage;
  segments: string[];
}

export class Preview {
  private readonly segment: string | undefined;

  constructor(private readonly options: PreviewOptions | false | undefined) {
    this.segment = options ? (options.segment ?? 'preview') : undefined;
  }

  /**
   * `['preview', 'app1', 'orders']` → preview stage, `['app1', 'orders']`; any other path is
   * published. Takes the decoded segments the app id is read from, so that no spelling of the
   * preview segment (`%70review`, `//preview`) reaches a published app of that name.
   */
  split(segments: string[]): StagedPath {
    if (this.segment !== undefined && segments[0] === this.segment) return { stage: 'preview', segments: segments.slice(1) };
    return { stage: 'published', segments };
  }

  /** A preview request's servletPath is `/preview/<appId>` (contextPath stays the mount path). */
  mark(request: { servletPath: string }): void {
    if (this.segment !== undefined) request.servletPath = `/${this.segment}${request.servletPath}`;
  }

  /** Throws PREVIEW_FORBIDDEN unless `authorize(req)` lets the request through. */
  async authorize(req: Request): Promise<void> {
    if (!this.options) return;
    let ok: boolean;
    try {
      ok = (await this.options.authorize(req)) === true;
    } catch (e) {
      throw new ApiError('HOST_ERROR', 'The preview authorization failed', { cause: e });
    }
    if (!ok) throw new ApiError('PREVIEW_FORBIDDEN');
  }
}
