'use strict';
// Helpers for the host-call rewrite tests: check that rewritten code parses and keeps every
// statement on its line, and evaluate an ES module's exports in this realm (the rewrite emits no
// top-level await, so a module body is a function body once `export` is taken away).
const acorn = require('acorn');
const { KEYS } = require('eslint-visitor-keys');
const { rewriteHostCalls } = require('../../dist/cjs/runtime/rewrite/index.js');

const parse = (code) => acorn.parse(code, { ecmaVersion: 'latest', sourceType: 'module', locations: true, allowHashBang: true });

/** The statements the rewrite adds around a `try` (edits.ts): `{const __callToken = __current(); try ...}` and `__resume(__callToken);`. */
const isTokenDeclaration = (n) => n?.type === 'VariableDeclaration' && n.declarations[0]?.id.name === '__callToken';
function addedByRewrite(node) {
  if (node.type === 'BlockStatement') return isTokenDeclaration(node.body[0]);
  if (node.type === 'ExpressionStatement') return node.expression.type === 'CallExpression' && node.expression.callee.name === '__resume' && node.expression.arguments[0]?.name === '__callToken';
  return isTokenDeclaration(node);
}

/** Statements and declarations in tree order (empty statements and those the rewrite adds left out), with their start lines. */
function statementLines(code) {
  const out = [];
  const walk = (node) => {
    if (/(Statement|Declaration)$/.test(node.type) && node.type !== 'EmptyStatement' && !addedByRewrite(node)) out.push(`${node.type}@${node.loc.start.line}`);
    for (const key of KEYS[node.type] || []) {
      const v = node[key];
      for (const child of Array.isArray(v) ? v : [v]) if (child && typeof child.type === 'string') walk(child);
    }
  };
  walk(parse(code));
  return out;
}

const lineCount = (s) => s.split(/\r\n?|\n|\u2028|\u2029/).length;

/** Rewrites, and when the result is async checks that it parses and every statement kept its line. */
function rewrite(source, options) {
  const result = rewriteHostCalls(source, options);
  if (result.async) {
    expect(lineCount(result.code)).toBe(lineCount(source));
    expect(statementLines(result.code)).toEqual(statementLines(source));
  } else {
    expect(result.code).toBe(source);
    expect(typeof result.reason).toBe('string');
  }
  return result;
}

/**
 * The sandbox globals the rewrite wraps each `await` and `try` with
 * (lib/runtime/sandbox/continuations.ts), without calls to act for: a rewritten program calls
 * them, and they change nothing of its meaning.
 */
const CONTINUATIONS = `function __current() { return null; }
function __resume(token, v) { return v; }
`;

/** Evaluates an ES module's source with `platform` as a global; returns its exports. */
function evaluateModule(code, platform) {
  const ast = parse(code);
  const edits = [];
  const exported = [];
  const names = (decl) =>
    decl.type === 'VariableDeclaration' ? decl.declarations.map((d) => d.id.name) : [decl.id.name];
  for (const node of ast.body) {
    if (node.type === 'ExportNamedDeclaration' && node.declaration) {
      edits.push([node.start, node.declaration.start, '']);
      for (const n of names(node.declaration)) exported.push([n, n]);
    } else if (node.type === 'ExportNamedDeclaration') {
      edits.push([node.start, node.end, '']);
      for (const s of node.specifiers) exported.push([s.exported.name, s.local.name]);
    } else if (node.type === 'ExportDefaultDeclaration') {
      const d = node.declaration;
      if (d.type === 'FunctionDeclaration' && d.id) {
        edits.push([node.start, d.start, '']);
        exported.push(['default', d.id.name]);
      } else {
        edits.push([node.start, d.start, 'const __default = ']);
        exported.push(['default', '__default']);
      }
    }
  }
  let body = '';
  let last = 0;
  for (const [from, to, text] of edits) {
    // keep the line breaks of what is cut, so lines stay where they were
    body += code.slice(last, from) + text + code.slice(from, to).replace(/[^\n]/g, '');
    last = to;
  }
  body += code.slice(last);
  const ret = `\nreturn { ${exported.map(([k, v]) => `${JSON.stringify(k)}: ${v}`).join(', ')} };`;
  return new Function('platform', `'use strict';${CONTINUATIONS}${body}${ret}`)(platform);
}

/** Appended to a script, it makes the rewrite leave the script in blocking mode (`eval` is read). */
const BLOCKING = '\nexport function forceBlocking() { return typeof eval }\n';

/**
 * One app's scripts and APIs for [name, source] cases ($U in a source is `base`): case i is served
 * at `c${i}` as written and at `c${i}b` forced into blocking mode, both calling `main`.
 */
function pairedModes(cases, base) {
  const scripts = {};
  const apis = [];
  cases.forEach(([, source], i) => {
    scripts[`c${i}.js`] = source.replaceAll('$U', base);
    scripts[`c${i}b.js`] = source.replaceAll('$U', base) + BLOCKING;
    apis.push({ path: `c${i}`, call: { script: `c${i}.js`, function: 'main' }, returnType: 'JSON' });
    apis.push({ path: `c${i}b`, call: { script: `c${i}b.js`, function: 'main' }, returnType: 'JSON' });
  });
  return { scripts, apis };
}

module.exports = { BLOCKING, CONTINUATIONS, pairedModes, rewrite, evaluateModule, statementLines, parse };
