/**
 * CEL (the Common Expression Language) for automation expressions, through @marcbachmann/cel-js:
 * not Turing-complete, no prototype access (`ctx.constructor` is "No such key"), parse limits.
 * Each expression is parsed and type-checked once, when its definition is compiled; evaluation
 * only walks the parsed tree. No `eval`, no `new Function`.
 *
 * The library ships ES modules only; scripts/build.js puts a CommonJS copy in dist/cjs/vendor.
 */
import { ConfigError } from '../errors';

/** The part of cel-js's Environment used here. */
interface CelEnvironment {
  clone(): CelEnvironment;
  registerVariable(name: string, type: string): CelEnvironment;
  registerOperator(signature: string, handler: (a: never, b: never) => unknown): CelEnvironment;
  parse(expression: string): CelProgram;
}
interface CelProgram {
  (context: Record<string, unknown>): unknown;
  check(): { valid: boolean; error?: Error & { range?: { start: number } } };
  /** The root of its syntax tree: nodes with `op` and `args` (nodes, lists of them, or objects of them). */
  ast: object;
}
interface CelModule {
  Environment: new (opts: Record<string, unknown>) => CelEnvironment;
}

// (a path computed at run time: tsc leaves it alone, and dist/cjs/vendor exists only in the build)
const VENDOR = '../vendor/cel-js/index.js';
let cel: CelModule | undefined;
function celModule(): CelModule {
  // eslint-disable-next-line @typescript-eslint/no-require-imports
  return (cel ??= require(VENDOR) as CelModule);
}

/** Parse limits: an expression is a field of a definition, not a program. */
export const EXPRESSION_LIMITS = { maxAstNodes: 2000, maxDepth: 50, maxListElements: 1000, maxMapEntries: 1000, maxCallArguments: 32 };
/** Longest expression text accepted. */
export const MAX_EXPRESSION_LENGTH = 10_000;

let base: CelEnvironment | undefined;
const scoped = new Map<string, CelEnvironment>();

/**
 * The environment with `ctx`, `state` and the given loop variables declared (as `dyn`: their
 * shape is the request's and the steps' data). JSON numbers arrive as CEL doubles and literals
 * like `1` are CEL ints; CEL has no mixed arithmetic of its own, so `+ - * /` are declared
 * between the two (as doubles) and `state.vars.count + 1` works as a JSON user expects.
 */
function environment(vars: readonly string[]): CelEnvironment {
  const key = vars.join(',');
  let env = scoped.get(key);
  if (env !== undefined) return env;
  if (base === undefined) {
    const b = new (celModule().Environment)({ homogeneousAggregateLiterals: false, enableOptionalTypes: true, limits: EXPRESSION_LIMITS });
    b.registerVariable('ctx', 'dyn').registerVariable('state', 'dyn');
    const ops: Record<string, (a: number, b: number) => number> = { '+': (a, b) => a + b, '-': (a, b) => a - b, '*': (a, b) => a * b, '/': (a, b) => a / b };
    for (const [op, f] of Object.entries(ops)) {
      b.registerOperator(`double ${op} int`, ((a: number, n: bigint) => f(a, Number(n))) as never);
      b.registerOperator(`int ${op} double`, ((n: bigint, a: number) => f(Number(n), a)) as never);
    }
    base = b;
  }
  env = base.clone();
  for (const v of vars) env.registerVariable(v, 'dyn');
  if (scoped.size < 64) scoped.set(key, env);
  return env;
}

/** Words of CEL's grammar: a variable of that name could never be read. */
const KEYWORDS = new Set(['true', 'false', 'null', 'in']);

/**
 * Why `name` cannot be declared as a variable of expressions (a forEach's `as`): a keyword, a
 * word CEL reserves, or a name it already has (`int`, `optional`); undefined when it can.
 */
export function variableProblem(name: string): string | undefined {
  if (KEYWORDS.has(name)) return `'${name}' is a keyword of CEL`;
  try {
    environment([name]);
    return undefined;
  } catch (e) {
    return describe(e).replace(/^Invalid variable declaration: /, '');
  }
}

/** The first line of a cel-js message (the rest is a source excerpt), with the column. */
function describe(e: unknown): string {
  const err = e as Error & { range?: { start?: number } };
  const first = String(err?.message ?? e).split('\n')[0];
  const at = typeof err?.range?.start === 'number' ? ` at column ${err.range.start + 1}` : '';
  return first + at;
}

/**
 * The syntax nodes of a parsed expression (its macros' expansions included): what holding its
 * parsed form costs, about 260 bytes a node, on the host and in every worker that compiles it.
 */
function syntaxNodes(ast: object): number {
  const Node = ast.constructor;
  const seen = new Set<object>();
  const todo: unknown[] = [ast];
  let n = 0;
  while (todo.length > 0) {
    const v = todo.pop();
    if (typeof v !== 'object' || v === null || seen.has(v)) continue;
    seen.add(v);
    if (v instanceof Node) {
      n++;
      todo.push((v as { args?: unknown }).args);
    } else if (Array.isArray(v)) todo.push(...v);
    else if (Object.getPrototypeOf(v) === Object.prototype) todo.push(...Object.values(v));
  }
  return n;
}

/** A parsed expression. */
export interface Expression {
  readonly text: string;
  /** Its syntax nodes (what its parsed form costs to hold). */
  readonly nodes: number;
  /** Evaluates against `scope` (`ctx`, `state`, loop variables); throws EvaluationError with a one-line message. */
  evaluate(scope: Record<string, unknown>): unknown;
}

/** An evaluation failed: the expression's text and why, in one line. */
export class ExpressionError extends Error {
  constructor(
    readonly text: string,
    message: string,
  ) {
    super(message);
    this.name = 'ExpressionError';
  }
}

/**
 * Parses and type-checks `text` with `ctx`, `state` and `vars` in scope. Throws ConfigError
 * naming `field` when it is not a valid expression.
 */
export function compileExpression(text: string, field: string, vars: readonly string[] = []): Expression {
  if (text.length > MAX_EXPRESSION_LENGTH) throw new ConfigError(field, `the expression is longer than ${MAX_EXPRESSION_LENGTH} characters`);
  let program: CelProgram;
  try {
    program = environment(vars).parse(text);
  } catch (e) {
    throw badExpression(field, text, describe(e));
  }
  const checked = program.check();
  if (!checked.valid) throw badExpression(field, text, describe(checked.error));
  return {
    text,
    nodes: syntaxNodes(program.ast),
    evaluate(scope) {
      try {
        return program(scope);
      } catch (e) {
        throw new ExpressionError(text, describe(e));
      }
    },
  };
}

/** Plain words are the usual mistake: a text must be quoted inside the expression. */
function badExpression(field: string, text: string, why: string): ConfigError {
  const words = !/['"]/.test(text) && ((/^Unknown variable/.test(why) && !/[.([]/.test(text)) || /^[A-Za-z][\w,!?.-]*(\s+[\w,!?.-]+)+$/.test(text.trim()));
  const hint = words ? ` (a text is written in quotes inside the expression: "'${text.replace(/'/g, "\\'")}'")` : '';
  return new ConfigError(field, `bad expression ${JSON.stringify(text)}: ${why}${hint}`);
}
