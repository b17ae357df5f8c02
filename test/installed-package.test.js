'use strict';
// The package as `npm pack` makes it, installed in a project of its own (outside the repository):
// its entries load by require and import (one set of classes), its command runs, and TypeScript
// consumers type-check against its declarations under node16, nodenext and bundler resolution.
// The project's other packages are the repository's (a node_modules link above the project).
const { execFileSync } = require('node:child_process');
const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');

const root = path.join(__dirname, '..');
const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'sapi-installed-'));
const project = path.join(tmp, 'project');
const installed = path.join(project, 'node_modules', 'scriptable-api');
const tsc = require.resolve('typescript/bin/tsc');

beforeAll(() => {
  const [packed] = JSON.parse(execFileSync('npm', ['pack', '--json', '--ignore-scripts', '--pack-destination', tmp], { cwd: root, encoding: 'utf8' }));
  fs.mkdirSync(installed, { recursive: true });
  execFileSync('tar', ['xzf', path.join(tmp, packed.filename), '-C', installed, '--strip-components=1']);
  fs.symlinkSync(fs.realpathSync(path.join(root, 'node_modules')), path.join(tmp, 'node_modules'), 'dir');
  fs.writeFileSync(path.join(project, 'package.json'), JSON.stringify({ name: 'consumer', version: '1.0.0', private: true }));
}, 120_000);
afterAll(() => fs.rmSync(tmp, { recursive: true, force: true }));

function write(rel, content) {
  const file = path.join(project, rel);
  fs.mkdirSync(path.dirname(file), { recursive: true });
  fs.writeFileSync(file, content);
}
const node = (args) => execFileSync(process.execPath, args, { cwd: project, encoding: 'utf8' });

test('require and import load the installed copy, with the same classes and errors both ways', () => {
  write('both.mjs', `
import { createRequire } from 'node:module';
import * as esm from 'scriptable-api';
import api from 'scriptable-api';
const cjs = createRequire(import.meta.url)('scriptable-api');
const names = Object.keys(cjs).filter((k) => k !== '__esModule');
let caught;
try { new esm.MemoryRegistry().putApi('a', { path: '/p', call: { script: 's.js', function: 'f' }, returnType: 'JSON' }); } catch (e) { caught = e; }
console.log(JSON.stringify({
  where: createRequire(import.meta.url).resolve('scriptable-api'),
  same: names.every((k) => esm[k] === cjs[k]) && api === cjs,
  errors: [caught instanceof cjs.ConfigError, caught instanceof esm.ConfigError, caught.field],
  schema: createRequire(import.meta.url)('scriptable-api/schemas/automation.json').type,
}));
`);
  const out = JSON.parse(node(['both.mjs']));
  expect(out.where).toBe(path.join(fs.realpathSync(installed), 'dist', 'cjs', 'index.js'));
  expect(out).toMatchObject({ same: true, errors: [true, true, "api '/p'.path"], schema: 'object' });
});

test('a router from the installed copy serves a script (the worker and its sandbox files ship)', () => {
  write('serve.cjs', `
const express = require('express');
const { createApiRouter, MemoryRegistry } = require('scriptable-api');
const registry = new MemoryRegistry({ apps: { a: { scripts: { 's.ts': 'export function f(ctx: any): object { return { m: ctx.method } }' }, apis: [{ path: 'p', call: { script: 's.ts', function: 'f' }, returnType: 'JSON' }] } } });
const router = createApiRouter({ registry, workers: 1, logger: false });
const server = express().use('/api', router).listen(0, '127.0.0.1', async () => {
  const res = await fetch('http://127.0.0.1:' + server.address().port + '/api/a/p');
  console.log(res.status, await res.text());
  await router.close();
  server.close();
});
`);
  expect(node(['serve.cjs']).trim()).toBe('200 {"m":"GET"}');
});

test('the command runs from the installed copy', () => {
  expect(node([path.join(installed, 'bin', 'scriptable-api.js'), '--version']).trim()).toBe(require('../package.json').version);
});

test.each([
  ['node16', 'node16', 'commonjs'],
  ['nodenext', 'nodenext', 'module'],
  ['esnext', 'bundler', 'module'],
])('a TypeScript consumer type-checks strictly against the installed declarations (module %s, moduleResolution %s, type %s)', (module, resolution, type) => {
  const dir = `ts-${resolution}`;
  write(`${dir}/package.json`, JSON.stringify({ type }));
  write(`${dir}/tsconfig.json`, JSON.stringify({
    compilerOptions: { strict: true, noEmit: true, target: 'ES2022', module, moduleResolution: resolution, types: ['node'], skipLibCheck: false, esModuleInterop: true },
    include: ['*.ts'],
  }));
  write(`${dir}/app.ts`, `
import express from 'express';
import { createApiRouter, MemoryRegistry, ConfigError, ERRORS, type ApiDefinition, type ScriptEngine, type FileStorage, type RateLimitStore, reserveGcra } from 'scriptable-api';
const registry = new MemoryRegistry();
const def: ApiDefinition = { path: 'orders/list', call: { script: 'orders.js', function: 'list' }, returnType: 'JSON', methods: ['GET'] };
registry.putApi('shop', def);
const router = createApiRouter({ registry, cors: { origins: '*' }, rateLimit: { onStoreError: 'open' } });
express().use('/web0/api', router);
export const scrape: Promise<string> | undefined = router.metrics?.text();
export const code: number = ERRORS.SCRIPT_ERROR.code;
export function isConfig(e: unknown): string | undefined { return e instanceof ConfigError ? e.field : undefined; }
export const store: RateLimitStore = { reserve: async (_k, interval, wait) => reserveGcra(0, Date.now(), interval, wait).reservation };
export type Parts = [ScriptEngine, FileStorage];
`);
  // script authors' ambient types, through the "./types/*" export
  write(`${dir}/script.ts`, `/// <reference types="scriptable-api/types/index.d.ts" />
export function f(ctx: APIContext) { return { method: ctx.method, token: ctx.request.getHeader('x-token') }; }
`);
  execFileSync(process.execPath, [tsc, '-p', path.join(project, dir)], { cwd: project, encoding: 'utf8' });
}, 120_000);
