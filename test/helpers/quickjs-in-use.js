'use strict';
/**
 * QuickJS's count of the bytes the runtime of `context` (a driver's context) holds:
 * memory_used_size, which grows with what reference counting left for the cycle collection and
 * drops when that collection runs.
 */
function inUse(context) {
  const usage = context.ctx.runtime.computeMemoryUsage();
  try {
    return context.ctx.dump(usage).memory_used_size;
  } finally {
    usage.dispose();
  }
}

module.exports = { inUse };
