/**
 * What the standalone server answers at its mount point: the apps it serves and their APIs, as
 * JSON (so `npm start`'s URL answers, and a newcomer sees what to call).
 */
import type { Request, Response } from 'express';
import type { DirectoryRegistry } from '../registry/directory';
import { requestedHost } from '../context/request';

export function appIndex(registry: DirectoryRegistry, mount: string) {
  return (req: Request, res: Response): void => {
    // (behind a proxy the server trusts, the host and scheme the client asked for, as scripts' getRequestURL() has them)
    const base = `${req.protocol}://${requestedHost(req) || 'localhost'}${mount === '/' ? '' : mount}`;
    const apps = registry.listApps().map((appId) => ({
      appId,
      apis: registry
        .listApis(appId)
        .sort((a, b) => (a.path < b.path ? -1 : a.path > b.path ? 1 : 0))
        .map((def) => ({
          path: def.path,
          url: `${base}/${encodeURIComponent(appId)}/${def.path.split('/').map(encodeURIComponent).join('/')}`,
          methods: def.methods ?? null,
          returnType: def.returnType,
          ...(def.enabled === false ? { enabled: false } : {}),
          ...(def.description ? { description: def.description } : {}),
        })),
    }));
    res.json({ service: 'scriptable-api', apps });
  };
}
