/**
 * The tasks page in a real headless Chromium: it connects with the browser
 * build of the client, shows tasks live, and its buttons call the methods.
 * Needs Chromium (Debian's `chromium` package; `.ci/run` installs it);
 * without it the suite is skipped and says so.
 */
import assert from 'node:assert/strict';
import { existsSync } from 'node:fs';
import { after, before, describe, it } from 'node:test';
import { chromium, type Browser, type Page } from 'playwright-core';
import tasksApp from '../examples/tasks/app.js';
import { DDPClient } from '../src/client/node.js';
import { startServer, type TestServer } from './helpers.js';
import { needs } from './skips.js';

const CHROMIUM = process.env.CHROMIUM_PATH ?? ['/usr/bin/chromium', '/usr/bin/chromium-browser'].find((p) => existsSync(p));
const skip = CHROMIUM ? false : needs('Chromium', 'apt-get install chromium (or set CHROMIUM_PATH)');

describe('the tasks page in headless Chromium', { skip }, () => {
  let t: TestServer;
  let browser: Browser;
  let page: Page;
  const pageErrors: string[] = [];

  before(async () => {
    t = await startServer((server) => tasksApp(server));
    browser = await chromium.launch({
      executablePath: CHROMIUM,
      args: ['--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run', '--disable-background-networking', '--disable-component-update', '--disable-sync'],
    });
    page = await browser.newPage();
    page.on('pageerror', (error) => pageErrors.push(error.message));
    page.on('console', (message) => {
      if (message.type() === 'error') pageErrors.push(message.text());
    });
    await page.goto(t.url);
    await page.waitForSelector('#status[data-status="connected"]', { timeout: 10000 });
  });

  after(async () => {
    await browser?.close();
    await t?.close();
  });

  it('adds a task from the form and shows it live', async () => {
    await page.fill('#description', 'Written in the browser');
    await page.click('button[type="submit"]');
    await page.waitForSelector('li.mine >> text=Written in the browser');
    assert.equal(await page.textContent('#mine'), '1');
  });

  it('shows tasks other clients add and remove, and its Remove button works', async () => {
    const client = new DDPClient(t.url);
    try {
      const tasks = client.collection('taskCollection');
      await client.subscribe('fetchTasks').ready;
      const id = await client.call<string>('insertTask', { description: 'From a Node client', sessionId: 'node' });
      const row = page.locator(`li[data-id="${id}"]`);
      await row.waitFor();
      assert.equal(await row.evaluate((el) => el.classList.contains('mine')), false, "another client's task is not marked as mine");

      await row.locator('button').click();
      await row.waitFor({ state: 'detached' });
      for (let i = 0; i < 100 && tasks.findOne(id); i++) await new Promise((r) => setTimeout(r, 20));
      assert.equal(tasks.findOne(id), undefined, 'the Node client saw the removal too');

      await client.call('insertTask', { description: 'another', sessionId: 'node' });
      await page.click('#clear');
      await page.waitForFunction(() => document.querySelector('#mine')?.textContent === '0');
      assert.equal(await page.locator('li').count(), 1, "only the Node client's task is left");
    } finally {
      client.disconnect();
    }
  });

  it('ran without errors in the page', () => {
    assert.deepEqual(pageErrors, []);
  });
});
