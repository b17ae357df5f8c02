/**
 * Automation programs as JSON: what a registry stores (a database row, a file in
 * `<root>/<appId>/automations/`). `schemas/automation.json` describes the same shape.
 *
 * In the fields marked "value", a string is a CEL expression over `ctx`, `state` and, inside a
 * `forEach`, its item and `index`: `"ctx.query.id"`, `"'Hello, ' + ctx.query.name"`,
 * `"{'id': state.vars.id}"`. Any other JSON value (number, boolean, null, object, array) is
 * taken as it is.
 */

/** A value field: a CEL expression (string) or a literal JSON value (anything else). */
export type AutomationValue = string | number | boolean | null | readonly unknown[] | { readonly [key: string]: unknown };

/** Fields every step may have. */
export interface AutomationStepBase {
  /** Names the step: its result is `state.steps.<id>` for the steps after it. Letters, digits, `_`. */
  id?: string;
  /** For people reading the definition. */
  name?: string;
  description?: string;
  /** A step marked `true` waits for a person: refused (an API's automation must run unattended). */
  interactive?: false;
}

/** Calls `export function <function>(ctx, state)` of a script; its return value is the step's result. */
export interface ScriptStep extends AutomationStepBase {
  type: 'script';
  script: string;
  function: string;
}

/** An outbound request through the router's guarded client (as `platform.http.request`). */
export interface HttpStep extends AutomationStepBase {
  type: 'http';
  /** An expression giving the URL (a string: there is no literal URL). */
  url: string;
  /** An HTTP method, e.g. `POST` (a literal, not an expression). Default `GET`. */
  method?: string;
  /** Header name → value. */
  headers?: Record<string, AutomationValue>;
  /** value: a string is sent as it is; bytes (CEL `bytes`) as those bytes (no content type added); anything else as JSON (`content-type: application/json` unless set). */
  body?: AutomationValue;
  /** At most this long (ms), within the outbound client's own limit and the API's time limit. */
  timeoutMs?: number;
}

/** Assigns `state.vars.<name>` for each entry, in order (a later one sees the earlier ones). */
export interface SetStep extends AutomationStepBase {
  type: 'set';
  /** Name → value. */
  vars: Record<string, AutomationValue>;
}

/** Runs `then` when `condition` is true, `else` otherwise. */
export interface IfStep extends AutomationStepBase {
  type: 'if';
  /** An expression giving a boolean, or a boolean. */
  condition: string | boolean;
  then: AutomationStep[];
  else?: AutomationStep[];
}

/** Runs `steps` once per item of a list. */
export interface ForEachStep extends AutomationStepBase {
  type: 'forEach';
  /** An expression giving a list, or a list. */
  items: string | readonly unknown[];
  /** The item's variable name inside `steps`. Default `item`; `index` is the item's position. */
  as?: string;
  steps: AutomationStep[];
}

/** Ends the automation with `value` as its result (without one: no result). */
export interface ReturnStep extends AutomationStepBase {
  type: 'return';
  value?: AutomationValue;
}

/** Ends the call with an error, exactly like `platform.app.abort(message, status)` (code 270001). */
export interface AbortStep extends AutomationStepBase {
  type: 'abort';
  /** value: the error message. */
  message?: AutomationValue;
  /** value: an HTTP status from 400 to 599 (otherwise 500). */
  status?: AutomationValue;
}

export type AutomationStep = ScriptStep | HttpStep | SetStep | IfStep | ForEachStep | ReturnStep | AbortStep;

/** An automation program: steps run in order, without a person (no interactive steps). */
export interface AutomationDefinition {
  /** What APIs refer to: `call: { automation: '<id>' }`. */
  id: string;
  name?: string;
  description?: string;
  steps: AutomationStep[];
  /** The JSON Schema an editor checks the definition against (`schemas/automation.json`); not used by the router. */
  $schema?: string;
}

/**
 * The `state` every step sees (CEL `state`, a script step's second argument):
 * `steps.<id>` holds each earlier step's result, `vars` what `set` assigned, and `result` the
 * call's result when the automation runs as the after hook (null otherwise).
 */
export interface AutomationState {
  steps: Record<string, unknown>;
  vars: Record<string, unknown>;
  result: unknown;
}
