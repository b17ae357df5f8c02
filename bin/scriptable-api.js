#!/usr/bin/env node
'use strict';
// `scriptable-api serve <root>`: the standalone server (lib/cli). Run `npm run build` first in a checkout.
require('../dist/cjs/cli/main.js').run();
