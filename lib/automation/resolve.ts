/**
 * The router's side of automations run by the built-in interpreter: the definitions an API's
 * call and after hook name are fetched from the registry, validated once per definition object,
 * and travel with the job as JSON text, with the names of the scripts their steps call.
 */
import { ApiError, ConfigError } from '../errors';
import type { ApiDefinition, ApiRegistry, AutomationRef, ScriptRef } from '../types';
import type { ReadAutomation } from '../host/services';
import { automationScripts } from './compile';

export interface ResolvedAutomations {
  /** Definition text by automation id (an id the registry does not know is absent). */
  automations: Record<string, string>;
  /** Scripts the automations' script steps call. */
  scripts: string[];
}

function automationId(ref: ScriptRef | AutomationRef | undefined): string | undefined {
  return ref && typeof (ref as AutomationRef).automation === 'string' ? (ref as AutomationRef).automation : undefined;
}

/** Whether the API's call or after hook is an automation (checked before anything is awaited). */
export function runsAutomation(def: ApiDefinition): boolean {
  return automationId(def.call) !== undefined || automationId(def.after) !== undefined;
}

const texts = new WeakMap<object, string>();

/**
 * The automations `def` runs, or undefined when it runs none. Throws ApiError
 * INVALID_AUTOMATION for an invalid definition, AUTOMATION_UNAVAILABLE when the registry
 * cannot look automations up.
 */
export async function resolveAutomations(
  registry: ApiRegistry,
  appId: string,
  def: ApiDefinition,
  stage?: 'published' | 'preview',
): Promise<ResolvedAutomations | undefined> {
  const ids = [automationId(def.call), automationId(def.after)].filter((id): id is string => id !== undefined);
  if (ids.length === 0) return undefined;
  if (typeof registry.getAutomation !== 'function') {
    throw new ApiError('AUTOMATION_UNAVAILABLE', `The registry has no getAutomation: automation '${ids[0]}' cannot be loaded`);
  }
  const out: ResolvedAutomations = { automations: {}, scripts: [] };
  for (const id of ids) {
    const a = await (stage === undefined ? registry.getAutomation(appId, id) : registry.getAutomation(appId, id, stage));
    if (a === undefined || a === null) continue; // the stage fails with AUTOMATION_NOT_FOUND
    let scripts: readonly string[];
    try {
      if (typeof a !== 'object') throw new ConfigError(`automation '${id}'`, `the registry's getAutomation returned a ${typeof a}, not an object`);
      scripts = automationScripts(a);
    } catch (e) {
      if (!(e instanceof ConfigError)) throw e;
      // (logged once, with the request, by the router's failure line)
      throw new ApiError('INVALID_AUTOMATION', e.message);
    }
    let text = texts.get(a);
    if (text === undefined) texts.set(a, (text = JSON.stringify(a)));
    Object.defineProperty(out.automations, id, { value: text, enumerable: true, writable: true, configurable: true });
    out.scripts.push(...scripts);
  }
  return out;
}

/**
 * For the host's `automations` runner: the definitions `def` names, read from the registry as they
 * are now (with the request's scripts), by id; a lookup that throws or rejects is kept as such, to
 * fail the stage that runs it (HOST_ERROR). Empty when the registry cannot look automations up.
 */
export async function readAutomations(registry: ApiRegistry, appId: string, def: ApiDefinition, stage: 'published' | 'preview'): Promise<Map<string, ReadAutomation>> {
  const out = new Map<string, ReadAutomation>();
  if (typeof registry.getAutomation !== 'function') return out;
  for (const id of [automationId(def.call), automationId(def.after)]) {
    if (id === undefined || out.has(id)) continue;
    try {
      out.set(id, { ok: true, value: await registry.getAutomation(appId, id, stage) });
    } catch (error) {
      out.set(id, { ok: false, error });
    }
  }
  return out;
}
