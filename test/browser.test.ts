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
import type * as BrowserClient from '../src/client/index.js';
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

  it('starts with an empty state and no "remove all yours"', async () => {
    await page.waitForFunction(() => document.querySelector('#summary')?.textContent === '0 tasks, 0 yours');
    assert.equal(await page.isVisible('#empty'), true);
    assert.equal(await page.isVisible('#clear'), false);
  });

  it('adds a task from the form and shows it live, counted in the singular', async () => {
    await page.fill('#description', 'Written in the browser');
    await page.click('#add button[type="submit"]');
    await page.waitForSelector('li.mine >> text=Written in the browser');
    await page.waitForFunction(() => document.querySelector('#summary')?.textContent === '1 task, 1 yours');
    assert.equal(await page.isVisible('#empty'), false);
    assert.equal(await page.isVisible('#clear'), true);
    assert.equal(await page.textContent('li.mine .by'), 'anonymous');
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
      await page.waitForFunction(() => document.querySelector('#summary')?.textContent?.endsWith(', 0 yours'));
      assert.equal(await page.locator('li').count(), 1, "only the Node client's task is left");
      assert.equal(await page.isVisible('#clear'), false, 'nothing of yours left to remove');
    } finally {
      client.disconnect();
    }
  });

  it('signs up, shows who added a task, stays signed in across a reload, logs out and in again', async () => {
    await page.fill('#username', 'pagetester');
    await page.fill('#password', 'correct horse');
    await page.click('#sign-up');
    await page.waitForSelector('#signed-in:not([hidden])');
    await page.waitForFunction(() => document.querySelector('#who')?.textContent === 'pagetester');
    await page.fill('#description', 'Signed-in task');
    await page.click('#add button[type="submit"]');
    await page.waitForSelector('li >> text=Signed-in task');
    await page.waitForFunction(() => [...document.querySelectorAll('li .by')].some((el) => el.textContent === 'by pagetester'));
    const user = await t.database.driver.collection('users').find({ collection: 'users', selector: { username: 'pagetester' } });
    assert.match(String((user.docs[0] as { services: { password: { bcrypt: string } } }).services.password.bcrypt), /^\$2[ab]\$10\$/);

    await page.reload();
    await page.waitForFunction(() => document.querySelector('#who')?.textContent === 'pagetester', undefined, { timeout: 10000 });

    await page.click('#log-out');
    await page.waitForSelector('#login:not([hidden])');
    await page.fill('#username', 'pagetester');
    await page.fill('#password', 'wrong');
    await page.click('#log-in');
    await page.waitForFunction(() => document.querySelector('#account-error')?.textContent === 'Something went wrong. Please check your credentials.');
    await page.fill('#password', 'correct horse');
    await page.click('#log-in');
    await page.waitForFunction(() => document.querySelector('#who')?.textContent === 'pagetester');
  });

  it('shows a task added while offline as pending until the server has it', async () => {
    await page.evaluate(() => {
      // Hold the socket's outgoing frames, as a dead network would.
      const proto = WebSocket.prototype as WebSocket & { heldSend?: typeof WebSocket.prototype.send };
      proto.heldSend = proto.send;
      (window as unknown as { held: unknown[] }).held = [];
      proto.send = function (data) {
        (window as unknown as { held: Array<[WebSocket, unknown]> }).held.push([this, data]);
      };
    });
    await page.fill('#description', 'Added offline');
    await page.click('#add button[type="submit"]');
    await page.waitForSelector('li.pending >> text=Added offline');
    await page.evaluate(() => {
      const proto = WebSocket.prototype as WebSocket & { heldSend?: typeof WebSocket.prototype.send };
      proto.send = proto.heldSend!;
      for (const [socket, data] of (window as unknown as { held: Array<[WebSocket, string]> }).held) socket.send(data);
    });
    await page.waitForSelector('li:not(.pending) >> text=Added offline');
    assert.equal(await page.locator('li.pending').count(), 0);
  });

  it("runs a Meteor 3 async stub with the browser build: its write after awaiting the local copy shows before the server's answer", async () => {
    const outcome = await page.evaluate(async () => {
      const { DDPClient } = (await import('/perseid/client.js' as string)) as typeof BrowserClient;
      const client = new DDPClient(location.origin, { hotCodePush: false });
      try {
        const tasks = client.collection<{ _id: string; description: string }>('taskCollection');
        client.methods({
          async removeTask({ taskId }: { taskId: string }) {
            const task = await tasks.findOneAsync(taskId);
            if (task) await tasks.removeAsync(task._id);
          },
        });
        await client.subscribe('fetchTasks').ready;
        const id = await client.call<string>('insertTask', { description: 'async stub in the page', sessionId: 'page' });
        const removing = client.callAsync('removeTask', { taskId: id });
        await removing.stubPromise;
        const goneAtOnce = tasks.findOne(id) === undefined;
        const answeredBefore = await Promise.race([removing.then(() => true), Promise.resolve(false)]);
        await removing;
        return { goneAtOnce, answeredBefore, goneAfter: tasks.findOne(id) === undefined };
      } finally {
        client.disconnect();
      }
    });
    assert.deepEqual(outcome, { goneAtOnce: true, answeredBefore: false, goneAfter: true });
  });

  it('ran without errors in the page', () => {
    assert.deepEqual(pageErrors, []);
  });
});
