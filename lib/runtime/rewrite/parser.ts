/**
 * The parser and the scope analysis the rewrite uses, made safe for any source a tenant writes.
 *
 * Linear in the names a scope declares: acorn and eslint-scope keep those names in arrays and look
 * each new one up among all the names before it, so a script whose one scope declares very many
 * names (top-level functions, a function's parameters, one destructuring) cost time quadratic in
 * them: 80,000 top-level functions took 16 s, a function of 60,000 parameters 9 s, all of it on
 * the worker's thread that the calls of other apps share, before any call's time limit counts.
 * Here the same lists keep a Set beside them; what the parser and the analysis decide is unchanged.
 *
 * Bounded in depth: acorn recurses per level of nesting and catches the stack overflow where it
 * happens, testing the error's message with a regular expression; on Node.js 20, V8 compiling a
 * regular expression with the stack that nearly exhausted ends the process ("RegExpCompiler
 * Allocation failed - process out of memory"): 500 nested `(function(){` took the host down. The
 * parser here stops at MAX_NESTING levels first (NestingError): the script runs unchanged.
 */
import { Parser } from 'acorn';
import { Scope, analyze } from 'eslint-scope';

/**
 * Names declared in one scope, as acorn's parser keeps them: it only pushes to the list and asks
 * `indexOf(name) > -1` or `=== -1` of it (and reads `lexical[0]`).
 */
class NameList extends Array<string> {
  private readonly names = new Set<string>();
  override push(...names: string[]): number {
    for (const n of names) this.names.add(n);
    return super.push(...names);
  }
  /** 0 for a name in the list (acorn only compares the answer with -1), else -1. */
  override indexOf(name: string): number {
    return this.names.has(name) ? 0 : -1;
  }
}

/**
 * Most levels of the parser's recursion counted below (a statement, an assignment, a unary or
 * binary operand, an atom, a binding pattern: a level of nesting in a script counts one to
 * seven, a term of an `a + b + ...` chain one): far past what a person writes, and short of a
 * thread's stack. Each level takes at most about 930 bytes of it (calls nested in calls'
 * arguments, the costliest measured): 1,000 fit in the 984 KiB of Node.js's main thread, where
 * the tests run the rewrite; the workers that run it for the router have 4 or 16 MiB.
 */
export const MAX_NESTING = 1000;

/** The script nests deeper than MAX_NESTING: the rewrite leaves it unchanged. */
export class NestingError extends Error {
  constructor() {
    super(`the script nests more than ${MAX_NESTING} levels deep`);
    this.name = 'NestingError';
  }
}

/** The parser's methods that recurse with the nesting of a script (each level of it passes through some). */
const RECURSING = ['parseStatement', 'parseMaybeAssign', 'parseMaybeUnary', 'parseExprOp', 'parseExprAtom', 'parseBindingAtom'] as const;

type Recursing = { [K in (typeof RECURSING)[number]]: (...args: unknown[]) => unknown };

/** acorn's parser with each scope's name lists as NameLists and its recursion bounded (its internals are not in its typings). */
export const ModuleParser = Parser.extend((Base) => {
  const base = Base.prototype as unknown as Recursing & { enterScope(flags: number): void };
  class Bounded extends Base {
    depth = 0;
    enterScope(flags: number): void {
      base.enterScope.call(this, flags);
      const stack = (this as unknown as { scopeStack: Array<{ var: string[]; lexical: string[]; functions: string[] }> }).scopeStack;
      const scope = stack[stack.length - 1];
      scope.var = new NameList();
      scope.lexical = new NameList();
      scope.functions = new NameList();
    }
  }
  for (const name of RECURSING) {
    const method = base[name];
    (Bounded.prototype as unknown as Recursing)[name] = function (this: Bounded, ...args: unknown[]) {
      if (++this.depth > MAX_NESTING) throw new NestingError();
      try {
        return method.apply(this, args);
      } finally {
        this.depth--;
      }
    };
  }
  return Bounded;
});

/**
 * eslint-scope's Scope records the variables each node declares (getDeclaredVariables) in an
 * array it searches before each push. The same, with a Set per array beside it. Patched on the
 * class this module loaded (the worker's own copy; the host's tests load it too), and only while
 * the method is there: a version that renames it keeps its own, correct, quadratic one.
 */
type DeclaredOf = (this: { __declaredVariables: WeakMap<object, unknown[]> }, variable: unknown, node: object | null | undefined) => void;
const scopeProto = Scope.prototype as unknown as { __addDeclaredVariablesOfNode?: DeclaredOf };
const seen = new WeakMap<unknown[], Set<unknown>>();
if (typeof scopeProto.__addDeclaredVariablesOfNode === 'function') {
  scopeProto.__addDeclaredVariablesOfNode = function (variable, node) {
    if (node === null || node === undefined) return;
    let variables = this.__declaredVariables.get(node);
    if (variables === undefined) {
      variables = [];
      this.__declaredVariables.set(node, variables);
    }
    let set = seen.get(variables);
    if (set === undefined) seen.set(variables, (set = new Set(variables)));
    if (!set.has(variable)) {
      set.add(variable);
      variables.push(variable);
    }
  };
}

export { analyze };
