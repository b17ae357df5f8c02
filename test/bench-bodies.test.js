'use strict';
// bench/bodies.js: both workloads answer 200 on Express and on the router (it exits 1 otherwise)
// and it prints one row per workload and server.
const { execFileSync } = require('node:child_process');
const path = require('node:path');

test('bench/bodies.js runs count and proxy on Express and on the router', () => {
  const out = execFileSync(process.execPath, [path.join(__dirname, '..', 'bench', 'bodies.js'), '--size', '64kb', '--requests', '2', '--rounds', '1'], { encoding: 'utf8', timeout: 60_000 });
  for (const workload of ['count', 'proxy']) {
    for (const server of ['express', 'router']) expect(out).toMatch(new RegExp(`^${workload} +${server} +\\d+\\.\\d +\\d+\\.\\d$`, 'm'));
  }
});
