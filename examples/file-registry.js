'use strict';
/**
 * A registry that reads apps from a folder — an example of writing your own ApiRegistry.
 *
 *   <root>/<appId>/apis.json        [ApiDefinition, ...]
 *   <root>/<appId>/scripts/<name>   ES module sources (.js or .ts)
 *
 * Definitions are validated when loaded (a bad file fails at startup, naming the field);
 * scripts are read on each request, so editing a script is live without a restart.
 */
const fs = require('node:fs');
const path = require('node:path');
const { validateApiDefinition } = require('scriptable-api');

class FileRegistry {
  constructor(root) {
    this.root = root;
    this.apps = new Map();
    for (const appId of fs.readdirSync(root)) {
      const file = path.join(root, appId, 'apis.json');
      if (!fs.existsSync(file)) continue;
      const apis = JSON.parse(fs.readFileSync(file, 'utf8')).map((def, i) => validateApiDefinition(def, `${appId}/apis.json[${i}]`));
      this.apps.set(appId, new Map(apis.map((def) => [def.path, def])));
    }
  }

  getApi(appId, apiPath) {
    return this.apps.get(appId)?.get(apiPath);
  }

  async getScript(appId, name) {
    if (!this.apps.has(appId) || name.includes('/') || name.includes('..')) return undefined;
    return fs.promises.readFile(path.join(this.root, appId, 'scripts', name), 'utf8').catch(() => undefined);
  }
}

module.exports = { FileRegistry };
