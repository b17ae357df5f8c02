/** The built-in step types, and the ones refused because they wait for a person. */
import type { StepKind } from '../compiled';
import { abortStep } from './abort';
import { forEachStep } from './for-each';
import { httpStep } from './http';
import { ifStep } from './if';
import { returnStep } from './return';
import { scriptStep } from './script';
import { setStep } from './set';

export const STEP_KINDS: ReadonlyMap<string, StepKind> = new Map([scriptStep, httpStep, setStep, ifStep, forEachStep, returnStep, abortStep].map((k) => [k.type, k]));

/**
 * Step types of low-code automations that need a person (a dialog, a form, a confirmation, a
 * page to open): an API's automation runs unattended, so these are refused when the definition
 * is validated rather than left to hang a request.
 */
export const INTERACTIVE_TYPES: ReadonlySet<string> = new Set(['form', 'confirm', 'approval', 'message', 'openPage', 'input']);
