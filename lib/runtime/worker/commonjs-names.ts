/**
 * Engines without ES modules (vm2) run a script as CommonJS inside a wrapper that declares
 * `module` and `exports` itself, and the converted script assigns its exports to `exports`: a
 * script declaring either name at its top level (valid in an ES module) cannot run there.
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

/** Why a parsed-valid ES module cannot run as CommonJS (a top-level `module` or `exports`), or null. */
export function commonJsNameClash(esm: string): string | null {
  if (!/\b(?:module|exports)\b/.test(esm)) return null;
  const ids: Node[] = [];
  for (const statement of parseModule(esm).body as Node[]) {
    const decl = statement.type === 'ExportNamedDeclaration' || statement.type === 'ExportDefaultDeclaration' ? statement.declaration : statement;
    if (!decl) continue;
    if (decl.type === 'VariableDeclaration') for (const d of decl.declarations as Node[]) boundNames(d.id, ids);
    else if (decl.type === 'FunctionDeclaration' || decl.type === 'ClassDeclaration') boundNames(decl.id, ids);
    else if (decl.type === 'ImportDeclaration') for (const s of decl.specifiers as Node[]) boundNames(s.local, ids);
  }
  const clash = ids.find((id) => TAKEN.has(id.name as string));
  if (clash === undefined) return null;
  return `'${clash.name}' is declared at the top level (line ${new Lines(esm).lineOf(clash.start)}): the vm2 engine runs scripts as CommonJS, where that name is taken (rename it)`;
}
