'use strict';
// File responses in a real browser: Debian's Chromium, headless, driven by playwright-core.
// An `attachment` downloads under its UTF-8 name with the right bytes; an `inline` PDF or image
// is displayed, not downloaded. Runs when /usr/bin/chromium exists (CI installs it: .ci/run).
const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');
const crypto = require('node:crypto');
const { oneApi } = require('./helpers/app');

const CHROMIUM = '/usr/bin/chromium';
const FLAGS = ['--headless', '--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run', '--disable-background-networking', '--disable-component-update', '--disable-sync'];

const PNG = Buffer.from('iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg==', 'base64');
const PDF = Buffer.from(
  '%PDF-1.4\n1 0 obj<</Type/Catalog/Pages 2 0 R>>endobj\n2 0 obj<</Type/Pages/Kids[3 0 R]/Count 1>>endobj\n' +
    '3 0 obj<</Type/Page/MediaBox[0 0 200 200]/Parent 2 0 R>>endobj\ntrailer<</Root 1 0 R>>\n%%EOF\n',
);

/** The browser tests need Debian's Chromium (.ci/run installs it): without it they fail, saying so. */
function describeBrowser(name, fn) {
  if (fs.existsSync(CHROMIUM)) return describe(name, fn);
  return describe(name, () => {
    test('chromium is installed', () => {
      throw new Error(`${CHROMIUM} is missing: the browser tests need it (apt-get install -y --no-install-recommends chromium)`);
    });
  });
}

describeBrowser('File responses in Chromium', () => {
  const root = fs.mkdtempSync(path.join(os.tmpdir(), 'sapi-browser-'));
  const sandboxDir = path.join(root, 'sandbox');
  const storageDir = path.join(root, 'storage');
  const report = crypto.randomBytes(200_000);
  fs.mkdirSync(path.join(sandboxDir, 'app1', 'docs'), { recursive: true });
  fs.mkdirSync(path.join(storageDir, 'app1', 'reports'), { recursive: true });
  fs.writeFileSync(path.join(storageDir, 'app1', 'reports', 'r.bin'), report);
  fs.writeFileSync(path.join(sandboxDir, 'app1', 'docs', 'doc.pdf'), PDF);
  fs.writeFileSync(path.join(sandboxDir, 'app1', 'docs', 'dot.png'), PNG);

  const { app, router } = oneApi(`export function fn(ctx) { return JSON.parse(ctx.query.r) }`, { returnType: 'File' }, { sandboxDir, storageDir });
  let server;
  let base;
  let context;
  beforeAll(async () => {
    await new Promise((r) => (server = app.listen(0, '127.0.0.1', r)));
    base = `http://127.0.0.1:${server.address().port}/web0/api/app1/p?r=`;
    const { chromium } = require('playwright-core');
    context = await chromium.launchPersistentContext(path.join(root, 'profile'), {
      executablePath: CHROMIUM,
      headless: true,
      acceptDownloads: true,
      args: FLAGS,
    });
  }, 60_000);
  afterAll(async () => {
    await context?.close();
    server?.closeAllConnections?.();
    await new Promise((r) => (server ? server.close(r) : r()));
    await router.close();
    fs.rmSync(root, { recursive: true, force: true });
  });
  const url = (file) => base + encodeURIComponent(JSON.stringify(file));

  test('an attachment downloads under its UTF-8 name with the right bytes', async () => {
    const page = await context.newPage();
    try {
      const [download] = await Promise.all([
        page.waitForEvent('download'),
        page.goto(url({ storagePath: 'reports/r.bin', name: '报告 2026.pdf' })).catch(() => undefined), // ("Download is starting")
      ]);
      expect(download.suggestedFilename()).toBe('报告 2026.pdf');
      const saved = fs.readFileSync(await download.path());
      expect(Buffer.compare(saved, report)).toBe(0);
    } finally {
      await page.close();
    }
  }, 60_000);

  test('an inline PDF is displayed, not downloaded', async () => {
    const page = await context.newPage();
    const downloads = [];
    page.on('download', (d) => downloads.push(d));
    try {
      // (a download would make goto fail with "Download is starting")
      const res = await page.goto(url({ path: 'docs/doc.pdf', contentDisposition: 'inline' }));
      expect(res.status()).toBe(200);
      expect(await page.evaluate(() => document.contentType)).toBe('application/pdf');
      expect(downloads).toHaveLength(0);
    } finally {
      await page.close();
    }
  }, 60_000);

  test('an inline image is displayed, not downloaded', async () => {
    const page = await context.newPage();
    const downloads = [];
    page.on('download', (d) => downloads.push(d));
    try {
      const res = await page.goto(url({ path: 'docs/dot.png', name: 'picture 图.png', contentDisposition: 'inline' }));
      expect(res.headers()['content-type']).toBe('image/png');
      expect(await page.evaluate(() => [document.contentType, document.images.length, document.images[0]?.naturalWidth])).toEqual(['image/png', 1, 1]);
      expect(downloads).toHaveLength(0);
    } finally {
      await page.close();
    }
  }, 60_000);
});
