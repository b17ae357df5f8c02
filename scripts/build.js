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

// Sandbox-side sources are plain JavaScript evaluated inside the engines: copy them as they are.
const sandboxSrc = path.join(root, 'lib', 'runtime', 'sandbox');
if (fs.existsSync(sandboxSrc)) {
  const out = path.join(dist, 'cjs', 'runtime', 'sandbox');
  fs.mkdirSync(out, { recursive: true });
  for (const f of fs.readdirSync(sandboxSrc)) if (f.endsWith('.js')) fs.copyFileSync(path.join(sandboxSrc, f), path.join(out, f));
}

// @marcbachmann/cel-js ships ES modules only. `require()` of an ES module needs Node.js 20.19 and
// fails under test runners with their own module loader (Jest), so the automation interpreter
// loads a CommonJS copy made here (imports/exports rewritten by sucrase; nothing else changes).
{
  // (its exports map hides package.json: find the package folder from the main entry)
  const celPkg = path.resolve(path.dirname(require.resolve('@marcbachmann/cel-js')), '..');
  const { transform } = require('sucrase');
  const out = path.join(dist, 'cjs', 'vendor', 'cel-js');
  fs.mkdirSync(out, { recursive: true });
  for (const f of fs.readdirSync(path.join(celPkg, 'lib'))) {
    if (!f.endsWith('.js')) continue;
    const code = fs.readFileSync(path.join(celPkg, 'lib', f), 'utf8');
    fs.writeFileSync(path.join(out, f), transform(code, { transforms: ['imports'], filePath: f }).code);
  }
  const { version } = require(path.join(celPkg, 'package.json'));
  fs.copyFileSync(path.join(celPkg, 'LICENSE'), path.join(out, 'LICENSE'));
  fs.writeFileSync(path.join(out, 'package.json'), JSON.stringify({ name: '@marcbachmann/cel-js', version, type: 'commonjs', main: 'index.js' }, null, 2) + '\n');
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
