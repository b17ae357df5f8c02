'use strict';
/**
 * Large files through the router against plain Express, in one run:
 *
 *   node bench/files.js [--size 1gb] [--rounds 1] [--only download,upload] [--dir /tmp]
 *
 * `--only` takes directions (`download`, `upload`) or one pair (`upload-sandbox`, `download-s3`).
 *
 * Scenarios (each server in its own process; s3rver, the S3-compatible server, in another):
 *   download  express `res.sendFile`                  vs the router's File result `{ path }` (sandbox)
 *   download  express piping the SDK's GetObject body vs the router's File result `{ storagePath }` (S3FileStorage)
 *   upload    express + busboy to a file              vs the router: multipart to a temp file, then `part.save(path)`
 *   upload    express + busboy into lib-storage's Upload vs the router: temp file, then `part.saveStorage(path)` (S3FileStorage)
 *   mirror    express: `fetch(upstream)` piped to a file vs the router: `platform.http.request({ url }).saveBodyAsFile(path)`
 *             (the upstream, in the driver's process, serves the file with its Content-Length)
 *
 * For each: throughput (MiB/s, the whole transfer as the client sees it) and the server's RSS
 * growth (peak during the transfer less the RSS just before it, after a 1 MiB warm-up transfer;
 * VmRSS sampled every 20 ms). Every upload writes a new file; before each transfer the earlier
 * ones are deleted and `sync` flushes what was written;
 * with several rounds, the order of the two servers alternates.
 * The package is loaded from `..` (run `npm run build` first).
 */
const fs = require('node:fs');
const http = require('node:http');
const os = require('node:os');
const path = require('node:path');
const { execFileSync, fork } = require('node:child_process');

const argv = process.argv.slice(2);
const flag = (name, fallback) => {
  const i = argv.indexOf(`--${name}`);
  return i >= 0 ? argv[i + 1] : fallback;
};
const MiB = 1024 * 1024;
const BUCKET = 'bench-files';
const CREDS = { accessKeyId: 'S3RVER', secretAccessKey: 'S3RVER' };

// ---------------------------------------------------------------------------------------------
// child processes: `--s3rver DIR` and `--serve SCENARIO`
// ---------------------------------------------------------------------------------------------

async function runS3rver(dir) {
  const S3rver = require('s3rver');
  const server = new S3rver({ port: 0, address: '127.0.0.1', silent: true, directory: dir, configureBuckets: [{ name: BUCKET }] });
  const { port } = await server.run();
  process.send({ type: 'listening', port });
}

function s3Client(endpoint) {
  const { S3Client } = require('@aws-sdk/client-s3');
  return new S3Client({ region: 'us-east-1', endpoint, forcePathStyle: true, credentials: CREDS, requestChecksumCalculation: 'WHEN_REQUIRED', responseChecksumValidation: 'WHEN_REQUIRED' });
}

async function serve(scenario, dir, endpoint) {
  const express = require('express');
  const app = express();
  const fileOf = (req) => path.join(dir, 'sandbox', 'bench', req.query.small ? 'small.bin' : 'big.bin');
  const { pipeline } = require('node:stream/promises');
  if (scenario.startsWith('express')) {
    const busboy = require('busboy');
    if (scenario === 'express-download') app.get('/f', (req, res) => res.sendFile(fileOf(req)));
    if (scenario === 'express-mirror') {
      const { Readable } = require('node:stream');
      app.get('/f', async (req, res) => {
        const r = await fetch(req.query.url);
        await pipeline(Readable.fromWeb(r.body), fs.createWriteStream(path.join(dir, 'out', `baseline-mirror-${Date.now()}.bin`)));
        res.json({ ok: true });
      });
    }
    if (scenario === 'express-s3-download') {
      const { GetObjectCommand } = require('@aws-sdk/client-s3');
      const client = s3Client(endpoint);
      app.get('/f', async (req, res) => {
        const out = await client.send(new GetObjectCommand({ Bucket: BUCKET, Key: `bench/${path.basename(fileOf(req))}` }));
        res.setHeader('Content-Length', out.ContentLength);
        await pipeline(out.Body, res);
      });
    }
    if (scenario === 'express-upload' || scenario === 'express-s3-upload') {
      const { Upload } = require('@aws-sdk/lib-storage');
      const client = scenario === 'express-s3-upload' ? s3Client(endpoint) : null;
      app.post('/f', (req, res) => {
        const bb = busboy({ headers: req.headers });
        const done = [];
        bb.on('file', (name, stream) => {
          done.push(
            client
              ? new Upload({ client, params: { Bucket: BUCKET, Key: 'bench/baseline-up.bin', Body: stream }, partSize: 5 * MiB, queueSize: 4 }).done()
              : pipeline(stream, fs.createWriteStream(path.join(dir, 'out', `baseline-up-${Date.now()}.bin`))),
          );
        });
        bb.on('close', () => Promise.all(done).then(() => res.json({ ok: true }), (e) => res.status(500).json({ error: String(e) })));
        req.pipe(bb);
      });
    }
  } else {
    const { createApiRouter, MemoryRegistry, S3FileStorage } = require('..');
    const s3 = scenario.includes('s3') ? new S3FileStorage({ bucket: BUCKET, endpoint, forcePathStyle: true, credentials: CREDS }) : undefined;
    const registry = new MemoryRegistry({
      apps: {
        bench: {
          scripts: {
            'f.js': `export function down(ctx) { return { ${s3 ? 'storagePath' : 'path'}: ctx.query.small ? 'small.bin' : 'big.bin' } }
              export function mirror(ctx) { return platform.http.request({ url: ctx.query.url }).saveBodyAsFile('out/router-mirror-' + Date.now() + '.bin') }
              export function up(ctx) { const p = ctx.getParts()[0]; return ${s3 ? "p.saveStorage('router-up.bin')" : "p.save('out/router-up-' + Date.now() + '.bin')"} }`,
          },
          apis: [
            { path: 'down', call: { script: 'f.js', function: 'down' }, returnType: 'File' },
            { path: 'up', call: { script: 'f.js', function: 'up' }, returnType: 'JSON' },
            { path: 'mirror', call: { script: 'f.js', function: 'mirror' }, returnType: 'JSON' },
          ],
        },
      },
    });
    const outbound = { allowPrivateNetworks: true, maxBodyBytes: 8 * 1024 * MiB, timeoutMs: 600_000 };
    const router = createApiRouter({ registry, workers: 1, logger: false, sandboxDir: path.join(dir, 'sandbox'), storage: s3, upload: { tmpDir: dir, fileSize: '2gb' }, scriptTimeoutMs: 600_000, outbound });
    app.get('/f', (req, res, next) => ((req.url = req.url.replace('/f', scenario === 'router-mirror' ? '/bench/mirror' : '/bench/down')), router(req, res, next)));
    app.post('/f', (req, res, next) => ((req.url = req.url.replace('/f', '/bench/up')), router(req, res, next)));
  }
  const server = app.listen(0, '127.0.0.1', () => process.send({ type: 'listening', port: server.address().port }));
}

// ---------------------------------------------------------------------------------------------
// the driver
// ---------------------------------------------------------------------------------------------

function start(args) {
  const child = fork(__filename, args, { stdio: ['ignore', 'inherit', 'inherit', 'ipc'] });
  return new Promise((resolve, reject) => {
    child.once('message', (m) => resolve({ child, port: m.port }));
    child.once('exit', (code) => reject(new Error(`${args.join(' ')} exited (${code})`)));
  });
}

function rssOf(pid) {
  const m = /VmRSS:\s+(\d+) kB/.exec(fs.readFileSync(`/proc/${pid}/status`, 'utf8'));
  return m ? Number(m[1]) * 1024 : 0;
}

/** Runs `transfer` while sampling the server's RSS: { seconds, growth }. */
async function measure(pid, transfer) {
  const before = rssOf(pid);
  let peak = before;
  const timer = setInterval(() => (peak = Math.max(peak, rssOf(pid))), 20);
  const t0 = process.hrtime.bigint();
  try {
    await transfer();
  } finally {
    clearInterval(timer);
  }
  peak = Math.max(peak, rssOf(pid));
  return { seconds: Number(process.hrtime.bigint() - t0) / 1e9, growth: peak - before, before };
}

function download(port, size, small = false) {
  return new Promise((resolve, reject) => {
    http.get({ host: '127.0.0.1', port, path: small ? '/f?small=1' : '/f' }, (res) => {
      let got = 0;
      res.on('data', (c) => (got += c.length));
      res.on('end', () => (res.statusCode === 200 && got === size ? resolve() : reject(new Error(`download: ${res.statusCode}, ${got} of ${size} bytes`))));
    }).on('error', reject);
  });
}

/** GET /f?url= of a mirror server: it saves the file at `url` and answers 200 once saved. */
function mirror(port, url) {
  return new Promise((resolve, reject) => {
    http.get({ host: '127.0.0.1', port, path: `/f?url=${encodeURIComponent(url)}` }, (res) => {
      let text = '';
      res.on('data', (c) => (text += c));
      res.on('end', () => (res.statusCode === 200 ? resolve() : reject(new Error(`mirror: ${res.statusCode} ${text}`))));
    }).on('error', reject);
  });
}

function upload(port, file, size) {
  const boundary = 'benchBoundary0123456789';
  const head = Buffer.from(`--${boundary}\r\nContent-Disposition: form-data; name="f"; filename="big.bin"\r\nContent-Type: application/octet-stream\r\n\r\n`);
  const tail = Buffer.from(`\r\n--${boundary}--\r\n`);
  return new Promise((resolve, reject) => {
    const req = http.request(
      { host: '127.0.0.1', port, path: '/f', method: 'POST', headers: { 'content-type': `multipart/form-data; boundary=${boundary}`, 'content-length': head.length + size + tail.length } },
      (res) => {
        let text = '';
        res.on('data', (c) => (text += c));
        res.on('end', () => (res.statusCode === 200 ? resolve() : reject(new Error(`upload: ${res.statusCode} ${text}`))));
      },
    );
    req.on('error', reject);
    req.write(head);
    const src = fs.createReadStream(file, { highWaterMark: MiB });
    src.pipe(req, { end: false });
    src.on('end', () => req.end(tail));
  });
}

async function main() {
  const { parseSize } = require('../dist/cjs/validations.js');
  const size = parseSize(flag('size', '1gb'), '--size');
  const rounds = Number(flag('rounds', '1'));
  const only = flag('only', 'download,upload,mirror').split(',');
  const dir = fs.mkdtempSync(path.join(flag('dir', os.tmpdir()), 'sapi-bench-files-'));
  const file = path.join(dir, 'sandbox', 'bench', 'big.bin');
  fs.mkdirSync(path.dirname(file), { recursive: true });
  for (const d of [path.join(dir, 'out'), path.join(dir, 'sandbox', 'bench', 'out')]) fs.mkdirSync(d, { recursive: true });
  const block = require('node:crypto').randomBytes(MiB);
  const fd = fs.openSync(file, 'w');
  for (let done = 0; done < size; done += MiB) fs.writeSync(fd, block, 0, Math.min(MiB, size - done));
  fs.closeSync(fd);
  const small = path.join(path.dirname(file), 'small.bin');
  fs.writeFileSync(small, block);

  const s3dir = path.join(dir, 's3');
  fs.mkdirSync(s3dir);
  const s3 = await start(['--s3rver', s3dir]);
  const endpoint = `http://127.0.0.1:${s3.port}`;
  const { S3FileStorage } = require('..');
  const seed = new S3FileStorage({ bucket: BUCKET, endpoint, forcePathStyle: true, credentials: CREDS });
  await seed.put('bench', 'big.bin', fs.createReadStream(file), {});
  await seed.put('bench', 'small.bin', fs.createReadStream(small), {});
  seed.destroy();
  // the upstream the mirror servers save from: the file (or, ?small=1, the small one) with its length
  const upstream = http.createServer((req, res) => {
    const f = req.url.includes('small') ? small : file;
    res.writeHead(200, { 'content-type': 'application/octet-stream', 'content-length': fs.statSync(f).size });
    fs.createReadStream(f, { highWaterMark: MiB }).pipe(res);
  });
  await new Promise((resolve) => upstream.listen(0, '127.0.0.1', resolve));
  const upstreamUrl = `http://127.0.0.1:${upstream.address().port}/f`;

  const pairs = [
    ['download', 'sandbox', 'express-download', 'router-download'],
    ['download', 'S3', 'express-s3-download', 'router-s3-download'],
    ['upload', 'sandbox', 'express-upload', 'router-upload'],
    ['upload', 'S3', 'express-s3-upload', 'router-s3-upload'],
    ['mirror', 'sandbox', 'express-mirror', 'router-mirror'],
  ].filter((p) => only.includes(p[0]) || only.includes(`${p[0]}-${p[1].toLowerCase()}`));
  console.log(`${(size / MiB).toFixed(0)} MiB file, ${rounds} round(s), node ${process.version}, ${os.cpus().length} CPUs\n`);
  console.log('direction  store    server    MiB/s   RSS growth (MiB)');
  const rows = [];
  try {
    for (const [direction, store, ...configs] of pairs) {
      const results = {};
      for (let r = 0; r < rounds; r++) {
        // alternate which goes first, so neither always follows the other's disk writes
        for (const config of r % 2 === 0 ? configs : [...configs].reverse()) {
          const srv = await start(['--serve', config, dir, endpoint]);
          try {
            // warm-up: one 1 MiB transfer (workers started, script compiled, connections made)
            const transfer = (warm) => (direction === 'download' ? download(srv.port, warm ? MiB : size, warm) : direction === 'mirror' ? mirror(srv.port, `${upstreamUrl}${warm ? '?small=1' : ''}`) : upload(srv.port, warm ? small : file, warm ? MiB : size));
            await transfer(true);
            // every upload writes a new file (replacing one makes ext4 flush the new one at once:
            // auto_da_alloc); earlier ones are deleted, and their written pages go to disk, now
            for (const d of [path.join(dir, 'out'), path.join(dir, 'sandbox', 'bench', 'out')]) {
              fs.rmSync(d, { recursive: true, force: true });
              fs.mkdirSync(d, { recursive: true });
            }
            execFileSync('sync');
            const m = await measure(srv.child.pid, () => transfer(false));
            (results[config] ??= []).push(m);
          } finally {
            srv.child.kill();
          }
        }
      }
      const med = (xs) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];
      const [base, router] = configs.map((c) => ({ mibs: med(results[c].map((m) => size / MiB / m.seconds)), growth: Math.max(...results[c].map((m) => m.growth)) / MiB }));
      for (const [name, v, c] of [['express', base, configs[0]], ['router', router, configs[1]]]) {
        const each = rounds > 1 ? `   rounds: ${results[c].map((m) => (size / MiB / m.seconds).toFixed(0)).join(', ')}` : '';
        console.log(`${direction.padEnd(10)} ${store.padEnd(8)} ${name.padEnd(8)} ${v.mibs.toFixed(0).padStart(6)}   ${v.growth.toFixed(1).padStart(6)}${each}`);
      }
      rows.push({ direction, store, ratio: router.mibs / base.mibs, growth: router.growth });
    }
  } finally {
    s3.child.kill();
    upstream.close();
    fs.rmSync(dir, { recursive: true, force: true });
  }
  console.log('\nrouter / express throughput (target >= 0.9) and the router\'s RSS growth (target < 64 MiB):');
  for (const r of rows) console.log(`  ${r.direction} ${r.store}: ${r.ratio.toFixed(2)}x, ${r.growth.toFixed(1)} MiB`);
}

if (argv[0] === '--s3rver') runS3rver(argv[1]);
else if (argv[0] === '--serve') serve(argv[1], argv[2], argv[3]);
else main().catch((e) => {
  console.error(e);
  process.exit(1);
});
