#!/usr/bin/env node
// Builds dist/cjs with tsc, copies the sandbox-side JavaScript, converts the CEL library (an ES
// module only) to CommonJS under dist/cjs/vendor, and writes the ESM entry that re-exports the
// CommonJS build (one implementation, so `import` and `require` share state).
'use strict';
const fs = require('node:fs');
const path = require('node:path');
const { execFileSync } = require('node:child_process');

const root = path.resolve(__dirname, '..');
const dist = path.join(root, 'dist');
fs.rmSync(dist, { recursive: true, force: true });
execFileSync(process.execPath, [require.resolve('typescript/bin/tsc'), '-p', path.join(root, 'tsconfig.json')], {
  stdio: 'inherit',
});

// The sandbox adapter (lib/runtime/sandbox/*.ts): type-checked on its own (no Node.js types: it
// runs inside the engines), then bundled by esbuild into the body of ONE function expression,
// `(function (hostFn) { ...; return entry; })`, which each engine evaluates in a fresh context
// (see lib/runtime/adapter-source.ts), minified: parsing it is most of the cost of a new context.
// Nothing is lowered (QuickJS and Node 20 run ES2022), and
// the bundle has no imports or exports of its own, so esbuild adds no helpers.
{
  const sandbox = path.join(root, 'lib', 'runtime', 'sandbox');
  execFileSync(process.execPath, [require.resolve('typescript/bin/tsc'), '-p', path.join(sandbox, 'tsconfig.json')], { stdio: 'inherit' });
  const bundle = require('esbuild').buildSync({
    entryPoints: [path.join(sandbox, 'entry.ts')],
    bundle: true,
    format: 'iife',
    target: 'es2022',
    platform: 'neutral',
    minify: true,
    legalComments: 'none',
    write: false,
  });
  const body = bundle.outputFiles[0].text;
  const out = path.join(dist, 'cjs', 'runtime', 'sandbox');
  fs.mkdirSync(out, { recursive: true });
  fs.writeFileSync(path.join(out, 'adapter.js'), `(function (hostFn) {\n'use strict';\nvar __adapterEntry;\n${body}\nreturn __adapterEntry;\n})`);
}

// @marcbachmann/cel-js ships ES modules only. `require()` of an ES module needs Node.js 20.19 and
// fails under test runners with their own module loader (Jest), so the automation interpreter
// loads a CommonJS copy made here (imports/exports rewritten by sucrase), with one change:
// CEL_SIZE_GUARDS. An automation's values are held to 16 MiB (lib/automation/json.ts), but only
// once an expression is done; inside one, `join` or `+` could build a string of hundreds of MB in
// a single allocation, which V8 cannot fail gracefully: it aborts the whole process, not the
// worker. The guarded operations refuse, before allocating, a result past that size.
const CEL_GUARD = `const __celGuard = (n, what) => { if (n > 16777216) throw new RangeError(\`\${what} would be larger than 16 MiB\`) };\n`;
const CEL_SIZE_GUARDS = {
  'overloads.js': [
    ["binaryOverload('string', '+', 'string', (a, b) => a + b)", "binaryOverload('string', '+', 'string', (a, b) => (__celGuard(a.length + b.length, 'string +'), a + b))"],
    // (a list item counts 8 bytes, as lib/automation/json.ts counts it)
    ["binaryOverload('list<V>', '+', 'list<V>', (a, b) => [...a, ...b])", "binaryOverload('list<V>', '+', 'list<V>', (a, b) => (__celGuard((a.length + b.length) * 8, 'list +'), [...a, ...b]))"],
    ['    const result = new Uint8Array(a.length + b.length)', "    __celGuard(a.length + b.length, 'bytes +')\n    const result = new Uint8Array(a.length + b.length)"],
  ],
  'functions.js': [
    ["    return v.join('')", "    __celGuard(v.reduce((n, s) => n + s.length, 0), 'join()')\n    return v.join('')"],
    ['    return v.join(sep)', "    __celGuard(v.reduce((n, s) => n + s.length, 0) + Math.max(v.length - 1, 0) * sep.length, 'join()')\n    return v.join(sep)"],
  ],
};
{
  // (its exports map hides package.json: find the package folder from the main entry)
  const celPkg = path.resolve(path.dirname(require.resolve('@marcbachmann/cel-js')), '..');
  const { transform } = require('sucrase');
  const out = path.join(dist, 'cjs', 'vendor', 'cel-js');
  fs.mkdirSync(out, { recursive: true });
  for (const f of fs.readdirSync(path.join(celPkg, 'lib'))) {
    if (!f.endsWith('.js')) continue;
    let code = fs.readFileSync(path.join(celPkg, 'lib', f), 'utf8');
    const guards = CEL_SIZE_GUARDS[f];
    if (guards) {
      for (const [from, to] of guards) {
        if (code.split(from).length !== 2) throw new Error(`scripts/build.js: cel-js ${f} no longer has \`${from}\` once: update CEL_SIZE_GUARDS for this version`);
        code = code.replace(from, to);
      }
      code = CEL_GUARD + code;
    }
    fs.writeFileSync(path.join(out, f), transform(code, { transforms: ['imports'], filePath: f }).code);
  }
  const { version } = require(path.join(celPkg, 'package.json'));
  fs.copyFileSync(path.join(celPkg, 'LICENSE'), path.join(out, 'LICENSE'));
  fs.writeFileSync(path.join(out, 'package.json'), JSON.stringify({ name: '@marcbachmann/cel-js', version, type: 'commonjs', main: 'index.js' }, null, 2) + '\n');
}

// The definition validators: schemas/*.json compiled by ajv into standalone code, loaded by
// lib/definitions/schema.ts (the same schema files, none of ajv's compile time at startup).
{
  const { AJV_OPTIONS, SCHEMA_NAMES } = require(path.join(dist, 'cjs', 'definitions', 'ajv-options.js'));
  const Ajv = require('ajv').default;
  const standaloneCode = require('ajv/dist/standalone').default;
  for (const name of SCHEMA_NAMES) {
    const ajv = new Ajv({ ...AJV_OPTIONS, keywords: [...AJV_OPTIONS.keywords], code: { source: true } });
    const validate = ajv.compile(JSON.parse(fs.readFileSync(path.join(root, 'schemas', `${name}.json`), 'utf8')));
    fs.writeFileSync(path.join(dist, 'cjs', 'definitions', `validate-${name}.js`), `// Generated by scripts/build.js from schemas/${name}.json.\n${standaloneCode(ajv, validate)}`);
  }
}

const cjs = require(path.join(dist, 'cjs', 'index.js'));
const names = Object.keys(cjs).filter((n) => n !== 'default' && n !== '__esModule');
fs.mkdirSync(path.join(dist, 'esm'), { recursive: true });
fs.writeFileSync(
  path.join(dist, 'esm', 'index.mjs'),
  `import cjs from '../cjs/index.js';\nexport const { ${names.join(', ')} } = cjs;\nexport default cjs;\n`,
);
// the default export of index.mjs (the whole CommonJS module) has its type too
fs.writeFileSync(path.join(dist, 'esm', 'index.d.mts'), `export * from '../cjs/index.js';\nimport * as api from '../cjs/index.js';\nexport default api;\n`);
