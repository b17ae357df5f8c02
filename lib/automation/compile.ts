/**
 * Validation and compilation of an automation definition, in three passes:
 *   1. step types: interactive and unknown types are refused first, with the automation, the
 *      step and why (an API's automation runs unattended: nothing may wait for a person), and
 *      step lists nested too deep;
 *   2. schemas/automation.json (ajv): shapes and unknown fields;
 *   3. each step compiled by its kind: every expression parsed and type-checked once, step ids
 *      unique, the scripts it calls listed.
 * Every failure is a ConfigError naming the field: `automation 'checkout' step 'total'.vars.sum`.
 */
import { ConfigError } from '../errors';
import { nearestName } from '../definitions/names';
import { checkSchema, dotted } from '../definitions/schema';
import { compileExpression } from './cel';
import type { CompiledAutomation, CompiledStep, CompiledValue, StepCompiler } from './compiled';
import { INTERACTIVE_TYPES, STEP_KINDS } from './steps';

type Path = ReadonlyArray<string | number>;

const STEP_LISTS = ['steps', 'then', 'else'];

function isObject(v: unknown): v is Record<string, unknown> {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

/** How a field is named: the innermost step on the path by its id (`step 'fetch'`), else by its position. */
function fieldName(where: string, root: unknown, path: Path): string {
  let label = where;
  let rest: Array<string | number> = [];
  let at: unknown = root;
  for (let i = 0; i < path.length; i++) {
    const key = path[i];
    const parentKey = path[i - 1];
    at = isObject(at) || Array.isArray(at) ? (at as Record<string | number, unknown>)[key] : undefined;
    rest.push(key);
    if (typeof key === 'number' && typeof parentKey === 'string' && STEP_LISTS.includes(parentKey) && isObject(at) && typeof at.id === 'string' && at.id !== '') {
      label = `${where} step '${at.id}'`;
      rest = [];
    }
  }
  return label + dotted(rest);
}

/**
 * Step lists inside step lists (`then`, `else`, `steps`) at most this deep: validating, compiling
 * and running a definition each recurse once per level.
 */
export const MAX_STEP_NESTING = 50;

/**
 * An automation's size as a whole: its steps (nested ones counted) and the syntax nodes of all its
 * expressions. Its compiled form is held on the host (once per definition object) and in every
 * worker that runs it: about 1 KiB a step and 260 bytes a node, and as long to build.
 */
export const MAX_AUTOMATION_STEPS = 1000;
export const MAX_AUTOMATION_NODES = 10_000;
/** What a compiled step and a syntax node hold (measured on Node 20: 1.0-1.1 KiB, 260 bytes). */
const STEP_BYTES = 1024;
const NODE_BYTES = 300;

/**
 * Pass 1: every step list, depth first, for types that can never run behind an API, for nesting
 * past MAX_STEP_NESTING and for more than MAX_AUTOMATION_STEPS steps.
 */
function refuseStepTypes(where: string, def: Record<string, unknown>): void {
  let count = 0;
  const visit = (list: unknown, path: Array<string | number>, depth = 1): void => {
    if (!Array.isArray(list)) return;
    if (depth > MAX_STEP_NESTING) throw new ConfigError(fieldName(where, def, path), `steps are nested more than ${MAX_STEP_NESTING} levels deep`);
    list.forEach((step, i) => {
      const p = [...path, i];
      if (++count > MAX_AUTOMATION_STEPS) throw new ConfigError(fieldName(where, def, p), `the automation has more than ${MAX_AUTOMATION_STEPS} steps (nested ones counted)`);
      if (!isObject(step)) return;
      const name = () => fieldName(where, def, p);
      const type = step.type;
      if (typeof type === 'string' && INTERACTIVE_TYPES.has(type)) {
        throw new ConfigError(name(), `'${type}' is an interactive step (it waits for a person): an automation run by an API must not contain interactive steps`);
      }
      if (step.interactive === true) {
        throw new ConfigError(name(), 'is marked interactive: true (it waits for a person): an automation run by an API must not contain interactive steps');
      }
      if (typeof type === 'string' && !STEP_KINDS.has(type)) {
        const known = [...STEP_KINDS.keys()];
        const near = nearestName(type, known);
        throw new ConfigError(name(), `unknown step type '${type}'${near ? ` (did you mean '${near}'?)` : ''}; the step types are ${known.join(', ')}`);
      }
      for (const key of STEP_LISTS) visit(step[key], [...p, key], depth + 1);
    });
  };
  visit(def.steps, ['steps']);
}

/**
 * Validates and compiles `def`. Throws ConfigError naming the automation, the step and the field.
 * `validated`: the definition passed this function before (a script worker compiling what the
 * router checked): the schema pass is skipped.
 */
export function compileAutomation(def: unknown, options: { where?: string; validated?: boolean } = {}): CompiledAutomation {
  const id = isObject(def) && typeof def.id === 'string' ? def.id : undefined;
  const at = options.where ?? (id === undefined ? 'automation' : `automation '${id}'`);
  if (!isObject(def)) throw new ConfigError(at, 'must be an object { id, steps }');
  refuseStepTypes(at, def);
  if (!options.validated) {
    const problem = checkSchema('automation', def);
    if (problem) throw new ConfigError(fieldName(at, def, problem.path), problem.message);
  }

  const scripts = new Set<string>();
  const ids = new Set<string>();
  let nodes = 0;
  let stepCount = 0;
  const compileList = (list: unknown, path: Array<string | number>, vars: readonly string[]): CompiledStep[] =>
    (list as Array<Record<string, unknown>>).map((step, i) => {
      stepCount++;
      const p = [...path, i];
      const type = String(step.type);
      const stepId = typeof step.id === 'string' ? step.id : undefined;
      const field = (f: string) => fieldName(at, def, [...p, ...f.split('.')]);
      if (stepId !== undefined) {
        if (ids.has(stepId)) throw new ConfigError(fieldName(at, def, p), `the step id '${stepId}' is used twice: each step's result is state.steps.<id>`);
        ids.add(stepId);
      }
      const c: StepCompiler = {
        value(v: unknown, f: string): CompiledValue {
          if (typeof v !== 'string') return { literal: v === undefined ? null : v };
          const expr = compileExpression(v, field(f), vars);
          nodes += expr.nodes;
          if (nodes > MAX_AUTOMATION_NODES) throw new ConfigError(field(f), `the automation's expressions have more than ${MAX_AUTOMATION_NODES} syntax nodes together`);
          return { expr };
        },
        steps: (nested, f, loopVars = []) => compileList(nested, [...p, f], [...vars.filter((v) => !loopVars.includes(v)), ...loopVars]),
        useScript: (name) => void scripts.add(name),
        error: (f, message) => new ConfigError(field(f), message),
      };
      const run = STEP_KINDS.get(type)!.compile(step, c);
      const label = (stepId !== undefined ? `step '${stepId}'` : dotted(p).slice(1)) + ` (${type})`;
      return { id: stepId, type, label, run };
    });
  const steps = compileList(def.steps, ['steps'], []);
  return { id: id!, steps, scripts: [...scripts], heldBytes: stepCount * STEP_BYTES + nodes * NODE_BYTES };
}

const cache = new WeakMap<object, readonly string[] | ConfigError>();

/**
 * Validates a definition object once per object (a registry that hands back the same object pays
 * once; a changed definition is a new object) and gives the scripts its steps call. Only that is
 * kept: the router never runs what it compiled (the workers compile what they run), and a compiled
 * form holds about 1 KiB a step and 300 bytes a syntax node, per definition the registry holds.
 */
export function automationScripts(def: object): readonly string[] {
  // (a file holding null, a text or a number: refused naming what an automation is, not by the WeakMap)
  if (typeof def !== 'object' || def === null) return compileAutomation(def).scripts;
  let c = cache.get(def);
  if (c === undefined) {
    try {
      c = compileAutomation(def).scripts;
    } catch (e) {
      if (!(e instanceof ConfigError)) throw e;
      c = e;
    }
    cache.set(def, c);
  }
  if (c instanceof ConfigError) throw c;
  return c;
}

/**
 * Checks an automation definition as `MemoryRegistry.putAutomation` does. Throws ConfigError.
 * Checks the object as it is now (not an answer kept from an earlier check of the same object,
 * which an object changed since would have passed); a first check is kept for the router.
 */
export function validateAutomation(def: unknown): void {
  const keep = typeof def === 'object' && def !== null && !cache.has(def);
  let scripts: readonly string[];
  try {
    scripts = compileAutomation(def).scripts;
  } catch (e) {
    if (keep && e instanceof ConfigError) cache.set(def, e);
    throw e;
  }
  if (keep) cache.set(def, scripts);
}
