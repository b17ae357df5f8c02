/**
 * Names the adapter bundle's wrapper provides (see scripts/build.js): the bundle is the body of
 * `(function (hostFn) { var __adapterEntry; ...; return __adapterEntry; })`.
 */
/** The host bridge: see prelude.ts. */
declare const hostFn: (stageId: number, op: string, argsJson: string, async: boolean) => string | number;
/** Where entry.ts leaves the entry object the wrapper returns. */
declare let __adapterEntry: unknown;
