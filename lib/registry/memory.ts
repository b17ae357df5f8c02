/**
 * MemoryRegistry: the embedded default registry. Definitions are validated when put; a change is
 * live on the next request. Also a reference for writing your own registry over a database.
 *
 * Two stages: what is `published` (the default of every method) and the unpublished `preview`
 * (served at the router's preview path). Put work in progress with `{ stage: 'preview' }`; the
 * preview stage sees its own entries over the published ones (an app's unchanged APIs and
 * scripts preview as they are live); `publish(appId)` makes an app's preview entries live.
 */
import { ConfigError } from '../errors';
import { deepFreeze } from '../definitions/frozen';
import type { ApiDefinition, ApiRegistry, AutomationDefinition, RegistryStage } from '../types';
import { apiName, onlyKnownKeys, shown, validateApiDefinition, type Same } from '../validations';
import { validateAutomation } from '../automation/compile';

/** Which stage a MemoryRegistry write goes to. Default `published`. */
export interface MemoryStageOption {
  stage?: RegistryStage;
}

/** The keys of MemoryStageOption (the build fails when one is added to the type and not here). */
const STAGE_KEYS = ['stage'] as const;
const stageKeysMatch: Same<keyof MemoryStageOption, (typeof STAGE_KEYS)[number]> = true;
void stageKeysMatch;

/**
 * The stage of a write's options. Anything but `{ stage? }` is refused: `'preview'` given as the
 * argument itself (as DirectoryRegistry's methods take it), `{ stge: 'preview' }` or `null` would
 * otherwise write to (or remove from) the published stage, live at once.
 */
function stageOf(o: MemoryStageOption | undefined): RegistryStage {
  if (o !== undefined) {
    if (typeof o !== 'object' || o === null || Array.isArray(o)) {
      throw new ConfigError('options', `must be { stage: 'published' | 'preview' } (or left out for 'published'), got ${shown(o)}`);
    }
    onlyKnownKeys(o as Record<string, unknown>, STAGE_KEYS, '');
  }
  const stage = o?.stage ?? 'published';
  if (stage !== 'published' && stage !== 'preview') throw new ConfigError('stage', `must be 'published' or 'preview', got ${JSON.stringify(stage)}`);
  return stage;
}

/** Initial content for one app. */
export interface MemoryAppConfig {
  apis?: ApiDefinition[];
  /** Script name → ES module source. */
  scripts?: Record<string, string>;
  automations?: AutomationDefinition[];
}

/** The keys of MemoryAppConfig (the build fails when one is added to the type and not here). */
const APP_KEYS = ['apis', 'scripts', 'automations'] as const;
const appKeysMatch: Same<keyof MemoryAppConfig, (typeof APP_KEYS)[number]> = true;
void appKeysMatch;

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

interface AppEntry {
  /** This entry's incarnation: a new entry under the id of a removed one has another (appGeneration). */
  generation: number;
  apis: Map<string, ApiDefinition>;
  scripts: Map<string, string>;
  automations: Map<string, AutomationDefinition>;
}

export class MemoryRegistry implements ApiRegistry {
  private readonly published = new Map<string, AppEntry>();
  private readonly drafts = new Map<string, AppEntry>();
  private nextGeneration = 1;

  constructor(initial?: { apps?: Record<string, MemoryAppConfig> }) {
    if (initial === undefined) return;
    const isPlain = (v: unknown) => typeof v === 'object' && v !== null && !Array.isArray(v);
    if (!isPlain(initial)) throw new ConfigError('options', 'new MemoryRegistry() takes { apps: { [appId]: { scripts, apis, automations } } }');
    onlyKnownKeys(initial as Record<string, unknown>, ['apps'], '');
    if (initial.apps !== undefined && !isPlain(initial.apps)) throw new ConfigError('apps', 'must be an object of apps by appId');
    for (const [appId, app] of Object.entries(initial.apps ?? {})) {
      if (!isPlain(app)) throw new ConfigError(`apps.${appId}`, 'must be an object { scripts?, apis?, automations? }');
      onlyKnownKeys(app as Record<string, unknown>, APP_KEYS, `apps.${appId}.`);
      if (app.scripts !== undefined && !isPlain(app.scripts)) throw new ConfigError(`apps.${appId}.scripts`, 'must be an object of script sources by name');
      for (const key of ['apis', 'automations'] as const) {
        if (app[key] !== undefined && !Array.isArray(app[key])) throw new ConfigError(`apps.${appId}.${key}`, 'must be an array');
      }
      for (const [name, source] of Object.entries(app.scripts ?? {})) this.putScript(appId, name, source);
      for (const def of app.apis ?? []) this.putApi(appId, def);
      for (const a of app.automations ?? []) this.putAutomation(appId, a);
    }
  }

  private app(appId: string, create: true, stage?: RegistryStage): AppEntry;
  private app(appId: string, create?: false, stage?: RegistryStage): AppEntry | undefined;
  private app(appId: string, create = false, stage: RegistryStage = 'published'): AppEntry | undefined {
    const apps = stage === 'preview' ? this.drafts : this.published;
    let entry = apps.get(appId);
    if (!entry && create) {
      entry = { generation: this.nextGeneration++, apis: new Map(), scripts: new Map(), automations: new Map() };
      apps.set(checkAppId(appId), entry);
    }
    return entry;
  }

  /** An entry of the stage: a preview looks in the app's preview entries first, then in the published ones. */
  private find<K extends Exclude<keyof AppEntry, 'generation'>>(appId: string, kind: K, key: string, stage: RegistryStage | undefined): ReturnType<AppEntry[K]['get']> | undefined {
    if (stage === 'preview') {
      const draft = this.drafts.get(appId)?.[kind].get(key);
      if (draft !== undefined) return draft as ReturnType<AppEntry[K]['get']>;
    }
    return this.published.get(appId)?.[kind].get(key) as ReturnType<AppEntry[K]['get']> | undefined;
  }

  /** The app's incarnation: removing it and putting an app under its id again gives another (ApiRegistry.appGeneration). */
  appGeneration(appId: string, stage?: RegistryStage): string | undefined {
    const published = this.published.get(appId)?.generation;
    const draft = stage === 'preview' ? this.drafts.get(appId)?.generation : undefined;
    return published === undefined && draft === undefined ? undefined : `${published ?? 0}.${draft ?? 0}`;
  }

  getApi(appId: string, path: string, stage?: RegistryStage): ApiDefinition | undefined {
    return this.find(appId, 'apis', path, stage);
  }

  getScript(appId: string, name: string, stage?: RegistryStage): string | undefined {
    return this.find(appId, 'scripts', name, stage);
  }

  getAutomation(appId: string, id: string, stage?: RegistryStage): AutomationDefinition | undefined {
    return this.find(appId, 'automations', id, stage);
  }

  /** Adds or replaces an API (validated: throws ConfigError naming the bad field). */
  putApi(appId: string, def: ApiDefinition, options?: MemoryStageOption): this {
    const stage = stageOf(options);
    const valid = validateApiDefinition(def, apiName(def));
    // (a deep-frozen copy: what was validated is what runs, whatever the caller changes later)
    this.app(appId, true, stage).apis.set(valid.path, deepFreeze(jsonCopy(valid)) as ApiDefinition);
    return this;
  }

  /** Adds or replaces a script's ES module source. */
  putScript(appId: string, name: string, source: string, options?: MemoryStageOption): this {
    const stage = stageOf(options);
    if (typeof name !== 'string' || name === '') throw new ConfigError('script name', 'must be a non-empty string');
    if (typeof source !== 'string') throw new ConfigError(`script '${name}'`, 'source must be a string');
    this.app(appId, true, stage).scripts.set(name, source);
    return this;
  }

  /**
   * Adds or replaces an automation (looked up by its `id`). Validated: an interactive or unknown
   * step type, a bad expression or field throws a ConfigError naming the automation and the step.
   */
  putAutomation(appId: string, def: AutomationDefinition, options?: MemoryStageOption): this {
    const stage = stageOf(options);
    // a frozen JSON copy: what was validated is what runs, whatever the caller does with `def`
    const copy = deepFreeze(jsonCopy(def)) as AutomationDefinition;
    validateAutomation(copy);
    this.app(appId, true, stage).automations.set(copy.id, copy);
    return this;
  }

  removeApi(appId: string, path: string, options?: MemoryStageOption): boolean {
    return this.app(appId, false, stageOf(options))?.apis.delete(path) ?? false;
  }

  removeScript(appId: string, name: string, options?: MemoryStageOption): boolean {
    return this.app(appId, false, stageOf(options))?.scripts.delete(name) ?? false;
  }

  removeAutomation(appId: string, id: string, options?: MemoryStageOption): boolean {
    return this.app(appId, false, stageOf(options))?.automations.delete(id) ?? false;
  }

  /** Removes an app with everything in it (both stages unless one is given). */
  removeApp(appId: string, options?: MemoryStageOption): boolean {
    const stage = stageOf(options); // (checked first: a malformed options must not remove both stages)
    if (options?.stage === undefined) return [this.published.delete(appId), this.drafts.delete(appId)].some(Boolean);
    return (stage === 'preview' ? this.drafts : this.published).delete(appId);
  }

  /**
   * Makes an app's preview entries live: each replaces the published entry of its name, and the
   * preview stage is left empty (it shows the published app again). Returns false when the app had
   * no preview entries.
   */
  publish(appId: string): boolean {
    const draft = this.drafts.get(appId);
    if (!draft) return false;
    const live = this.app(appId, true);
    for (const [k, v] of draft.apis) live.apis.set(k, v);
    for (const [k, v] of draft.scripts) live.scripts.set(k, v);
    for (const [k, v] of draft.automations) live.automations.set(k, v);
    this.drafts.delete(appId);
    return true;
  }

  /** The APIs of an app in a stage (for admin UIs and tests); the preview stage lists what it serves. */
  listApis(appId: string, options?: MemoryStageOption): ApiDefinition[] {
    const apis = new Map(this.published.get(appId)?.apis ?? []);
    if (stageOf(options) === 'preview') for (const [k, v] of this.drafts.get(appId)?.apis ?? []) apis.set(k, v);
    return [...apis.values()];
  }
}
