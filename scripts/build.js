#!/usr/bin/env node
// Builds dist/cjs with tsc, copies the sandbox-side JavaScript, and writes the ESM entry that
// re-exports the CommonJS build (one implementation, so `import` and `require` share state).
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

const cjs = require(path.join(dist, 'cjs', 'index.js'));
const names = Object.keys(cjs).filter((n) => n !== 'default' && n !== '__esModule');
fs.mkdirSync(path.join(dist, 'esm'), { recursive: true });
fs.writeFileSync(
  path.join(dist, 'esm', 'index.mjs'),
  `import cjs from '../cjs/index.js';\nexport const { ${names.join(', ')} } = cjs;\nexport default cjs;\n`,
);
// the default export of index.mjs (the whole CommonJS module) has its type too
fs.writeFileSync(path.join(dist, 'esm', 'index.d.mts'), `export * from '../cjs/index.js';\nimport * as api from '../cjs/index.js';\nexport default api;\n`);
