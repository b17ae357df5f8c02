/**
 * Applies the plan as text insertions only: `(await `, `)`, `async ` and a `;` that keeps a
 * statement from joining the one before it. Nothing is removed and no line break is added, so
 * every statement stays on its author's line.
 *
 * Each `await`, the script's own and the inserted ones, is written `__resume(__current(), await
 * x)`, so that the code after it acts for its own call (see lib/runtime/sandbox/continuations.ts):
 * `(await x)` is inserted as `(__resume(__current(),await x))`; a `yield` of an async generator
 * is wrapped the same way (queued `next()` calls resume it from promise jobs). A rejection
 * thrown at an await goes to a `catch` or `finally` of its function: each `try` of an async
 * function (or of module code) is wrapped as `{const __callToken=__current();try ... catch (e)
 * {__resume(__callToken);...} finally {__resume(__callToken);...}}`.
 */
import type { Node } from './ast';
import { CONTINUATION_GLOBALS as G } from '../protocol';

/** Before an `await`. */
const BEFORE_AWAIT = `${G.resume}(${G.current}(),`;
/** Before a `try` (and its labels), and at the head of its `catch` and `finally` blocks. */
const BEFORE_TRY = `{const ${G.token}=${G.current}();`;
const RESUME_TRY = `${G.resume}(${G.token});`;

/**
 * At one offset, inserts apply in this order: a closing paren ends an expression before anything
 * opens; a statement put at the head of a block (`__resume(__callToken);`) comes before the
 * expression that starts there.
 */
const enum Rank {
  Close = 0,
  Semicolon = 1,
  Statement = 2,
  Open = 3,
  Async = 4,
}

interface Insertion {
  pos: number;
  rank: Rank;
  text: string;
}

/** Statements that cannot end in an expression a `(` on the next line would call. */
const CLOSED_STATEMENTS: ReadonlySet<string> = new Set(['FunctionDeclaration', 'ClassDeclaration', 'BlockStatement', 'EmptyStatement']);

/**
 * Whether `statement` follows, in a statement list (where an extra `;` is an empty statement and
 * nothing else), a statement that may end without a semicolon.
 */
function followsOpenStatement(source: string, statement: Node, parent: Node | undefined): boolean {
  if (parent === undefined) return false;
  const list = parent.type === 'SwitchCase' ? parent.consequent : parent.body;
  if (!Array.isArray(list)) return false;
  const at = list.indexOf(statement);
  if (at <= 0) return false;
  const prev = list[at - 1] as Node;
  return source[prev.end - 1] !== ';' && !CLOSED_STATEMENTS.has(prev.type);
}

/**
 * The statement an expression starting at `node.start` begins, when a `(` put there could be read
 * as a call of the previous line's last expression (no semicolon before it: `f()\n(await g())`).
 */
function statementNeedingSemicolon(source: string, node: Node, parentOf: Map<Node, Node>): Node | null {
  let cur = node;
  for (let up = parentOf.get(cur); up !== undefined && up.start === node.start; cur = up, up = parentOf.get(up)) {
    if (up.type === 'ExpressionStatement') return followsOpenStatement(source, up, parentOf.get(up)) ? up : null;
  }
  return null;
}

const WORD_CHAR = /[\p{ID_Continue}$\u200c\u200d\\]/u;

/**
 * `inserted` gets each insertion as [offset in the source, length], in source order.
 * `continuations`: the script's own awaits (and async generators' yields) to wrap, and the try
 * statements whose catch and finally resume the call; null: nothing is wrapped, the inserted
 * awaits included.
 */
export function applyPlan(
  source: string,
  wraps: readonly Node[],
  asyncFunctions: readonly Node[],
  continuations: { awaits: readonly Node[]; tries: readonly Node[] } | null,
  parentOf: Map<Node, Node>,
  inserted: Array<[number, number]>,
): string {
  const edits: Insertion[] = [];
  const semicolons = new Set<number>();
  // (an await, and a yield of an async generator: its next() may resume it from a promise job)
  for (const node of continuations?.awaits ?? []) {
    edits.push({ pos: node.start, rank: Rank.Open, text: BEFORE_AWAIT }, { pos: node.end, rank: Rank.Close, text: ')' });
  }
  for (const node of continuations?.tries ?? []) {
    // (before its labels: `break label` stays inside the labelled statement)
    let outer = node;
    for (let up = parentOf.get(outer); up?.type === 'LabeledStatement'; up = parentOf.get(up)) outer = up;
    edits.push({ pos: outer.start, rank: Rank.Open, text: BEFORE_TRY }, { pos: outer.end, rank: Rank.Close, text: '}' });
    if (node.handler) edits.push({ pos: (node.handler.body as Node).start + 1, rank: Rank.Statement, text: RESUME_TRY });
    if (node.finalizer) edits.push({ pos: (node.finalizer as Node).start + 1, rank: Rank.Statement, text: RESUME_TRY });
  }
  const [open, close] = continuations === null ? ['(await ', ')'] : [`(${BEFORE_AWAIT}await `, '))'];
  for (const node of wraps) {
    edits.push({ pos: node.start, rank: Rank.Open, text: open }, { pos: node.end, rank: Rank.Close, text: close });
    const statement = statementNeedingSemicolon(source, node, parentOf);
    if (statement !== null && !semicolons.has(statement.start)) {
      semicolons.add(statement.start);
      edits.push({ pos: statement.start, rank: Rank.Semicolon, text: ';' });
    }
  }
  for (const fn of asyncFunctions) {
    // `export default(x) => ...`: a word right before must not run into `async`
    const glued = fn.start > 0 && WORD_CHAR.test(source[fn.start - 1]);
    edits.push({ pos: fn.start, rank: Rank.Async, text: glued ? ' async ' : 'async ' });
  }
  edits.sort((a, b) => a.pos - b.pos || a.rank - b.rank);
  let out = '';
  let last = 0;
  for (const e of edits) {
    out += source.slice(last, e.pos) + e.text;
    last = e.pos;
    inserted.push([e.pos, e.text.length]);
  }
  return out + source.slice(last);
}
