/**
 * The parser and the scope analysis the rewrite uses, in time linear in the names a scope
 * declares. acorn and eslint-scope keep those names in arrays and look each new one up among all
 * the names before it, so a script whose one scope declares very many names (top-level functions,
 * a function's parameters, one destructuring) cost time quadratic in them: 80,000 top-level
 * functions took 16 s, a function of 60,000 parameters 9 s, all of it on the worker's thread that
 * the calls of other apps share, before any call's time limit counts. Here the same lists keep a
 * Set beside them; what the parser and the analysis decide is unchanged.
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

/** acorn's parser with each scope's name lists as NameLists (its scopes are not in its typings). */
export const ModuleParser = Parser.extend(
  (Base) =>
    class extends Base {
      enterScope(flags: number): void {
        (Base.prototype as unknown as { enterScope(flags: number): void }).enterScope.call(this, flags);
        const stack = (this as unknown as { scopeStack: Array<{ var: string[]; lexical: string[]; functions: string[] }> }).scopeStack;
        const scope = stack[stack.length - 1];
        scope.var = new NameList();
        scope.lexical = new NameList();
        scope.functions = new NameList();
      }
    },
);

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
