/**
 * Checks for scripts whose own `async` functions wait on the host. In blocking mode those
 * functions ran their host calls to the end before the code that started them went on; in async
 * mode they really run at the same time. Two ways that changes what a script does are fallbacks.
 */
import { FUNCTION_TYPES, memberName, propertyName, quote, type Node } from './ast';
import type { Failure, TreeQueries } from './queries';

/** Methods of a promise that return a promise of the same work. */
const CHAINS: ReadonlySet<string> = new Set(['then', 'catch', 'finally']);

/** Statements and expressions that only test their `test`. */
const TESTS: ReadonlySet<string> = new Set(['IfStatement', 'WhileStatement', 'DoWhileStatement', 'ForStatement', 'ConditionalExpression']);

/**
 * An async function that waits on the host must not be left running. Flags the usual ways of
 * dropping its promise: `forEach(async ...)`, an async callback passed to a call whose value is
 * dropped (`xs.map(async ...);`), and a call of it (by name, as a method by its name unless the
 * rewrite awaits that call, or where it is written) as a statement of its own, under `void`, `!`
 * or `typeof`, compared or made text, as a condition or the left of `&&`, chained with
 * `then` / `catch` / `finally` whose promise is dropped, kept in a variable never read, or an
 * element of an array or object literal that is one of those (`[keep(a), keep(b)];`).
 */
export function droppedPromises(q: TreeQueries, fn: Node, awaited: (call: Node) => boolean): Failure[] {
  const up = q.parent(fn) as Node;
  /** Whether the value of `node` is dropped: a statement, under `void`, in `&&` / `?:` / `,` whose value is, or returned by a callback whose value is. */
  const dropped = (node: Node): boolean => {
    const use = q.parent(node);
    if (use === undefined) return false;
    // (`void`, `!`, `typeof`...; compared, or made text: a promise's value is never waited for there)
    if (use.type === 'ExpressionStatement' || use.type === 'UnaryExpression' || use.type === 'BinaryExpression') return true;
    if (use.type === 'TemplateLiteral') return q.parent(use)?.type !== 'TaggedTemplateExpression'; // (a tag gets the promise itself)
    if (TESTS.has(use.type) && use.test === node) return true; // only tested: a promise is always true
    if (use.type === 'VariableDeclarator' && use.init === node) return q.neverRead(use);
    if (use.type === 'AssignmentExpression' && use.right === node && use.operator === '=') {
      return use.left.type === 'Identifier' && q.neverReadName(use.left); // (stored in a member: kept)
    }
    // (an element of an array or object literal that is itself dropped, or kept where it is never read)
    if (use.type === 'ArrayExpression') return dropped(use);
    if (use.type === 'Property' && use.value === node && q.parent(use)?.type === 'ObjectExpression') return dropped(q.parent(use) as Node);
    if (use.type === 'MemberExpression' && use.object === node && CHAINS.has(propertyName(use) as string)) {
      const chained = q.parent(use) as Node;
      return chained.type === 'CallExpression' && chained.callee === use && dropped(chained);
    }
    if (use.type === 'LogicalExpression' && use.right === node) return dropped(use);
    // (a promise is true: `p && x` drops it, `p || x` is it)
    if (use.type === 'LogicalExpression') return use.operator === '&&' || dropped(use);
    if (use.type === 'ConditionalExpression' && use.test !== node) return dropped(use);
    if (use.type === 'SequenceExpression') return (use.expressions as Node[]).at(-1) !== node || dropped(use);
    if (use.type === 'ArrowFunctionExpression' && use.body === node) return droppedCallback(use);
    return false;
  };
  /** Whether what a callback returns is dropped: it is given to forEach, or to a call whose value is. */
  const droppedCallback = (callback: Node): boolean => {
    const call = q.parent(callback) as Node;
    if (call.type !== 'CallExpression' || !(call.arguments as Node[]).includes(callback)) return false;
    return (call.callee.type === 'MemberExpression' && propertyName(call.callee) === 'forEach') || dropped(call);
  };
  if (up.type === 'CallExpression' && (up.arguments as Node[]).includes(fn)) {
    if (up.callee.type === 'MemberExpression' && propertyName(up.callee) === 'forEach') {
      return [{ pos: fn.start, message: `async callback passed to forEach at ${q.at(fn)} waits on the host, but nothing waits for it (use a for...of loop)` }];
    }
    if (dropped(up)) {
      return [{ pos: fn.start, message: `async callback at ${q.at(fn)} waits on the host, but the call it is passed to is not awaited` }];
    }
  }
  if (up.type === 'CallExpression' && up.callee === fn && dropped(up)) {
    return [{ pos: up.start, message: `async function called at ${q.at(up)} waits on the host, but its promise is not awaited` }];
  }
  const found: Failure[] = [];
  const method = up.type === 'MethodDefinition' || up.type === 'PropertyDefinition' || (up.type === 'Property' && up.value === fn) ? memberName(up) : null;
  if (method !== null) {
    for (const call of q.calls) {
      const callee = (call.type === 'CallExpression' ? call.callee : call.tag) as Node;
      // (a method named like a host method is awaited wherever it is called)
      if (callee.type === 'MemberExpression' && propertyName(callee) === method && !awaited(call) && dropped(call)) {
        found.push({ pos: call.start, message: `call of async method \`${method}\` at ${q.at(call)} is not awaited, but it waits on the host` });
      }
    }
  }
  for (const v of q.namingVariables(fn)) {
    for (const ref of v.references) {
      const id = ref.identifier as unknown as Node;
      const use = q.parent(id) as Node;
      if (use.type === 'CallExpression' && use.callee === id) {
        if (dropped(use)) found.push({ pos: id.start, message: `call of async \`${v.name}\` at ${q.at(id)} is not awaited, but it waits on the host` });
        continue;
      }
      if (ref.init || ref.isWrite() || use.type === 'ExportSpecifier' || use.type === 'ExportDefaultDeclaration' || use.type === 'BinaryExpression') continue;
      if (use.type === 'UnaryExpression' && use.operator === 'typeof') continue;
      // (its `name` or `length` read, not `call` / `apply` / `bind`, which call it out of sight)
      if (use.type === 'MemberExpression' && use.object === id && !['call', 'apply', 'bind'].includes(propertyName(use) as string) && propertyName(use) !== null) continue;
      // passed by its name, it is a callback: `ps.forEach(keep)` is `ps.forEach(async (p) => ...)`
      if (use.type === 'CallExpression' && (use.arguments as Node[]).includes(id)) {
        if (use.callee.type === 'MemberExpression' && propertyName(use.callee) === 'forEach') {
          found.push({ pos: id.start, message: `async \`${v.name}\` passed to forEach at ${q.at(id)} waits on the host, but nothing waits for it (use a for...of loop)` });
        } else if (dropped(use)) {
          found.push({ pos: id.start, message: `async \`${v.name}\` passed at ${q.at(id)} waits on the host, but the call it is passed to is not awaited` });
        }
        continue;
      }
      // kept under another name or in an object, its calls there cannot be followed
      found.push({ pos: id.start, message: `async \`${v.name}\` waits on the host and is stored or passed on at ${q.at(id)} (call it by its name, so that its calls can be seen awaited)` });
    }
  }
  return found;
}

/** Whether `text` (a variable or member, as written) appears in the source between `from` and `to`. */
function readsIn(source: string, text: string, from: number, to: number): boolean {
  const escaped = text.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
  return new RegExp(`(?<![\\w$.])${escaped}(?![\\w$])`).test(source.slice(from, to));
}

/**
 * `total += a.request(x).n` and `total = total + a.request(x).n` read `total` before the call
 * (`seen[seen.length] = p.save(x)` its key); with an await there, code running meanwhile may
 * change it and the update is lost. Fine when `total` is a local variable of the function (each
 * call has its own). `target` is an expression about to be wrapped in an await.
 */
export function splitUpdate(q: TreeQueries, target: Node): Failure | null {
  let child = target;
  for (let up = q.parent(target); up !== undefined && !FUNCTION_TYPES.has(up.type); child = up, up = q.parent(up)) {
    if (up.type !== 'AssignmentExpression' || up.right !== child) continue;
    const left = up.left as Node;
    if (up.operator === '=') {
      const text = q.source.slice(left.start, left.end);
      const key = left.type === 'MemberExpression' && left.computed ? (left.property as Node) : null;
      const object = key !== null ? q.source.slice((left.object as Node).start, (left.object as Node).end) : '';
      const readFirst = readsIn(q.source, text, up.right.start, target.start) || (key !== null && readsIn(q.source, object, key.start, key.end));
      if (!readFirst) continue;
    }
    const where = q.owner(up);
    if (left.type === 'Identifier' && 'fn' in where) {
      const variable = q.reference(left)?.resolved;
      if (variable && variable.scope.variableScope.block === where.fn) continue;
    }
    const name = quote(q.source, left, 24);
    return {
      pos: target.start,
      message:
        `host call in \`${name} ${up.operator} ...\` at ${q.at(target)}: \`${name}\` would be read before the wait while other async code may change it ` +
        (up.operator === '=' ? '(take the host call into a variable first: `const v = ...;`)' : `(write \`const v = ...; ${name} ${up.operator} v\`)`),
    };
  }
  return null;
}
