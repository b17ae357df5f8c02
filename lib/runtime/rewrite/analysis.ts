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
import { FUNCTION_TYPES, propertyName, quote, type Node } from './ast';
import { droppedPromises, splitUpdate } from './concurrency';
import { TreeQueries, type Failure } from './queries';

/** The edits the rewrite makes, or why it cannot. */
export type Plan = { ok: true; wraps: Node[]; asyncFunctions: Node[] } | ({ ok: false } & Failure);

interface Site {
  /** The CallExpression / TaggedTemplateExpression that must be awaited. */
  call: Node;
  /** How messages name it: "host call `platform.http.request(...)`". */
  subject: string;
}

/** Whether a function may be made async: its direct call sites, or why not. */
type Conversion = { callSites: Node[] } | { place: string } | Failure;

export class Planner extends TreeQueries {
  private readonly failures: Failure[] = [];
  private readonly wraps = new Set<Node>();
  private readonly converted = new Set<Node>();
  /** Functions written async that wait on the host. */
  private readonly waitingAsync = new Set<Node>();
  private readonly work: Site[] = [];
  /** The direct call sites of each function made async. */
  private readonly callSitesOf = new Map<Node, Node[]>();
  /** The return statements of each function (built on first use). */
  private returnsOf: Map<Node, Node[]> | null = null;

  plan(hostCalls: Node[]): Plan {
    for (const call of hostCalls) {
      const callee = (call.type === 'CallExpression' ? call.callee : call.tag) as Node;
      this.work.push({ call, subject: `host call \`${quote(this.source, callee)}(...)\`` });
    }
    for (let site = this.work.pop(); site !== undefined; site = this.work.pop()) this.visit(site);
    this.asyncCallers();
    for (const fn of this.converted) {
      const made = this.returnedPromise(fn);
      if (made !== null && !this.resultsAwaited(fn, new Set())) {
        const name = this.namingVariables(fn)[0]?.name;
        this.fail(
          made.start,
          `${name ? `function \`${name}\`` : 'a function that'} waits on the host and returns a promise (\`${quote(this.source, made)}\`) at ${this.at(made)}, ` +
            'and a caller uses what it returns (async mode would give that caller the promise\'s value; write the function `async`)',
        );
      }
      // (whatever it returns, a caller chaining `then` on it had a promise, or a thenable)
      for (const call of this.callSitesOf.get(fn) ?? []) {
        const use = this.parent(this.wrapTarget(call) ?? call);
        const name = use?.type === 'MemberExpression' ? propertyName(use) : null;
        if (name === 'then' || name === 'catch' || name === 'finally') {
          this.fail(call.start, `\`${quote(this.source, call)}\` waits on the host, and its result is used as a promise (\`.${name}\`) at ${this.at(call)} (write the function it calls \`async\`)`);
        }
      }
    }
    for (const fn of [...this.waitingAsync, ...this.promiseCarriers()]) this.failures.push(...droppedPromises(this, fn, (call) => this.wraps.has(call)));
    // Functions written async that wait on the host may run at the same time (Promise.all over
    // async callbacks): an inserted await must not split a read-modify-write of shared state.
    if (this.waitingAsync.size > 0) {
      for (const target of this.wraps) {
        const split = splitUpdate(this, target);
        if (split !== null) this.failures.push(split);
      }
    }
    if (this.failures.length > 0) return { ok: false, ...this.failures.reduce((a, b) => (b.pos < a.pos ? b : a)) };
    const byStart = (a: Node, b: Node) => a.start - b.start;
    return { ok: true, wraps: [...this.wraps].sort(byStart), asyncFunctions: [...this.converted].sort(byStart) };
  }

  /** Functions written async that call one that waits on the host wait on it too (to a fixed point). */
  private asyncCallers(): void {
    for (const fn of this.waitingAsync) {
      for (const v of this.namingVariables(fn)) {
        for (const ref of v.references) {
          const id = ref.identifier as unknown as Node;
          const call = this.parent(id);
          if (call?.type !== 'CallExpression' || call.callee !== id) continue;
          const where = this.owner(call);
          if ('fn' in where && where.fn.async) this.waitingAsync.add(where.fn); // (a Set: visited in turn)
        }
      }
    }
  }

  /**
   * The function that returns the value of `node` as it is (`return f()`, `() => f()`, also through
   * `return n ? f(n - 1) : x`, `return a && f()`, `return (log(), f())`), or null.
   */
  private returnedBy(node: Node): Node | null {
    let value = node;
    let up = this.parent(value);
    while (
      up !== undefined &&
      ((up.type === 'ConditionalExpression' && up.test !== value) ||
        (up.type === 'LogicalExpression' && up.right === value) ||
        (up.type === 'SequenceExpression' && (up.expressions as Node[]).at(-1) === value))
    ) {
      value = up;
      up = this.parent(up);
    }
    if (up === undefined) return null;
    if (FUNCTION_TYPES.has(up.type)) return up.body === value ? up : null;
    if (up.type !== 'ReturnStatement') return null;
    const where = this.owner(up);
    return 'fn' in where ? where.fn : null;
  }

  /**
   * Functions not written async that return the promise of one that waits on the host
   * (`function go(t) { return keep(t) }`), or of another such function: dropping what they
   * return drops that promise.
   */
  private promiseCarriers(): Set<Node> {
    const carriers = new Set<Node>();
    const from = [...this.waitingAsync];
    for (let fn = from.pop(); fn !== undefined; fn = from.pop()) {
      for (const v of this.namingVariables(fn)) {
        for (const ref of v.references) {
          const id = ref.identifier as unknown as Node;
          const call = this.parent(id) as Node;
          if (call.type !== 'CallExpression' || call.callee !== id) continue;
          const g = this.returnedBy(call);
          if (g === null || g.async || g.generator || this.converted.has(g) || carriers.has(g)) continue;
          const up = this.parent(g);
          if ((up?.type === 'CallExpression' || up?.type === 'NewExpression') && (up.arguments as Node[]).includes(g)) continue; // (a callback: its value is checked where it is called)
          carriers.add(g);
          from.push(g);
        }
      }
    }
    return carriers;
  }

  private fail(pos: number, message: string): void {
    this.failures.push({ pos, message });
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
    if (fn.async) {
      this.waitingAsync.add(fn); // its callers already expect a promise
      return;
    }
    if (fn.generator) {
      this.fail(site.call.start, `${site.subject} inside a generator at ${this.at(site.call)}`);
      return;
    }
    if (this.converted.has(fn)) return;
    this.converted.add(fn);
    const conv = this.conversion(fn);
    if ('place' in conv) this.fail(site.call.start, `${site.subject} inside ${conv.place} at ${this.at(site.call)}`);
    else if ('message' in conv) this.failures.push(conv);
    else {
      const name = fn.id?.name ?? (this.parent(fn)?.type === 'VariableDeclarator' ? this.parent(fn)?.id.name : null);
      const subject = name ? `call of \`${name}\` (which waits on the host)` : 'call of a function that waits on the host';
      this.callSitesOf.set(fn, conv.callSites);
      for (const call of conv.callSites) this.work.push({ call, subject });
    }
  }

  /**
   * An expression `fn` returns that may be a promise (`new Promise(...)`, `Promise.resolve(x)`,
   * `p.then(...)`, a call of a function written `async`, or a variable set to one), or null. Made
   * async, `fn` would hand the promise's value to callers that received the promise.
   */
  private returnedPromise(fn: Node): Node | null {
    if (this.returnsOf === null) {
      this.returnsOf = new Map();
      for (const ret of this.index.returns) {
        const where = this.owner(ret);
        if (!('fn' in where) || ret.argument === null) continue;
        const list = this.returnsOf.get(where.fn) ?? [];
        list.push(ret.argument);
        this.returnsOf.set(where.fn, list);
      }
    }
    const values = fn.expression ? [fn.body as Node] : (this.returnsOf.get(fn) ?? []);
    return values.find((v) => this.mayBePromise(v, 0)) ?? null;
  }

  private mayBePromise(e: Node, depth: number): boolean {
    switch (e.type) {
      case 'NewExpression':
        return e.callee.type === 'Identifier' && e.callee.name === 'Promise';
      case 'CallExpression': {
        const callee = e.callee as Node;
        if (callee.type === 'MemberExpression') {
          const name = propertyName(callee);
          if (name === 'then' || name === 'catch' || name === 'finally') return true;
          return (callee.object as Node).type === 'Identifier' && callee.object.name === 'Promise' && name !== 'withResolvers';
        }
        if (FUNCTION_TYPES.has(callee.type)) return callee.async === true;
        const variable = callee.type === 'Identifier' ? this.reference(callee)?.resolved : null;
        return (variable?.defs ?? []).some((d) => {
          const node = d.node as unknown as Node;
          if (d.type === 'FunctionName') return node.async === true;
          return d.type === 'Variable' && node.init != null && FUNCTION_TYPES.has(node.init.type) && node.init.async === true;
        });
      }
      case 'ConditionalExpression':
        return this.mayBePromise(e.consequent, depth) || this.mayBePromise(e.alternate, depth);
      case 'LogicalExpression':
        return this.mayBePromise(e.left, depth) || this.mayBePromise(e.right, depth);
      case 'SequenceExpression':
        return this.mayBePromise((e.expressions as Node[]).at(-1) as Node, depth);
      case 'Identifier': {
        const variable = depth < 3 ? this.reference(e)?.resolved : null;
        if (!variable) return false;
        return variable.references.some((ref) => {
          const value = ref.writeExpr as unknown as Node | null | undefined;
          return value != null && this.mayBePromise(value, depth + 1);
        });
      }
      default:
        return false;
    }
  }

  /**
   * Whether every direct call of `fn` (made async) only awaits what it returns: the call is
   * awaited, or returned by a function that is `async` or is made async and itself only awaited.
   * An export the runtime calls awaits it too.
   */
  private resultsAwaited(fn: Node, seen: Set<Node>): boolean {
    if (seen.has(fn)) return true;
    seen.add(fn);
    for (const call of this.callSitesOf.get(fn) ?? []) {
      const target = this.wrapTarget(call) ?? call;
      if (this.parent(target)?.type === 'AwaitExpression') continue;
      const g = this.returnedBy(target);
      if (g !== null && (g.async || (this.converted.has(g) && this.resultsAwaited(g, seen)))) continue;
      return false;
    }
    return true;
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

  /** Whether `fn` may become async: how it is bound and how it is used. */
  private conversion(fn: Node): Conversion {
    const up = this.parent(fn) as Node;
    const property = up.type === 'Property' && up.value === fn;
    if ((property || up.type === 'MethodDefinition') && (up.kind === 'get' || up.kind === 'set')) return { place: up.kind === 'get' ? 'a getter' : 'a setter' };
    if (up.type === 'MethodDefinition') return { place: up.kind === 'constructor' ? 'a class constructor' : 'a class method' };
    if (property) return { place: up.method ? 'an object method' : 'a function stored in an object' };
    if (up.type === 'PropertyDefinition') return { place: 'a function stored in a class field' };
    if ((up.type === 'CallExpression' || up.type === 'NewExpression') && (up.arguments as Node[]).includes(fn)) {
      return { place: 'a callback passed to another function' };
    }
    const callSites: Node[] = [];
    if (up.type === 'CallExpression' && up.callee === fn) callSites.push(up); // called where it is written
    const variables = this.namingVariables(fn);
    const named = fn.type === 'FunctionDeclaration' ? fn.id !== null : up.type === 'VariableDeclarator' && up.init === fn && up.id.type === 'Identifier';
    if (!named && up.type !== 'ExportDefaultDeclaration' && callSites.length === 0) {
      return { place: 'a function used as a value (returned, stored or combined into an expression)' };
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
}
