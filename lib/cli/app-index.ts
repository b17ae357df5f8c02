/**
 * What the standalone server answers at its mount point: the apps it serves and their APIs, as
 * JSON (so `npm start`'s URL answers, and a newcomer sees what to call). Every app is named, but
 * at most INDEX_MAX_APIS APIs are listed in all (thousands of tenants: a body of every API of
 * every app, built on each request, stalled the server); `?app=<appId>` lists one app.
 */
import type { Request, Response } from 'express';
import type { DirectoryRegistry } from '../registry/directory';
import { requestedHost } from '../context/request';

/** The most APIs one answer of the index lists. */
export const INDEX_MAX_APIS = 1000;

export function appIndex(registry: Pick<DirectoryRegistry, 'listApps' | 'listApis'>, mount: string) {
  return (req: Request, res: Response): void => {
    // (behind a proxy the server trusts, the host and scheme the client asked for, as scripts' getRequestURL() has them)
    const base = `${req.protocol}://${requestedHost(req) || 'localhost'}${mount === '/' ? '' : mount}`;
    const only = typeof req.query?.app === 'string' ? req.query.app : undefined;
    const ids = registry.listApps();
    let room = INDEX_MAX_APIS;
    let truncated = false;
    const apps = (only === undefined ? ids : ids.filter((id) => id === only)).map((appId) => {
      const all = registry.listApis(appId);
      // (past the bound an app's APIs are only counted, not sorted)
      const shown = room === 0 ? [] : all.sort((a, b) => (a.path < b.path ? -1 : a.path > b.path ? 1 : 0)).slice(0, room);
      room -= shown.length;
      const apis = shown.map((def) => ({
        path: def.path,
        url: `${base}/${encodeURIComponent(appId)}/${def.path.split('/').map(encodeURIComponent).join('/')}`,
        methods: def.methods ?? null,
        returnType: def.returnType,
        ...(def.enabled === false ? { enabled: false } : {}),
        ...(def.description ? { description: def.description } : {}),
      }));
      if (shown.length === all.length) return { appId, apis };
      truncated = true;
      return { appId, apis, apiCount: all.length };
    });
    res.json({ service: 'scriptable-api', apps, ...(truncated ? { truncated: true } : {}) });
  };
}
