/**
 * Where a script failed: `script.js:line:column` and the sandbox's own stack frames, read from
 * the texts the engines give (both run in the worker; the router only formats what they found).
 *
 * - Thrown errors: QuickJS frames read `    at f (orders.js:5:12)` (or `at orders.js:5:12`),
 *   V8 (vm2) frames read the same. Only frames whose file is one of the job's scripts are kept:
 *   the adapter's frames (`scriptable-api:…`) and any host frame (absolute paths, `node:`) never
 *   leave the worker.
 * - Syntax errors: QuickJS gives a frame as above; V8 heads its stack with `orders.js:5` and a
 *   caret line under the offending column; sucrase (TypeScript, vm2's module transform) ends its
 *   message with `(5:12)`.
 */

/** What the logs (and, when the router's `exposeErrorLocation` is on, the error body) say about a failure. */
export interface ErrorDetail {
  /** The stage that failed: `before`, `call`, `after` or `onError` (host stages: see the router). */
  stage?: string;
  /** The script (or automation id) of that stage. */
  script?: string;
  /** The thrown error's name (`TypeError`, `SyntaxError`...). */
  name?: string;
  /** `script.js:line:column` (QuickJS and V8 both give a column) of the innermost script frame. */
  location?: string;
  /** The script frames of the stack, one `at …` line each (never a host frame). */
  stack?: string;
  /** The call's own failure, when this is the failure of the onError hook that ran for it (logged, never sent). */
  callFailure?: { code: number; message: string; script?: string; location?: string };
  /**
   * What failed inside the engine or its worker (ENGINE_FAILURE: the engine's or the worker's own
   * message, which may name its internals), for the log only: the client gets the table's message.
   */
  cause?: string;
}

const FRAME = /^\s*at (?:(.*?) \()?(.+?):(\d+)(?::(\d+))?\)?\s*$/;

interface Frame {
  text: string;
  file: string;
  line: number;
  column?: number;
}

/** Most of a stack read, and the longest line read as a frame (a script may throw any `stack`). */
const MAX_STACK = 64 * 1024;
const MAX_FRAME = 1024;

function frames(stack: string | undefined, isScript: (file: string) => boolean): Frame[] {
  if (typeof stack !== 'string' || stack === '') return [];
  const out: Frame[] = [];
  for (const raw of stack.slice(0, MAX_STACK).split('\n')) {
    if (raw.length > MAX_FRAME) continue; // (no frame is that long; FRAME would take time to say so)
    const m = FRAME.exec(raw);
    if (!m || !isScript(m[2])) continue;
    out.push({ text: raw.trim(), file: m[2], line: Number(m[3]), column: m[4] === undefined ? undefined : Number(m[4]) });
    if (out.length >= 20) break;
  }
  return out;
}

function at(file: string, line: number, column?: number): string {
  return column === undefined ? `${file}:${line}` : `${file}:${line}:${column}`;
}

/**
 * The script frames of a thrown error's stack and the innermost one's location. `isScript` tells
 * the job's script names from everything else; `sourceColumn`, when given, maps a frame's column
 * back to the script as written.
 */
export function thrownDetail(
  stack: string | undefined,
  isScript: (file: string) => boolean,
  sourceColumn?: (file: string, line: number, column: number) => number,
): Pick<ErrorDetail, 'location' | 'stack'> {
  const fs = frames(stack, isScript);
  if (fs.length === 0) return {};
  // (a column of the code the engine ran, which the rewrite may have added to: the author's column)
  if (sourceColumn !== undefined) {
    for (const f of fs) {
      if (f.column === undefined) continue;
      const column = sourceColumn(f.file, f.line, f.column);
      if (column === f.column) continue;
      const head = `${f.file}:${f.line}:`;
      const i = f.text.lastIndexOf(`${head}${f.column}`);
      if (i >= 0) f.text = f.text.slice(0, i) + head + column + f.text.slice(i + head.length + String(f.column).length);
      f.column = column;
    }
  }
  return { location: at(fs[0].file, fs[0].line, fs[0].column), stack: fs.map((f) => f.text).join('\n') };
}

/**
 * The location of a compile error of script `name`, from whichever form the engine gave:
 * a QuickJS frame, V8's `name:line` head with its caret line, or sucrase's `(line:column)`.
 */
export function compileLocation(name: string, message: string | undefined, stack: string | undefined): string | undefined {
  const fromFrames = frames(stack, (f) => f === name)[0];
  if (fromFrames) return at(name, fromFrames.line, fromFrames.column);
  if (typeof stack === 'string') {
    const lines = stack.split('\n');
    const head = /^(.+):(\d+)$/.exec(lines[0] ?? '');
    if (head && head[1] === name) {
      const caret = (lines[2] ?? '').indexOf('^');
      return at(name, Number(head[2]), caret >= 0 ? caret + 1 : undefined);
    }
  }
  // (sucrase's `(line:column)` counts columns from 1, as locations do)
  const sucrase = typeof message === 'string' ? /\((\d+):(\d+)\)\s*$/.exec(message) : null;
  if (sucrase) return at(name, Number(sucrase[1]), Number(sucrase[2]));
  return undefined;
}
