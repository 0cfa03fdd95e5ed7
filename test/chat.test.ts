/**
 * The chat example in headless Chromium, two users in two browser contexts:
 * B sees A's message; A sees her own message (greyed) before a deliberately
 * delayed server answers; a message the server refuses disappears with the
 * error shown; a reload keeps the login; who is online, unread counts, "load
 * earlier", and the page on a phone-size screen. Needs Chromium (skipped
 * without it, as test/browser.test.ts).
 */
import assert from 'node:assert/strict';
import { existsSync } from 'node:fs';
import { after, before, describe, it } from 'node:test';
import { chromium, type Browser, type BrowserContext, type Page } from 'playwright-core';
import { createChat } from '../examples/chat/app.js';
import { startServer, type TestServer } from './helpers.js';
import { eventually } from './processes.js';

const CHROMIUM = process.env.CHROMIUM_PATH ?? ['/usr/bin/chromium', '/usr/bin/chromium-browser'].find((p) => existsSync(p));
const skip = CHROMIUM ? false : 'Chromium not found: apt-get install chromium, or set CHROMIUM_PATH';
if (skip) console.log(`# SKIPPED chat suite: ${skip}`);

/** Holds the server's sendMessage before it stores anything, while `holding` is on. */
class Hold {
  holding = false;
  private waiting: Array<() => void> = [];
  get count(): number {
    return this.waiting.length;
  }
  pass(): Promise<void> | void {
    if (!this.holding) return;
    return new Promise((resolve) => this.waiting.push(resolve));
  }
  release(): void {
    this.holding = false;
    for (const resolve of this.waiting.splice(0)) resolve();
  }
}

describe('the chat example in headless Chromium', { skip }, () => {
  const hold = new Hold();
  const pageErrors: string[] = [];
  let t: TestServer;
  let browser: Browser;
  const contexts: BrowserContext[] = [];
  let alice: Page;
  let bob: Page;

  async function open(name: string): Promise<Page> {
    const context = await browser.newContext();
    contexts.push(context);
    const page = await context.newPage();
    page.on('pageerror', (error) => pageErrors.push(`${name}: ${error.message}`));
    page.on('console', (message) => {
      if (message.type() === 'error') pageErrors.push(`${name}: ${message.text()}`);
    });
    await page.goto(t.url);
    await page.waitForSelector('#status[data-status="connected"]', { timeout: 10000 });
    return page;
  }

  async function signUp(page: Page, username: string): Promise<void> {
    await page.fill('#username', username);
    await page.fill('#password', 'correct horse');
    await page.click('#sign-up');
    await page.waitForFunction((name) => document.querySelector('#who')?.textContent === name, username);
  }

  async function send(page: Page, text: string): Promise<void> {
    await page.fill('#message', text);
    await page.press('#message', 'Enter');
  }

  const message = (page: Page, text: string) => page.locator('#messages li', { hasText: text });

  before(async () => {
    t = await startServer((server) => createChat({ beforeSend: () => hold.pass() })(server));
    browser = await chromium.launch({
      executablePath: CHROMIUM,
      args: ['--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run', '--disable-background-networking', '--disable-component-update', '--disable-sync'],
    });
    alice = await open('alice');
    bob = await open('bob');
    await signUp(alice, 'alice');
    await signUp(bob, 'bob');
  });

  after(async () => {
    hold.release();
    for (const context of contexts) await context.close();
    await browser?.close();
    await t?.close();
  });

  it("shows A's message to B", async () => {
    await send(alice, 'hello from alice');
    await message(bob, 'hello from alice').waitFor();
    assert.equal(await message(bob, 'hello from alice').locator('.who').textContent(), 'alice');
    await message(alice, 'hello from alice').and(alice.locator('li:not(.pending)')).waitFor();
  });

  it('shows A her own message at once, greyed, while the server holds its answer', async () => {
    hold.holding = true;
    await send(alice, 'wait for it');
    await message(alice, 'wait for it').and(alice.locator('li.pending')).waitFor();
    await eventually(() => hold.count === 1, 'the server holding the message');
    assert.equal(await t.collection('messages').findOneAsync({ text: 'wait for it' }), undefined, 'not stored yet');
    assert.equal(await message(bob, 'wait for it').count(), 0);
    hold.release();
    await message(alice, 'wait for it').and(alice.locator('li:not(.pending)')).waitFor();
    await message(bob, 'wait for it').waitFor();
  });

  it('takes back a message the server refuses, and says why', async () => {
    hold.holding = true;
    await send(alice, 'buy spam now');
    await message(alice, 'buy spam now').and(alice.locator('li.pending')).waitFor();
    await eventually(() => hold.count === 1, 'the server holding the message');
    hold.release();
    await alice.waitForFunction(() => document.querySelector('#error')?.textContent === 'Message refused: it looks like spam');
    await message(alice, 'buy spam now').waitFor({ state: 'detached' });
    assert.equal(await message(bob, 'buy spam now').count(), 0);
  });

  it('shows who is online, and unread counts for the other rooms', async () => {
    await bob.waitForFunction(() => [...document.querySelectorAll('#online li')].map((li) => li.textContent).join() === 'alice,bob').catch(async (error: unknown) => {
      throw new Error(`who is online: ${await bob.locator('#online').innerText()} (expected alice and bob)`, { cause: error });
    });
    await bob.click('#rooms li[data-room="random"] a');
    await bob.waitForSelector('#room-title >> text=# random');
    await send(alice, 'while bob is away');
    await send(alice, 'and again');
    await bob.waitForFunction(() => document.querySelector('#rooms li[data-room="general"] .unread')?.textContent === '2');
    await bob.click('#rooms li[data-room="general"] a');
    await message(bob, 'and again').waitFor();
    await bob.waitForFunction(() => document.querySelector('#rooms li[data-room="general"] .unread') === null);
    // Back in random at once: leaving does not cancel the read (sent after a short debounce), so general ends read and stays so.
    await bob.click('#rooms li[data-room="random"] a');
    await bob.waitForSelector('#room-title >> text=# random');
    const newest = await t.collection('messages').findOneAsync({ text: 'and again' });
    const user = await t.collection('users').findOneAsync({ username: 'bob' });
    await eventually(async () => {
      const read = await t.collection('reads').findOneAsync({ userId: user!._id, room: 'general', at: { $gte: newest!.at } });
      return read !== undefined;
    }, "bob's read of general on the server");
    await bob.waitForFunction(() => document.querySelector('#rooms li[data-room="general"] .unread') === null);
    await new Promise((resolve) => setTimeout(resolve, 200));
    assert.equal(await bob.locator('#rooms li[data-room="general"] .unread').count(), 0);
  });

  it('shows the last 50 messages of a room, and earlier ones on demand', async () => {
    const messages = t.collection('messages');
    for (let i = 0; i < 60; i++) {
      await messages.insertAsync({ group: 'busy', text: `busy ${String(i).padStart(2, '0')}`, user: 'script', username: 'script', at: new Date(Date.now() - (60 - i) * 1000) });
    }
    await alice.goto(`${t.url}#busy`);
    await alice.waitForFunction(() => document.querySelectorAll('#messages li').length === 50);
    assert.equal(await alice.locator('#messages li').first().locator('.text').textContent(), 'busy 10');
    await alice.click('#load-earlier');
    await alice.waitForFunction(() => document.querySelectorAll('#messages li').length === 60);
    assert.equal(await alice.locator('#messages li').first().locator('.text').textContent(), 'busy 00');
    assert.equal(await alice.isVisible('#load-earlier'), false);
  });

  it('shows her own message at once, at the bottom, from a device whose clock is behind the server', async () => {
    const late = await browser.newContext();
    contexts.push(late);
    await late.addInitScript(() => {
      // This device's clock: ten minutes behind.
      const Real = Date;
      const now = () => Real.now() - 10 * 60 * 1000;
      globalThis.Date = class extends Real {
        constructor(...args: unknown[]) {
          if (args.length === 0) super(now());
          else super(...(args as [number]));
        }
        static override now(): number {
          return now();
        }
      } as DateConstructor;
    });
    const page = await late.newPage();
    page.on('pageerror', (error) => pageErrors.push(`late clock: ${error.message}`));
    await page.goto(`${t.url}#busy`); // 60 messages of the last minute (the test before)
    await page.waitForFunction(() => document.querySelectorAll('#messages li').length === 50);
    await signUp(page, 'carol');
    hold.holding = true;
    await send(page, 'from a late clock');
    await message(page, 'from a late clock').and(page.locator('li.pending')).waitFor({ timeout: 5000 });
    assert.equal(await page.locator('#messages li').last().locator('.text').textContent(), 'from a late clock');
    hold.release();
    await message(page, 'from a late clock').and(page.locator('li:not(.pending)')).waitFor();
  });

  it('shows no error when rooms are switched faster than the server answers', async () => {
    await alice.goto(`${t.url}#general`);
    await message(alice, 'hello from alice').waitFor();
    // Two taps within one task: the first room's subscription is stopped before the server can make it ready.
    await alice.evaluate(() => {
      for (const name of ['random', 'general']) {
        location.hash = name;
        window.dispatchEvent(new HashChangeEvent('hashchange'));
      }
    });
    await message(alice, 'hello from alice').waitFor();
    await new Promise((resolve) => setTimeout(resolve, 300));
    assert.equal(await alice.isVisible('#error'), false, `error shown: ${await alice.locator('#error').textContent()}`);
  });

  it('opens general from a link whose room part is not valid percent-encoding', async () => {
    await alice.goto('about:blank'); // a load, not a same-document hash change
    await alice.goto(`${t.url}#50%`);
    await alice.waitForSelector('#room-title >> text=# general', { timeout: 5000 });
    await message(alice, 'hello from alice').waitFor();
  });

  it('keeps the login across a reload', async () => {
    await alice.goto(`${t.url}#general`);
    const loaded = await alice.evaluate(() => performance.timeOrigin);
    // goto to another #room only changes the hash in the same document: reload() loads the page again.
    await alice.reload();
    assert.notEqual(await alice.evaluate(() => performance.timeOrigin), loaded, 'the page was loaded again');
    await alice.waitForFunction(() => document.querySelector('#who')?.textContent === 'alice');
    await message(alice, 'hello from alice').waitFor();
    assert.equal(await alice.isEnabled('#message'), true);
  });

  it('fits a phone-size screen', async () => {
    const phone = await browser.newContext({ viewport: { width: 375, height: 667 }, isMobile: true, hasTouch: true });
    contexts.push(phone);
    const page = await phone.newPage();
    page.on('pageerror', (error) => pageErrors.push(`phone: ${error.message}`));
    await page.goto(`${t.url}#general`);
    await message(page, 'hello from alice').waitFor();
    assert.equal(await page.isVisible('#sidebar'), false, 'the sidebar folds away');
    assert.equal(await page.isVisible('#composer'), true);
    const overflow = await page.evaluate(() => document.documentElement.scrollWidth - window.innerWidth);
    assert.ok(overflow <= 0, `the page is ${overflow}px wider than the screen`);
    await page.click('#menu');
    assert.equal(await page.isVisible('#rooms li[data-room="random"]'), true, 'the Rooms button shows the rooms');
    await page.click('#rooms li[data-room="random"] a');
    await page.waitForSelector('#room-title >> text=# random');
    assert.equal(await page.isVisible('#sidebar'), false, 'choosing a room folds the sidebar again');
  });

  it('ran without errors in the pages', () => {
    assert.deepEqual(pageErrors, []);
  });
});
