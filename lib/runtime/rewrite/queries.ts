/**
 * Questions about the parsed script that the planner and its checks share: a node's parent and
 * line, the function whose body evaluates a node, and the variables that name a function.
 */
import type { Reference, ScopeManager, Variable } from 'eslint-scope';
import { FUNCTION_TYPES, type AstIndex, type Lines, type Node } from './ast';

/** A fallback: where it is (to report the first one) and what to tell the author. */
export interface Failure {
  pos: number;
  message: string;
}

/** The function whose body evaluates a node, or the place (in words) where no `await` may go. */
export type Where = { fn: Node } | { place: string };

export class TreeQueries {
  private referenceMap: Map<Node, Reference> | null = null;

  constructor(
    readonly source: string,
    protected readonly index: AstIndex,
    protected readonly scopes: ScopeManager,
    private readonly lines: Lines,
  ) {}

  parent(node: Node): Node | undefined {
    return this.index.parent.get(node);
  }

  /** "line N" of a node's start. */
  at(node: Node): string {
    return `line ${this.lines.lineOf(node.start)}`;
  }

  owner(node: Node): Where {
    let child = node;
    for (let up = this.parent(node); up !== undefined; child = up, up = this.parent(up)) {
      if (FUNCTION_TYPES.has(up.type)) return (up.params as Node[]).includes(child) ? { place: 'a default parameter value' } : { fn: up };
      if (up.type === 'PropertyDefinition' && up.value === child) return { place: 'a class field initializer' };
      if (up.type === 'StaticBlock') return { place: 'a class static block' };
    }
    return { place: 'top-level module code (outside any function)' };
  }

  /**
   * The variables through which a function is called by name: its declaration's name, a function
   * expression's own name, the `const` / `let` / `var` it initializes, and for a function written
   * `async` the variable it is assigned to.
   */
  namingVariables(fn: Node): Variable[] {
    const variables: Variable[] = [];
    if ((fn.type === 'FunctionDeclaration' || fn.type === 'FunctionExpression') && fn.id) {
      const own = this.scopes.getDeclaredVariables(fn as never);
      variables.push(...own.filter((v) => v.defs.some((d) => d.type === 'FunctionName' && (d.node as unknown) === fn)));
    }
    const up = this.parent(fn);
    if (up?.type === 'VariableDeclarator' && up.init === fn && up.id.type === 'Identifier') {
      variables.push(...this.scopes.getDeclaredVariables(up as never));
    }
    // (`later = async () => ...`: a function written async may be assigned and called by that name)
    if (fn.async && up?.type === 'AssignmentExpression' && up.right === fn && up.operator === '=' && up.left.type === 'Identifier') {
      const variable = this.reference(up.left)?.resolved;
      if (variable) variables.push(variable);
    }
    return variables;
  }

  /** CallExpression and TaggedTemplateExpression nodes of the whole script. */
  get calls(): readonly Node[] {
    return this.index.calls;
  }

  /** Whether the variables a declarator (`const p = ...`) declares are never read. */
  neverRead(declarator: Node): boolean {
    const variables = this.scopes.getDeclaredVariables(declarator as never);
    return variables.length > 0 && variables.every((v) => v.references.every((ref) => !ref.isRead()));
  }

  /** Whether the variable an assignment's target (`p` of `p = ...`) names is never read. */
  neverReadName(id: Node): boolean {
    const variable = this.reference(id)?.resolved;
    return variable != null && variable.references.every((ref) => !ref.isRead());
  }

  /** The reference an identifier node makes, if it makes one (index built on first use). */
  reference(id: Node): Reference | undefined {
    if (this.referenceMap === null) {
      this.referenceMap = new Map();
      for (const scope of this.scopes.scopes) for (const ref of scope.references) this.referenceMap.set(ref.identifier as unknown as Node, ref);
    }
    return this.referenceMap.get(id);
  }
}
