/**
 * Applies the plan as text insertions only: `(await `, `)`, `async ` and a `;` that keeps a
 * statement from joining the one before it. Nothing is removed and no line break is added, so
 * every statement stays on its author's line.
 *
 * Each `await`, the script's own and the inserted ones, is written
 * `__resume(__current(), await __settled(x))`, so that the code after it acts for its own call
 * (see lib/runtime/sandbox/continuations.ts): `(await x)` is inserted as
 * `(__resume(__current(),await __settled(x)))`.
 */
import type { Node } from './ast';
import { CONTINUATION_GLOBALS as G } from '../protocol';

/** Before an `await`, and after its keyword (a space first: `await(x)` must not become one word). */
const BEFORE_AWAIT = `${G.resume}(${G.current}(),`;
const AFTER_AWAIT = ` ${G.settled}(`;

/** At one offset, inserts apply in this order: a closing paren ends an expression before anything opens. */
const enum Rank {
  Close = 0,
  Semicolon = 1,
  Open = 2,
  Async = 3,
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
 * `inserted` gets each insertion as [offset in the source, length], in source order. `awaits`:
 * the script's own awaits, each to wrap; null: no await is wrapped, the inserted ones included.
 */
export function applyPlan(source: string, wraps: readonly Node[], asyncFunctions: readonly Node[], awaits: readonly Node[] | null, parentOf: Map<Node, Node>, inserted: Array<[number, number]>): string {
  const edits: Insertion[] = [];
  const semicolons = new Set<number>();
  for (const node of awaits ?? []) {
    edits.push({ pos: node.start, rank: Rank.Open, text: BEFORE_AWAIT }, { pos: node.start + 'await'.length, rank: Rank.Open, text: AFTER_AWAIT }, { pos: node.end, rank: Rank.Close, text: '))' });
  }
  const [open, close] = awaits === null ? ['(await ', ')'] : [`(${BEFORE_AWAIT}await${AFTER_AWAIT}`, ')))'];
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
