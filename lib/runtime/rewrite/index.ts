/**
 * Compile-time rewrite of spec-style synchronous host calls into `await`s, so that a script
 * waiting on the host suspends only itself ("async mode"). A script the rewrite cannot make
 * async safely is returned unchanged with `async: false` and the reason: the runtime then runs
 * it in blocking mode, where host calls return values by holding the worker thread.
 *
 * Pure and self-contained: source in, source out. It runs once per source (callers cache by
 * source hash).
 */
import { analyze, NestingError } from './parser';
import { FUNCTION_TYPES, indexTree, Lines, parseModule, propertyName, type AstIndex, type Node } from './ast';
import { Planner } from './analysis';
import { applyPlan } from './edits';
import { findHazard } from './hazards';
import { CONTINUATION_GLOBALS } from '../protocol';

/** The outcome of `rewriteHostCalls`. */
export interface RewriteResult {
  /** The code to run: rewritten when `async` is true; the source itself when it is false. */
  code: string;
  /** True: run in async mode (every host call in `code` is awaited). False: run in blocking mode. */
  async: boolean;
  /** Why the script falls back to blocking mode, naming the line (only when `async` is false). */
  reason?: string;
  /** The parser's message, ending in `(line:column)` (the column from 1, as sucrase's and locations count), when the source is no ES module (a syntax error). */
  syntaxError?: string;
}

export interface RewriteOptions {
  /** Names the script in fallback reasons. */
  filename?: string;
  /**
   * Filled, in async mode, with the text the rewrite inserted: [line, column (from 0) in the
   * source, length], in source order. `sourceColumn` maps a column of the rewritten code back.
   */
  insertions?: Array<[number, number, number]>;
  /**
   * false: leaves each `await`, `yield` and `try` as written and inserts `(await x)`, to read
   * what the rewrite awaits. The runtime always wraps them (the default, edits.ts): each `await`
   * as `__resume(__current(), await x)` and each `try` of an async function so that its `catch`
   * and `finally` resume the call, so that the code after a wait acts for its own call.
   */
  wrapAwaits?: boolean;
}

/**
 * Method names treated as host calls wherever they are called as `x.name(...)`: the host
 * helpers that wait on I/O. Calling a local method with one of these names is awaited too, which
 * is harmless unless it returns a promise used as a promise.
 */
export const HOST_METHODS: readonly string[] = Object.freeze(['getAccountByToken', 'request', 'saveBodyAsFile', 'save', 'saveStorage', 'saveAttachment']);

const HOST_SET: ReadonlySet<string> = new Set(HOST_METHODS);

/**
 * Text every host call or hazard must contain (a name, or a `\u` escape spelling one): a source
 * without any is parsed (syntax errors still fall back) but needs no analysis.
 */
const CANDIDATE_TEXT = new RegExp(`${HOST_METHODS.join('|')}|http|system|eval|Function|constructor|import|platform|globalThis|\\\\u`);

/** The names each `await` and `try` is wrapped with (a script naming one runs unchanged: it could stand in for them). */
const RESERVED: ReadonlySet<string> = new Set(Object.values(CONTINUATION_GLOBALS));
/**
 * Text a script needs for the wrapping to change it or refuse it: an `await`, `yield` or `try` to
 * wrap, or a reserved name (written with escapes, a name goes through the analysis anyway:
 * CANDIDATE_TEXT has `\u`).
 */
const WRAPPED_TEXT = new RegExp(['await', 'yield', 'try', ...RESERVED].join('|'));

/**
 * The try statements where a rejection of an await may land: those of async functions (written
 * so, or made so by the rewrite) and of module code (top-level await); not those of other
 * functions, which cannot await.
 */
function asyncTries(index: AstIndex, asyncFunctions: readonly Node[]): Node[] {
  if (index.tries.length === 0) return [];
  const madeAsync = new Set(asyncFunctions);
  const functionOf = (n: Node) => enclosingFunction(index, n);
  const topLevelAwait = index.awaits.some((a) => functionOf(a) === undefined);
  return index.tries.filter((t) => {
    const fn = functionOf(t);
    return fn === undefined ? topLevelAwait : fn.async === true || madeAsync.has(fn);
  });
}

/** The function a node is in (undefined: module code). */
function enclosingFunction(index: AstIndex, n: Node): Node | undefined {
  let up = index.parent.get(n);
  while (up !== undefined && !FUNCTION_TYPES.has(up.type)) up = index.parent.get(up);
  return up;
}

/** The yields of async generators: a queued `next()` resumes such a generator from a promise job. */
function asyncYields(index: AstIndex): Node[] {
  return index.yields.filter((y) => enclosingFunction(index, y)?.async === true);
}

/** Whether identifier `id` names a binding or a reference (not a property name: `x.__current`, `{ __current: 1 }`). */
function isName(index: AstIndex, id: Node): boolean {
  const up = index.parent.get(id);
  if (up === undefined) return true;
  if (up.type === 'MemberExpression') return up.property !== id || up.computed === true;
  if (up.type === 'Property' || up.type === 'MethodDefinition' || up.type === 'PropertyDefinition') return up.key !== id || up.computed === true || up.shorthand === true;
  return true;
}

function isHostCall(node: Node): boolean {
  const callee = (node.type === 'CallExpression' ? node.callee : node.tag) as Node;
  if (callee.type !== 'MemberExpression') return false;
  const name = propertyName(callee);
  return name !== null && HOST_SET.has(name);
}

/**
 * Rewrites an ES module (TypeScript already stripped) so that every host call, and every call of
 * a local function that waits on the host, is awaited, and each function holding one is async.
 * Only inserts text (`(await `, `)`, `async `, `;`): line numbers are unchanged.
 */
export function rewriteHostCalls(source: string, options: RewriteOptions = {}): RewriteResult {
  const prefix = options.filename ? `${options.filename}: ` : '';
  const fallback = (reason: string): RewriteResult => ({ code: source, async: false, reason: prefix + reason });

  let ast: Node;
  try {
    ast = parseModule(source);
  } catch (err) {
    if (err instanceof NestingError) return fallback('the script is nested too deeply to analyze');
    const e = err as SyntaxError & { loc?: { line: number } };
    const message = String(e.message).replace(/\s*\(\d+:\d+\)$/, '');
    if (/stack space/i.test(message)) return fallback('the script is nested too deeply to analyze');
    // (acorn counts columns from 0)
    const syntaxError = String(e.message).replace(/\((\d+):(\d+)\)$/, (_m, line: string, column: string) => `(${line}:${Number(column) + 1})`);
    return { ...fallback(`syntax error${e.loc ? ` at line ${e.loc.line}` : ''}: ${message}`), syntaxError };
  }
  if (!CANDIDATE_TEXT.test(source) && !WRAPPED_TEXT.test(source)) return { code: source, async: true };
  try {
    const index = indexTree(ast);
    const lines = new Lines(source);
    const reserved = index.dunders.find((id) => RESERVED.has(id.name as string) && isName(index, id));
    if (reserved !== undefined) return fallback(`the name \`${reserved.name}\` at line ${lines.lineOf(reserved.start)} is the runtime's own`);
    if (index.forAwaits.length > 0) {
      const loop = index.forAwaits.reduce((a, b) => (b.start < a.start ? b : a));
      return fallback(`\`for await\` at line ${lines.lineOf(loop.start)}: each step of the loop resumes where the runtime cannot say for which call`);
    }
    /** The code to run in async mode: with `wraps` awaited, `asyncFunctions` made async and every await wrapped (edits.ts). */
    const done = (wraps: readonly Node[], asyncFunctions: readonly Node[]): RewriteResult => {
      const continuations = options.wrapAwaits === false ? null : { awaits: [...index.awaits, ...asyncYields(index)], tries: asyncTries(index, asyncFunctions) };
      if (wraps.length === 0 && (continuations === null || (continuations.awaits.length === 0 && continuations.tries.length === 0))) return { code: source, async: true };
      const inserted: Array<[number, number]> = [];
      const code = applyPlan(source, wraps, asyncFunctions, continuations, index.parent, inserted);
      for (const [pos, length] of inserted) options.insertions?.push([lines.lineOf(pos), lines.columnOf(pos), length]);
      return { code, async: true };
    };
    if (!CANDIDATE_TEXT.test(source)) return done([], []);
    // No childVisitorKeys: esrecurse copies that table for every pattern it visits; its own keys plus
    // iteration over unknown node types cover acorn's tree.
    const scopes = analyze(ast as never, { ecmaVersion: 2025, sourceType: 'module', fallback: 'iteration' });

    const hazard = findHazard(source, index, scopes, HOST_SET, lines);
    if (hazard !== null) return fallback(hazard.message);

    const hostCalls = index.calls.filter(isHostCall);
    if (hostCalls.length === 0) return done([], []);

    const plan = new Planner(source, index, scopes, lines).plan(hostCalls);
    if (!plan.ok) return fallback(plan.message);
    return done(plan.wraps, plan.asyncFunctions);
  } catch (err) {
    // The scope analysis recurses: an expression nested thousands deep exhausts the stack.
    if (err instanceof RangeError) return fallback('the script is nested too deeply to analyze');
    throw err;
  }
}

/**
 * The column (from 1) in the source as written of a column (from 1) on line `line` of the
 * rewritten code: an error's location names the author's text, not the inserted `(await `.
 */
export function sourceColumn(insertions: ReadonlyArray<readonly [number, number, number]>, line: number, column: number): number {
  let shift = 0;
  for (const [l, c, length] of insertions) {
    if (l < line) continue;
    if (l > line || column - 1 < c + shift) break;
    if (column - 1 < c + shift + length) return c + 1; // (in the inserted text: where it was inserted)
    shift += length;
  }
  return column - shift;
}
