/**
 * The chat template's page (templates/chat, what `perseid create --template chat` makes) in headless
 * Chromium: a room from the address, a message sent and shown. Needs Chromium (skipped without it).
 */
import assert from 'node:assert/strict';
import { existsSync } from 'node:fs';
import { after, before, describe, it } from 'node:test';
import { chromium, type Browser } from 'playwright-core';
import type { PerseidServer } from '../src/server/app.js';
import { startServer, type TestServer } from './helpers.js';

const CHROMIUM = process.env.CHROMIUM_PATH ?? ['/usr/bin/chromium', '/usr/bin/chromium-browser'].find((p) => existsSync(p));
const skip = CHROMIUM ? false : 'Chromium not found: apt-get install chromium, or set CHROMIUM_PATH';

describe("the chat template's page in headless Chromium", { skip }, () => {
  let t: TestServer;
  let browser: Browser;

  before(async () => {
    // The template is plain JavaScript, not compiled: loaded from the checkout, as a created app loads it.
    const { default: app } = (await import(new URL('../../templates/chat/app.js', import.meta.url).href)) as { default: (server: PerseidServer) => Promise<void> };
    t = await startServer((server) => app(server));
    browser = await chromium.launch({ executablePath: CHROMIUM, args: ['--no-sandbox', '--disable-gpu', '--no-first-run', '--disable-background-networking'] });
  });
  after(async () => {
    await browser?.close();
    await t?.close();
  });

  it('opens the lobby from a link whose room part is not valid percent-encoding, and sends there', async () => {
    const page = await browser.newPage();
    const errors: string[] = [];
    page.on('pageerror', (error) => errors.push(error.message));
    await page.goto(`${t.url}#50%`);
    await page.waitForSelector('#status[data-status="connected"]', { timeout: 10000 });
    assert.equal(await page.textContent('#room'), 'lobby');
    await page.fill('#author', 'ada');
    await page.fill('#text', 'hello from a bad link');
    await page.click('#send button');
    await page.locator('#messages li', { hasText: 'hello from a bad link' }).waitFor({ timeout: 5000 });
    assert.deepEqual(errors, []);
  });
});
