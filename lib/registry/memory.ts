/**
 * MemoryRegistry: the embedded default registry. Definitions are validated when put; a change is
 * live on the next request. Also a reference for writing your own registry over a database.
 */
import { ConfigError } from '../errors';
import type { ApiDefinition, ApiRegistry, AutomationDefinition } from '../types';
import { validateApiDefinition } from '../validations';
import { validateAutomation } from '../automation/compile';

/** Initial content for one app. */
export interface MemoryAppConfig {
  apis?: ApiDefinition[];
  /** Script name → ES module source. */
  scripts?: Record<string, string>;
  automations?: AutomationDefinition[];
}

function checkAppId(appId: unknown): string {
  if (typeof appId !== 'string' || appId === '' || /[/\\\0]/.test(appId) || appId === '.' || appId === '..') {
    throw new ConfigError('appId', `must be a non-empty string without '/', '\\\\' or NUL, got ${JSON.stringify(appId)}`);
  }
  return appId;
}

function jsonCopy(v: unknown): unknown {
  try {
    return v === undefined ? undefined : JSON.parse(JSON.stringify(v));
  } catch (e) {
    throw new ConfigError('automation', `must be JSON data (${(e as Error).message})`);
  }
}

function deepFreeze<T>(o: T): T {
  if (o && typeof o === 'object') {
    for (const v of Object.values(o)) deepFreeze(v);
    Object.freeze(o);
  }
  return o;
}

interface AppEntry {
  apis: Map<string, ApiDefinition>;
  scripts: Map<string, string>;
  automations: Map<string, AutomationDefinition>;
}

export class MemoryRegistry implements ApiRegistry {
  private readonly apps = new Map<string, AppEntry>();

  constructor(initial?: { apps?: Record<string, MemoryAppConfig> }) {
    if (initial === undefined) return;
    const isPlain = (v: unknown) => typeof v === 'object' && v !== null && !Array.isArray(v);
    if (!isPlain(initial)) throw new ConfigError('options', 'new MemoryRegistry() takes { apps: { [appId]: { scripts, apis, automations } } }');
    if (initial.apps !== undefined && !isPlain(initial.apps)) throw new ConfigError('apps', 'must be an object of apps by appId');
    for (const [appId, app] of Object.entries(initial.apps ?? {})) {
      if (!isPlain(app)) throw new ConfigError(`apps.${appId}`, 'must be an object { scripts?, apis?, automations? }');
      if (app.scripts !== undefined && !isPlain(app.scripts)) throw new ConfigError(`apps.${appId}.scripts`, 'must be an object of script sources by name');
      for (const key of ['apis', 'automations'] as const) {
        if (app[key] !== undefined && !Array.isArray(app[key])) throw new ConfigError(`apps.${appId}.${key}`, 'must be an array');
      }
      for (const [name, source] of Object.entries(app.scripts ?? {})) this.putScript(appId, name, source);
      for (const def of app.apis ?? []) this.putApi(appId, def);
      for (const a of app.automations ?? []) this.putAutomation(appId, a);
    }
  }

  private app(appId: string, create: true): AppEntry;
  private app(appId: string, create?: false): AppEntry | undefined;
  private app(appId: string, create = false): AppEntry | undefined {
    let entry = this.apps.get(appId);
    if (!entry && create) {
      entry = { apis: new Map(), scripts: new Map(), automations: new Map() };
      this.apps.set(checkAppId(appId), entry);
    }
    return entry;
  }

  getApi(appId: string, path: string): ApiDefinition | undefined {
    return this.apps.get(appId)?.apis.get(path);
  }

  getScript(appId: string, name: string): string | undefined {
    return this.apps.get(appId)?.scripts.get(name);
  }

  getAutomation(appId: string, id: string): AutomationDefinition | undefined {
    return this.apps.get(appId)?.automations.get(id);
  }

  /** Adds or replaces an API (validated: throws ConfigError naming the bad field). */
  putApi(appId: string, def: ApiDefinition): this {
    const valid = validateApiDefinition(def, `api '${(def as { path?: unknown })?.path}'`);
    this.app(appId, true).apis.set(valid.path, Object.freeze({ ...valid }));
    return this;
  }

  /** Adds or replaces a script's ES module source. */
  putScript(appId: string, name: string, source: string): this {
    if (typeof name !== 'string' || name === '') throw new ConfigError('script name', 'must be a non-empty string');
    if (typeof source !== 'string') throw new ConfigError(`script '${name}'`, 'source must be a string');
    this.app(appId, true).scripts.set(name, source);
    return this;
  }

  /**
   * Adds or replaces an automation (looked up by its `id`). Validated: an interactive or unknown
   * step type, a bad expression or field throws a ConfigError naming the automation and the step.
   */
  putAutomation(appId: string, def: AutomationDefinition): this {
    // a frozen JSON copy: what was validated is what runs, whatever the caller does with `def`
    const copy = deepFreeze(jsonCopy(def)) as AutomationDefinition;
    validateAutomation(copy);
    this.app(appId, true).automations.set(copy.id, copy);
    return this;
  }

  removeApi(appId: string, path: string): boolean {
    return this.app(appId)?.apis.delete(path) ?? false;
  }

  removeScript(appId: string, name: string): boolean {
    return this.app(appId)?.scripts.delete(name) ?? false;
  }

  removeAutomation(appId: string, id: string): boolean {
    return this.app(appId)?.automations.delete(id) ?? false;
  }

  /** Removes an app with everything in it. */
  removeApp(appId: string): boolean {
    return this.apps.delete(appId);
  }

  /** The APIs of an app (for admin UIs and tests). */
  listApis(appId: string): ApiDefinition[] {
    return [...(this.app(appId)?.apis.values() ?? [])];
  }
}
