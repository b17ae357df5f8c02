'use strict';
// A real S3-compatible HTTP server (s3rver, files in a temp folder) on a free loopback port.
//
//   const s3 = await startS3();   // { endpoint, bucket, dir, storage(opts), client(), stop() }
const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');
const S3rver = require('s3rver');

async function startS3(bucket = 'sapi-test') {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'sapi-s3-'));
  const server = new S3rver({ port: 0, address: '127.0.0.1', silent: true, directory: dir, configureBuckets: [{ name: bucket }] });
  const { port } = await server.run();
  const endpoint = `http://127.0.0.1:${port}`;
  const settings = { bucket, endpoint, forcePathStyle: true, credentials: { accessKeyId: 'S3RVER', secretAccessKey: 'S3RVER' } };
  const made = [];
  return {
    endpoint,
    bucket,
    dir,
    settings,
    /** A new S3FileStorage on this server (closed by stop()). */
    storage(opts = {}) {
      const { S3FileStorage } = require('../..');
      const s = new S3FileStorage({ ...settings, ...opts });
      made.push(s);
      return s;
    },
    async stop() {
      for (const s of made) s.destroy();
      await server.close();
      fs.rmSync(dir, { recursive: true, force: true });
    },
  };
}

module.exports = { startS3 };
