/** How an automation run ends other than by finishing its steps. */
import { ERRORS, type ErrorName } from '../errors';
import type { ErrorDetail } from '../error-location';

/** The most characters of a value a step's failure message shows (the value may be a request's body). */
export const SHOWN_MAX = 200;

/**
 * A step failed: the call fails with this message, code and status (and, as the call, runs the
 * API's onError). `fatal` failures (the time limit, the engine's) leave no time for onError.
 */
export class StepFailure extends Error {
  constructor(
    message: string,
    readonly code: number,
    readonly status: number,
    readonly fatal = false,
    /** A script step's failure: where its script failed (error name, location, stack). */
    readonly detail?: ErrorDetail,
  ) {
    super(message);
    this.name = 'StepFailure';
  }

  /** A failure with one of the table's codes. */
  static of(name: ErrorName, message: string, fatal = false): StepFailure {
    return new StepFailure(message, ERRORS[name].code, ERRORS[name].status, fatal);
  }
}

/** A `return` step: unwinds to the top of the run with the automation's result. */
export class ReturnSignal {
  constructor(readonly value: unknown) {}
}
