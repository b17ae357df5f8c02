/**
 * The host memory a router spends on outbound bodies it holds for scripts
 * (`outbound.maxBufferedBytes`): every call takes from one budget, at most its share of it, the
 * bytes of the response bodies it reads (given back as its responses are released, at the latest
 * when the call ends) and of the request bodies it sends (given back once answered). A body that
 * does not fit is refused before it is read or sent.
 */
import { ApiError } from '../errors';

/** One call's part of the budget. */
export interface BodyAccount {
  /** Takes `bytes` for a body (`what`: "response body from HOST"), or throws OUTBOUND_FAILED (nothing taken) when they do not fit. */
  take(bytes: number, what: string): void;
  /** Gives back bytes taken before. */
  give(bytes: number): void;
  /** Gives back everything the call holds; later takes fail, later gives change nothing. */
  close(): void;
}

/** The budget of one router: `max` bytes for all calls together, `perCall` for one call. */
export class BodyBudget {
  private used = 0;

  constructor(
    readonly max: number,
    readonly perCall: number,
  ) {}

  /** A new call's account. */
  account(): BodyAccount {
    let held = 0;
    let closed = false;
    return {
      take: (bytes, what) => {
        let over = '';
        if (closed || held + bytes > this.perCall) over = `this call's share (${this.perCall} bytes) of the host's memory budget for outbound bodies is spent`;
        else if (this.used + bytes > this.max) over = `the host's memory budget for outbound bodies (${this.max} bytes) is spent; try again later`;
        if (over) throw new ApiError('OUTBOUND_FAILED', `${what} does not fit: ${over}`);
        held += bytes;
        this.used += bytes;
      },
      give: (bytes) => {
        const back = closed ? 0 : Math.min(bytes, held);
        held -= back;
        this.used -= back;
      },
      close: () => {
        this.used -= held;
        held = 0;
        closed = true;
      },
    };
  }
}
