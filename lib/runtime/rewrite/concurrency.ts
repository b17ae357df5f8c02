/**
 * Checks for scripts whose own `async` functions wait on the host. In blocking mode those
 * functions ran their host calls to the end before the code that started them went on; in async
 * mode they really run at the same time. Two ways that changes what a script does are fallbacks.
 */
import { FUNCTION_TYPES, propertyName, quote, type Node } from './ast';
import type { Failure, TreeQueries } from './queries';

/**
 * An async function that waits on the host must not be left running. Flags the usual ways of
 * dropping its promise: `forEach(async ...)`, an async callback passed to a call whose value is
 * dropped (`xs.map(async ...);`), and a call of it (by name or where it is written) as a
 * statement of its own or under `void`.
 */
export function droppedPromises(q: TreeQueries, fn: Node): Failure[] {
  const up = q.parent(fn) as Node;
  /** Whether the value of `node` is dropped: a statement, under `void`, in `&&` / `?:` / `,` whose value is, or returned by a callback whose value is. */
  const dropped = (node: Node): boolean => {
    const use = q.parent(node);
    if (use === undefined) return false;
    if (use.type === 'ExpressionStatement' || (use.type === 'UnaryExpression' && use.operator === 'void')) return true;
    if (use.type === 'LogicalExpression' && use.right === node) return dropped(use);
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
  for (const v of q.namingVariables(fn)) {
    for (const ref of v.references) {
      const id = ref.identifier as unknown as Node;
      const call = q.parent(id) as Node;
      if (call.type === 'CallExpression' && call.callee === id && dropped(call)) {
        found.push({ pos: id.start, message: `call of async \`${v.name}\` at ${q.at(id)} is not awaited, but it waits on the host` });
      }
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
