/**
 * What the standalone server answers at its mount point: the apps it serves and their APIs, as
 * JSON (so `npm start`'s URL answers, and a newcomer sees what to call).
 */
import type { Request, Response } from 'express';
import type { DirectoryRegistry } from '../registry/directory';

export function appIndex(registry: DirectoryRegistry, mount: string) {
  return (req: Request, res: Response): void => {
    const base = `${req.protocol}://${req.get('host') ?? 'localhost'}${mount === '/' ? '' : mount}`;
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
