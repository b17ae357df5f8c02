/**
 * Decides where `await` goes: every host call, and every direct call of a local function that
 * (transitively) waits on the host, is awaited; every function holding such a call becomes
 * `async`. Anything that would change meaning when a function becomes async (it is a callback,
 * a method, a getter, a generator, used as a value...) is a fallback, reported with its line.
 *
 * Invariant: a function is made async only when every use of it is a direct call that is itself
 * awaited (or an export, which the runtime awaits), so no caller ever sees a promise it did not
 * expect.
 */
import type { ScopeManager, Variable } from 'eslint-scope';
import { FUNCTION_TYPES, Lines, quote, type AstIndex, type Node } from './ast';

/** The edits the rewrite makes, or why it cannot. */
export type Plan =
  | { ok: true; wraps: Node[]; asyncFunctions: Node[] }
  | { ok: false; pos: number; message: string };

interface Site {
  /** The CallExpression / TaggedTemplateExpression that must be awaited. */
  call: Node;
  /** How messages name it: "host call `platform.http.request(...)`". */
  subject: string;
}

type Where = { fn: Node } | { place: string };

/** Where a function may be made async: its direct call sites, or why it may not. */
type Conversion = { callSites: Node[] } | { place: string } | { pos: number; message: string };

export class Planner {
  private readonly failures: { pos: number; message: string }[] = [];
  private readonly wraps = new Set<Node>();
  private readonly converted = new Set<Node>();
  private readonly work: Site[] = [];

  constructor(
    private readonly source: string,
    private readonly index: AstIndex,
    private readonly scopes: ScopeManager,
    private readonly lines: Lines,
  ) {}

  plan(hostCalls: Node[]): Plan {
    for (const call of hostCalls) {
      const callee = (call.type === 'CallExpression' ? call.callee : call.tag) as Node;
      this.work.push({ call, subject: `host call \`${quote(this.source, callee)}(...)\`` });
    }
    for (let site = this.work.pop(); site !== undefined; site = this.work.pop()) this.visit(site);
    if (this.failures.length > 0) {
      const first = this.failures.reduce((a, b) => (b.pos < a.pos ? b : a));
      return { ok: false, ...first };
    }
    const byStart = (a: Node, b: Node) => a.start - b.start;
    return { ok: true, wraps: [...this.wraps].sort(byStart), asyncFunctions: [...this.converted].sort(byStart) };
  }

  private parent(node: Node): Node | undefined {
    return this.index.parent.get(node);
  }

  private fail(pos: number, message: string): void {
    this.failures.push({ pos, message });
  }

  private at(node: Node): string {
    return `line ${this.lines.lineOf(node.start)}`;
  }

  private visit(site: Site): void {
    const target = this.wrapTarget(site.call);
    if (target === null) {
      this.fail(site.call.start, `${site.subject} inside an optional chain (\`?.\`) before it at ${this.at(site.call)}`);
      return;
    }
    const where = this.owner(target);
    if ('place' in where) {
      this.fail(site.call.start, `${site.subject} inside ${where.place} at ${this.at(site.call)}`);
      return;
    }
    const up = this.parent(target);
    if (!(up?.type === 'AwaitExpression' && up.argument === target)) this.wraps.add(target);
    const fn = where.fn;
    if (fn.async) return; // an async function's callers already expect a promise
    if (fn.generator) {
      this.fail(site.call.start, `${site.subject} inside a generator at ${this.at(site.call)}`);
      return;
    }
    if (this.converted.has(fn)) return;
    this.converted.add(fn);
    const conv = this.conversion(fn);
    if ('place' in conv) this.fail(site.call.start, `${site.subject} inside ${conv.place} at ${this.at(site.call)}`);
    else if ('message' in conv) this.fail(conv.pos, conv.message);
    else {
      const name = fn.id?.name ?? (this.parent(fn)?.type === 'VariableDeclarator' ? this.parent(fn)?.id.name : null);
      const subject = name ? `call of \`${name}\` (which waits on the host)` : 'call of a function that waits on the host';
      for (const call of conv.callSites) this.work.push({ call, subject });
    }
  }

  /**
   * The expression to wrap in `(await ...)`: the call itself, or the whole optional chain when the
   * call ends it. Null when an optional link before the call could short-circuit past the await
   * into a link after it that is not optional.
   */
  private wrapTarget(call: Node): Node | null {
    let top = call;
    let up = this.parent(top);
    while (
      up !== undefined &&
      ((up.type === 'MemberExpression' && up.object === top) ||
        (up.type === 'CallExpression' && up.callee === top) ||
        (up.type === 'TaggedTemplateExpression' && up.tag === top))
    ) {
      top = up;
      up = this.parent(top);
    }
    if (up?.type !== 'ChainExpression') return call;
    if (top === call) return up;
    // The call's result is read further along the chain. An optional link right after it makes
    // `(await a?.b.call())?.c` short-circuit exactly as `a?.b.call()?.c` did.
    const next = this.parent(call) as Node;
    if (next.optional) return call;
    for (let n: Node | undefined = call; n !== undefined; ) {
      if (n.optional) return null;
      if (n.type === 'CallExpression') n = n.callee as Node;
      else if (n.type === 'MemberExpression') n = n.object as Node;
      else if (n.type === 'TaggedTemplateExpression') n = n.tag as Node;
      else break;
    }
    return call;
  }

  /** The function whose body evaluates `node`, or the place where no `await` may go. */
  private owner(node: Node): Where {
    let child = node;
    for (let up = this.parent(node); up !== undefined; child = up, up = this.parent(up)) {
      if (FUNCTION_TYPES.has(up.type)) return (up.params as Node[]).includes(child) ? { place: 'a default parameter value' } : { fn: up };
      if (up.type === 'PropertyDefinition' && up.value === child) return { place: 'a class field initializer' };
      if (up.type === 'StaticBlock') return { place: 'a class static block' };
    }
    return { place: 'top-level module code (outside any function)' };
  }

  /** Whether `fn` may become async: how it is bound and how it is used. */
  private conversion(fn: Node): Conversion {
    const up = this.parent(fn) as Node;
    if (up.type === 'MethodDefinition') {
      if (up.kind === 'constructor') return { place: 'a class constructor' };
      if (up.kind === 'get') return { place: 'a getter' };
      if (up.kind === 'set') return { place: 'a setter' };
      return { place: 'a class method' };
    }
    if (up.type === 'Property' && up.value === fn) {
      if (up.kind === 'get') return { place: 'a getter' };
      if (up.kind === 'set') return { place: 'a setter' };
      return { place: up.method ? 'an object method' : 'a function stored in an object' };
    }
    if (up.type === 'PropertyDefinition') return { place: 'a function stored in a class field' };
    if ((up.type === 'CallExpression' || up.type === 'NewExpression') && (up.arguments as Node[]).includes(fn)) {
      return { place: 'a callback passed to another function' };
    }
    const callSites: Node[] = [];
    if (up.type === 'CallExpression' && up.callee === fn) callSites.push(up); // called where it is written
    const variables: Variable[] = [];
    if (fn.type === 'FunctionDeclaration') {
      if (fn.id) variables.push(...this.nameVariables(fn, fn));
      else if (up.type !== 'ExportDefaultDeclaration') return { place: 'a function used as a value' };
    } else {
      if (fn.type === 'FunctionExpression' && fn.id) variables.push(...this.nameVariables(fn, fn));
      if (up.type === 'VariableDeclarator' && up.init === fn && up.id.type === 'Identifier') {
        variables.push(...this.scopes.getDeclaredVariables(up as never));
      } else if (up.type !== 'ExportDefaultDeclaration' && callSites.length === 0) {
        return { place: 'a function used as a value (returned, stored or combined into an expression)' };
      }
    }
    for (const v of variables) {
      if (v.defs.length !== 1) return { pos: fn.start, message: `function \`${v.name}\` waits on the host but is declared more than once (${this.at(fn)})` };
      for (const ref of v.references) {
        const id = ref.identifier as unknown as Node;
        if (ref.init) continue;
        if (ref.isWrite()) return { pos: id.start, message: `function \`${v.name}\` waits on the host but is reassigned at ${this.at(id)}` };
        const use = this.parent(id) as Node;
        if (use.type === 'CallExpression' && use.callee === id) callSites.push(use);
        else if (use.type === 'ExportSpecifier' || use.type === 'ExportDefaultDeclaration') continue;
        else if (use.type === 'UnaryExpression' && use.operator === 'typeof') continue;
        else {
          return {
            pos: id.start,
            message: `function \`${v.name}\` waits on the host but is used as a value at ${this.at(id)} (only direct calls \`${v.name}(...)\` can be awaited)`,
          };
        }
      }
    }
    return { callSites };
  }

  /** The variables a function's own name declares (`function f` / `function f` expression). */
  private nameVariables(fn: Node, declarer: Node): Variable[] {
    return this.scopes
      .getDeclaredVariables(declarer as never)
      .filter((v) => v.defs.some((d) => d.type === 'FunctionName' && (d.node as unknown) === fn));
  }
}
