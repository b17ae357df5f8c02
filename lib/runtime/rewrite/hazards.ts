/**
 * Uses of host methods that no rewrite can await (the method taken as a value, destructured,
 * called by a computed name, reached through code built at run time, or living in another
 * module). Each one makes the script fall back to blocking mode.
 */
import type { ScopeManager } from 'eslint-scope';
import { lastName, Lines, memberName, propertyName, quote, type AstIndex, type Node } from './ast';
import type { Failure } from './queries';
import { escapedHostObject, hostObjectNames } from './host-objects';

/**
 * Whether a member access of a host method name is a host method taken as a value. `request` is
 * also the name of `ctx.request` (the request object), so it counts only on a host object
 * (`owners`: see host-objects.ts).
 */
function isHostMethodValue(member: Node, name: string, parent: Node, owners: ReadonlySet<string>): boolean {
  if ((parent.type === 'CallExpression' && parent.callee === member) || (parent.type === 'TaggedTemplateExpression' && parent.tag === member)) return false;
  if (parent.type === 'AssignmentExpression' && parent.left === member) return false; // defines a method of that name
  if (parent.type === 'UnaryExpression' && (parent.operator === 'typeof' || parent.operator === 'delete')) return false;
  return name !== 'request' || owners.has(lastName(member.object as Node) as string);
}

/**
 * Whether `x.constructor` (`member`, whose parent is `parent`) is taken as a value that could be
 * `Function` (newed, stored, passed, called through `call` / `apply` / `bind`); a direct call
 * `x.constructor(...)` is reported with the calls. Comparing it, reading its `name`, `typeof` and
 * assigning it are fine.
 */
function isConstructorValue(member: Node, parent: Node, parentOf: Map<Node, Node>): boolean {
  if ((parent.type === 'CallExpression' && parent.callee === member) || (parent.type === 'TaggedTemplateExpression' && parent.tag === member)) return false;
  if (parent.type === 'AssignmentExpression' && parent.left === member) return false;
  if (parent.type === 'BinaryExpression' || (parent.type === 'UnaryExpression' && parent.operator === 'typeof')) return false;
  if (parent.type === 'MemberExpression' && parent.object === member) {
    const name = propertyName(parent);
    if (name === null || name === 'call' || name === 'apply' || name === 'bind') return true;
    const up = parentOf.get(parent);
    return up?.type === 'CallExpression' && up.callee === parent; // (`x.constructor.foo()` calls a static of it)
  }
  return true;
}

/** Whether an object pattern reads its properties from a host object. */
function destructuresHttp(pattern: Node, parentOf: Map<Node, Node>, owners: ReadonlySet<string>): boolean {
  const up = parentOf.get(pattern);
  if (up === undefined) return false;
  if (up.type === 'VariableDeclarator' && up.id === pattern) return owners.has(lastName(up.init as Node) as string);
  if (up.type === 'AssignmentExpression' && up.left === pattern) return owners.has(lastName(up.right as Node) as string);
  if (up.type === 'AssignmentPattern' && up.left === pattern) return destructuresHttp(up, parentOf, owners);
  if (up.type === 'Property' && up.value === pattern) {
    const key = up.key as Node;
    return !up.computed && key.type === 'Identifier' && key.name === 'http';
  }
  return false;
}

/** The first hazard in source order, as a fallback reason; null when there is none. */
export function findHazard(source: string, index: AstIndex, scopes: ScopeManager, hostMethods: ReadonlySet<string>, lines: Lines): Failure | null {
  const found: Failure[] = [];
  const at = (n: Node) => `line ${lines.lineOf(n.start)}`;
  const names = hostObjectNames(index);
  const escaped = escapedHostObject(source, index, scopes, names, at);
  if (escaped !== null) found.push(escaped);
  for (const node of index.imports) {
    found.push({ pos: node.start, message: `\`import\` at ${at(node)}: functions of another module may wait on the host` });
  }
  for (const ref of scopes.globalScope?.through ?? []) {
    const id = ref.identifier as unknown as Node;
    if (id.name === 'eval' || id.name === 'Function') {
      found.push({ pos: id.start, message: `\`${id.name}\` at ${at(id)}: code built at run time cannot be rewritten` });
    }
  }
  for (const member of index.members) {
    const name = propertyName(member) as string;
    if (name === 'eval' || name === 'Function' || (name === 'constructor' && isConstructorValue(member, index.parent.get(member) as Node, index.parent))) {
      found.push({ pos: member.start, message: `\`${quote(source, member)}\` at ${at(member)}: code built at run time cannot be rewritten` });
    } else if (hostMethods.has(name) && isHostMethodValue(member, name, index.parent.get(member) as Node, names.owners)) {
      found.push({
        pos: member.start,
        message: `host method \`${quote(source, member)}\` used as a value at ${at(member)} (only direct calls can be awaited)`,
      });
    }
  }
  for (const call of index.calls) {
    const callee = (call.type === 'CallExpression' ? call.callee : call.tag) as Node;
    if (callee.type !== 'MemberExpression' || callee.property.type === 'PrivateIdentifier') continue;
    if (propertyName(callee) === 'constructor') {
      // `(function () {}).constructor('code')` is `Function('code')`
      found.push({ pos: call.start, message: `\`${quote(source, callee)}(...)\` at ${at(call)}: code built at run time cannot be rewritten` });
      continue;
    }
    if (propertyName(callee) !== null) continue;
    if (names.owners.has(lastName(callee.object as Node) as string)) {
      found.push({ pos: call.start, message: `\`${quote(source, callee)}(...)\` at ${at(call)} calls a host helper by a computed name (call it by its name)` });
    }
  }
  for (const pattern of index.objectPatterns) {
    for (const prop of pattern.properties as Node[]) {
      if (prop.type !== 'Property') continue;
      const name = memberName(prop);
      if (name === null || !hostMethods.has(name)) continue;
      if (name === 'request' && !destructuresHttp(pattern, index.parent, names.owners)) continue;
      found.push({ pos: prop.start, message: `host method \`${name}\` destructured at ${at(prop)} (only direct calls can be awaited)` });
    }
  }
  if (found.length === 0) return null;
  return found.reduce((a, b) => (b.pos < a.pos ? b : a));
}
