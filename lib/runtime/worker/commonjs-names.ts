/**
 * Engines without ES modules (vm2) run a script as CommonJS inside a wrapper that declares
 * `module` and `exports` itself, and the converted script assigns its exports to `exports`: a
 * script declaring either name at its top level, or as a `var` in a block there (valid in an ES
 * module), cannot run there.
 */
import { Lines, parseModule, type Node } from '../rewrite/ast';

const TAKEN: ReadonlySet<string> = new Set(['module', 'exports']);

/** The names a binding pattern declares. */
function boundNames(pattern: Node | null | undefined, out: Node[]): void {
  if (!pattern) return;
  if (pattern.type === 'Identifier') out.push(pattern);
  else if (pattern.type === 'ObjectPattern') for (const p of pattern.properties as Node[]) boundNames(p.type === 'RestElement' ? p.argument : p.value, out);
  else if (pattern.type === 'ArrayPattern') for (const e of pattern.elements as Array<Node | null>) boundNames(e, out);
  else if (pattern.type === 'AssignmentPattern') boundNames(pattern.left, out);
  else if (pattern.type === 'RestElement') boundNames(pattern.argument, out);
}

/** The statements nested in `s` whose `var`s are the module's too (blocks, loops, ifs, trys, labels, switches: not functions). */
function nestedStatements(s: Node): Array<Node | null | undefined> {
  switch (s.type) {
    case 'BlockStatement':
      return s.body as Node[];
    case 'IfStatement':
      return [s.consequent, s.alternate];
    case 'ForStatement':
      return [s.init, s.body];
    case 'ForInStatement':
    case 'ForOfStatement':
      return [s.left, s.body];
    case 'WhileStatement':
    case 'DoWhileStatement':
    case 'LabeledStatement':
      return [s.body];
    case 'TryStatement':
      return [s.block, s.handler?.body, s.finalizer];
    case 'SwitchStatement':
      return (s.cases as Node[]).flatMap((c) => c.consequent as Node[]);
    default:
      return [];
  }
}

/** Why a parsed-valid ES module cannot run as CommonJS (a top-level `module` or `exports`, a `var` of either in a block), or null. */
export function commonJsNameClash(esm: string): string | null {
  if (!/\b(?:module|exports)\b/.test(esm)) return null;
  const ids: Node[] = [];
  const nested: Array<Node | null | undefined> = [];
  for (const statement of parseModule(esm).body as Node[]) {
    const decl = statement.type === 'ExportNamedDeclaration' || statement.type === 'ExportDefaultDeclaration' ? statement.declaration : statement;
    if (!decl) continue;
    if (decl.type === 'VariableDeclaration') for (const d of decl.declarations as Node[]) boundNames(d.id, ids);
    else if (decl.type === 'FunctionDeclaration' || decl.type === 'ClassDeclaration') boundNames(decl.id, ids);
    else if (decl.type === 'ImportDeclaration') for (const s of decl.specifiers as Node[]) boundNames(s.local, ids);
    else nested.push(...nestedStatements(decl));
  }
  // (a `var` in a block or loop at the top level is declared in the module's scope; one walk, no recursion)
  while (nested.length > 0) {
    const s = nested.pop();
    if (!s) continue;
    if (s.type === 'VariableDeclaration' && s.kind === 'var') for (const d of s.declarations as Node[]) boundNames(d.id, ids);
    else nested.push(...nestedStatements(s));
  }
  const clash = ids.filter((id) => TAKEN.has(id.name as string)).sort((a, b) => a.start - b.start)[0];
  if (clash === undefined) return null;
  return `'${clash.name}' is declared at the top level (line ${new Lines(esm).lineOf(clash.start)}): the vm2 engine runs scripts as CommonJS, where that name is taken (rename it)`;
}
