'use strict';
/**
 * The parts of the build a one-thread bench drives without the pool (stage.js, collections.js):
 * SCRIPTABLE_API_PATH's build (a build's dist/cjs/index.js) when set, else this checkout's
 * dist/cjs; and `flag(name, fallback)`, a numeric command-line option.
 */
const path = require('node:path');

const dist = process.env.SCRIPTABLE_API_PATH ? path.dirname(process.env.SCRIPTABLE_API_PATH) : path.join(__dirname, '..', 'dist', 'cjs');
const { QuickJsDriver } = require(path.join(dist, 'runtime', 'worker', 'quickjs-driver.js'));
const { adapterSource } = require(path.join(dist, 'runtime', 'adapter-source.js'));
const { ctxFields, ctxMaps, newResponseState } = require(path.join(dist, 'runtime', 'protocol.js'));
const { prepareScript } = require(path.join(dist, 'runtime', 'worker', 'transpile.js'));

const args = process.argv.slice(2);
const flag = (name, fallback) => (args.includes(name) ? Number(args[args.indexOf(name) + 1]) : fallback);

module.exports = { QuickJsDriver, adapterSource, ctxFields, ctxMaps, newResponseState, prepareScript, args, flag };
