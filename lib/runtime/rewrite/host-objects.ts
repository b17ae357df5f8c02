/**
 * The host objects whose helpers are host calls: `platform.http` and `platform.system`, and the
 * variables a script keeps them in (`const h = platform.http`, `const { http: net } = platform`).
 * Their helpers are recognised on any of those names; an object passed on or stored anywhere
 * else, or read by a computed name (`platform[k]`), could have its helpers called out of sight,
 * so that is a fallback. So is `platform` itself, and `globalThis`, which holds it.
 */
import type { ScopeManager } from 'eslint-scope';
import { lastName, propertyName, quote, type AstIndex, type Node } from './ast';
import type { Failure } from './queries';

const OBJECTS = ['http', 'system'];

/** Whether `init` (an initializer, or an assignment's right side) is a host object of `names`. */
function holds(init: Node | null | undefined, names: ReadonlySet<string>): boolean {
  const name = lastName(init);
  return name !== null && names.has(name);
}

/** The name a pattern element binds, when it is a plain one (`x`, `x = dflt`). */
function boundName(target: Node): string | null {
  if (target.type === 'Identifier') return target.name as string;
  if (target.type === 'AssignmentPattern' && (target.left as Node).type === 'Identifier') return (target.left as Node).name as string;
  return null;
}

/** Names of the host objects and of the variables that hold them. */
export interface HostObjectNames {
  /** `http`, `system`, and every alias: what a helper's owner may be called. */
  owners: ReadonlySet<string>;
  /** The variables set from a host object (`h` of `const h = platform.http`), `http` / `system` when destructured. */
  aliases: ReadonlySet<string>;
  /** `platform`, `globalThis` (which holds it) and the variables set from them. */
  platform: ReadonlySet<string>;
}

/**
 * The variables set from a host object (`= platform.http`, `= h`, `{ http: net } = platform`),
 * and from `platform` itself, to a fixed point.
 */
export function hostObjectNames(index: AstIndex): HostObjectNames {
  const owners = new Set(OBJECTS);
  const aliases = new Set<string>();
  const platform = new Set(['platform', 'globalThis']);
  for (let size = -1; size !== owners.size + platform.size; ) {
    size = owners.size + platform.size;
    for (const node of index.parent.keys()) {
      let name: string | null = null;
      let init: Node | null = null;
      let destructured = false;
      if (node.type === 'VariableDeclarator' && (node.id as Node).type === 'Identifier') {
        name = (node.id as Node).name;
        init = node.init;
      } else if (node.type === 'AssignmentExpression' && node.operator === '=' && (node.left as Node).type === 'Identifier') {
        name = (node.left as Node).name;
        init = node.right;
      } else if (node.type === 'Property' && index.parent.get(node)?.type === 'ObjectPattern' && !node.computed && (node.key as Node).type === 'Identifier') {
        // `{ http: net } = ...`: whatever it is destructured from, `net` is taken for a host object
        if (OBJECTS.includes((node.key as Node).name)) name = boundName(node.value as Node);
        destructured = true;
      }
      if (name === null) continue;
      if (destructured || holds(init, owners)) {
        owners.add(name);
        aliases.add(name);
      } else if (holds(init, platform)) platform.add(name);
    }
  }
  return { owners, aliases, platform };
}

/** Whether a destructuring takes each property by its name (no computed name, no rest element). */
function byNames(pattern: Node): boolean {
  if (pattern.type !== 'ObjectPattern') return true;
  const staticKey = (key: Node) => key.type === 'Literal' || (key.type === 'TemplateLiteral' && key.expressions.length === 0);
  return (pattern.properties as Node[]).every((p) => p.type === 'Property' && (!p.computed || staticKey(p.key as Node)));
}

/** Whether a member read of a host object (`member`) names what it reads. */
function readByName(member: Node, parentOf: Map<Node, Node>, owners: ReadonlySet<string>): boolean {
  if (propertyName(member) !== null) return true;
  // a helper of `http` or `system` called by a computed name is reported with the calls
  const call = parentOf.get(member);
  return call?.type === 'CallExpression' && call.callee === member && owners.has(lastName(member.object as Node) as string);
}

/** Whether a use of a host object (`use`, whose parent is `up`) keeps its helpers' calls in sight. */
function inSight(use: Node, up: Node | undefined, parentOf: Map<Node, Node>, owners: ReadonlySet<string>): boolean {
  if (up === undefined) return false;
  switch (up.type) {
    case 'MemberExpression':
      return up.object === use && readByName(up, parentOf, owners);
    case 'VariableDeclarator':
      return up.init === use && byNames(up.id as Node); // a name of it, or a destructuring of its helpers (both checked)
    case 'AssignmentExpression':
      return up.right === use && up.operator === '=' && ((up.left as Node).type === 'Identifier' || ((up.left as Node).type === 'ObjectPattern' && byNames(up.left as Node)));
    case 'UnaryExpression':
      return up.operator === 'typeof' || up.operator === '!';
    case 'IfStatement':
    case 'ConditionalExpression':
      return up.test === use;
    case 'BinaryExpression':
      return true; // compared, never kept
    default:
      return false;
  }
}

/**
 * The first place a host object, `platform` or `globalThis` is passed on or stored (`go(platform.http)`,
 * `return h`, `{ h }`) or read by a computed name (`platform[k]`), or null.
 */
export function escapedHostObject(source: string, index: AstIndex, scopes: ScopeManager, names: HostObjectNames, at: (n: Node) => string): Failure | null {
  const uses: Node[] = index.members.filter((m) => OBJECTS.includes(lastName(m) as string) && holds(m.object as Node, names.platform));
  for (const scope of scopes.scopes) {
    for (const ref of scope.references) {
      const id = ref.identifier as unknown as Node;
      if (ref.isRead() && (names.aliases.has(id.name) || names.platform.has(id.name))) uses.push(id);
    }
  }
  let first: Failure | null = null;
  for (const use of uses) {
    let node = use;
    let up = index.parent.get(node);
    while (up?.type === 'ChainExpression') (node = up), (up = index.parent.get(up)); // (`platform?.http`)
    if (inSight(node, up, index.parent, names.owners) || (first !== null && first.pos < use.start)) continue;
    first =
      up?.type === 'MemberExpression' && up.object === node
        ? { pos: use.start, message: `\`${quote(source, use)}\` read by a computed name at ${at(use)} (read host objects and their helpers by name)` }
        : { pos: use.start, message: `host object \`${quote(source, use)}\` passed on or stored at ${at(use)} (call its helpers on it by name)` };
  }
  return first;
}
