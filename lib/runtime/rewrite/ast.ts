/**
 * The parsed script for the host-call rewrite: acorn's ESTree with a parent map, the nodes the
 * analysis looks at, and source positions turned into line numbers for fallback reasons.
 */
import { ModuleParser } from './parser';
import { KEYS } from 'eslint-visitor-keys';

/** An ESTree node as acorn builds it: `start`/`end` are offsets into the source. */
export interface Node {
  type: string;
  start: number;
  end: number;
  // ESTree's fields differ per node type; the analysis reads them by name.
  [field: string]: any; // eslint-disable-line @typescript-eslint/no-explicit-any
}

/** Parses an ES module (latest syntax; `range` on each node, which eslint-scope reads); throws acorn's SyntaxError (with `loc`) on bad input. */
export function parseModule(source: string): Node {
  return ModuleParser.parse(source, { ecmaVersion: 'latest', sourceType: 'module', allowHashBang: true, ranges: true }) as unknown as Node;
}

export const FUNCTION_TYPES: ReadonlySet<string> = new Set(['FunctionDeclaration', 'FunctionExpression', 'ArrowFunctionExpression']);

/** What one pass over the tree collects. */
export interface AstIndex {
  parent: Map<Node, Node>;
  /** CallExpression and TaggedTemplateExpression nodes. */
  calls: Node[];
  /** MemberExpression nodes with a static property name (see `propertyName`). */
  members: Node[];
  /** ObjectPattern nodes (destructuring). */
  objectPatterns: Node[];
  /** `import` declarations and `import()` expressions. */
  imports: Node[];
  /** ReturnStatement nodes. */
  returns: Node[];
  /** AwaitExpression nodes (the script's own `await`s). */
  awaits: Node[];
  /** YieldExpression nodes. */
  yields: Node[];
  /** `for await` loops. */
  forAwaits: Node[];
  /** TryStatement nodes. */
  tries: Node[];
  /** Identifiers whose name starts with `__` (escapes decoded: `\u005f_x` is `__x`). */
  dunders: Node[];
}

/** One iterative walk (deeply nested expressions must not overflow the stack). */
export function indexTree(root: Node): AstIndex {
  const index: AstIndex = { parent: new Map(), calls: [], members: [], objectPatterns: [], imports: [], returns: [], awaits: [], yields: [], forAwaits: [], tries: [], dunders: [] };
  const { parent } = index;
  const stack: Node[] = [root];
  while (stack.length > 0) {
    const node = stack.pop() as Node;
    switch (node.type) {
      case 'CallExpression':
      case 'TaggedTemplateExpression':
        index.calls.push(node);
        break;
      case 'MemberExpression':
        if (propertyName(node) !== null) index.members.push(node);
        break;
      case 'ObjectPattern':
        index.objectPatterns.push(node);
        break;
      case 'ImportDeclaration':
      case 'ImportExpression':
        index.imports.push(node);
        break;
      case 'ReturnStatement':
        index.returns.push(node);
        break;
      case 'AwaitExpression':
        index.awaits.push(node);
        break;
      case 'YieldExpression':
        index.yields.push(node);
        break;
      case 'ForOfStatement':
        if (node.await === true) index.forAwaits.push(node);
        break;
      case 'TryStatement':
        index.tries.push(node);
        break;
      case 'Identifier':
        if ((node.name as string).startsWith('__')) index.dunders.push(node);
        break;
      default:
    }
    const keys = (KEYS as Record<string, readonly string[] | undefined>)[node.type] ?? Object.keys(node);
    for (const key of keys) {
      const value = node[key];
      if (Array.isArray(value)) {
        for (const child of value) {
          if (child !== null && typeof child === 'object' && typeof child.type === 'string') {
            parent.set(child, node);
            stack.push(child);
          }
        }
      } else if (value !== null && typeof value === 'object' && typeof value.type === 'string') {
        parent.set(value, node);
        stack.push(value);
      }
    }
  }
  return index;
}

/** The name a member expression reads when it is static: `a.b`, `a['b']`, `` a[`b`] ``; else null. */
export function propertyName(member: Node): string | null {
  const p = member.property as Node;
  if (!member.computed) return p.type === 'Identifier' ? (p.name as string) : null;
  if (p.type === 'Literal' && typeof p.value === 'string') return p.value;
  if (p.type === 'TemplateLiteral' && p.expressions.length === 0) return (p.quasis[0].value.cooked as string | null) ?? null;
  return null;
}

/** The name an object or class member (or a destructuring's property) is defined with (`keep` of `{ async keep() {} }`), or null. */
export function memberName(member: Node): string | null {
  const key = member.key as Node;
  if (!member.computed) return key.type === 'Identifier' ? (key.name as string) : key.type === 'Literal' ? String(key.value) : null;
  return key.type === 'Literal' && typeof key.value === 'string' ? key.value : null;
}

/** The last name of an expression: `http` for `platform.http`, `http` for `http`; else null. */
export function lastName(node: Node | null | undefined): string | null {
  if (!node) return null;
  if (node.type === 'Identifier') return node.name as string;
  if (node.type === 'MemberExpression') return propertyName(node);
  if (node.type === 'ChainExpression') return lastName(node.expression as Node);
  return null;
}

/** Maps offsets to 1-based line numbers with the line terminators JavaScript counts. */
export class Lines {
  private starts: number[] | null = null;
  constructor(private readonly source: string) {}

  /** The column (from 0) of an offset. */
  columnOf(pos: number): number {
    return pos - (this.starts as number[])[this.lineOf(pos) - 1];
  }

  lineOf(pos: number): number {
    if (this.starts === null) {
      const starts = [0];
      const re = /\r\n?|\n|\u2028|\u2029/g;
      for (let m = re.exec(this.source); m !== null; m = re.exec(this.source)) starts.push(m.index + m[0].length);
      this.starts = starts;
    }
    const starts = this.starts;
    let lo = 0;
    let hi = starts.length - 1;
    while (lo < hi) {
      const mid = (lo + hi + 1) >> 1;
      if (starts[mid] <= pos) lo = mid;
      else hi = mid - 1;
    }
    return lo + 1;
  }
}

/** A short, one-line quote of a node's source for messages. */
export function quote(source: string, node: Node, max = 48): string {
  const text = source.slice(node.start, node.end).replace(/\s+/g, ' ');
  return text.length <= max ? text : `${text.slice(0, max - 3)}...`;
}
