'use strict';
// Preloaded (node -r) into a child process, and so into each of its worker threads: Date.now steps
// by an offset from a monotonic instant the main thread names (jumpClock), as an NTP step, a VM
// resume or an operator fixing the date moves the wall clock under a running process. Every thread
// sees the step at the same instant (process.hrtime is one clock for all threads).
const { BroadcastChannel, isMainThread } = require('node:worker_threads');

const realNow = Date.now;
const mono = () => Number(process.hrtime.bigint()) / 1e6;
let at = Infinity;
let offset = 0;
Date.now = () => realNow() + (mono() >= at ? offset : 0);

const channel = new BroadcastChannel('scriptable-api-clock-jump');
channel.unref();
if (!isMainThread) {
  channel.onmessage = ({ data }) => {
    at = data.at;
    offset = data.offset;
    channel.postMessage('ack');
  };
} else {
  /** The wall clock of every thread steps by `by` ms `inMs` from now; resolves once `threads` worker threads know. */
  global.jumpClock = (by, inMs, threads) =>
    new Promise((resolve) => {
      at = mono() + inMs;
      offset = by;
      let acks = 0;
      channel.ref(); // (idle workers hold no event loop: the acks do, until they are all in)
      channel.onmessage = () => {
        if (++acks === threads) {
          channel.unref();
          resolve();
        }
      };
      channel.postMessage({ at, offset });
      if (threads === 0) resolve();
    });
}
