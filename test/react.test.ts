/**
 * perseid/react in a real React render (react-dom on jsdom) against a real
 * server: useSubscribe's loading state, useFind re-rendering on live changes
 * (and not on changes outside its query), a stub's insert shown at once
 * through useMethod, useUser and useStatus following login and the
 * connection, and unmounting stopping the subscription.
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { JSDOM } from 'jsdom';
import { createElement, type ReactNode } from 'react';
import type { Root } from 'react-dom/client';
import { AccountsClient, DDPClient, DDPError, type LocalCollection } from '../src/client/node.js';
import { DDPProvider, useFind, useFindOne, useMethod, useStatus, useSubscribe, useUser } from '../src/react/index.js';
import { accounts } from '../src/accounts/index.js';
import { startServer, type TestServer } from './helpers.js';
import { eventually } from './processes.js';

interface Task {
  _id: string;
  text: string;
  done: boolean;
}

const dom = new JSDOM('<!doctype html><html><body></body></html>');
Object.assign(globalThis, { window: dom.window, document: dom.window.document, IS_REACT_ACT_ENVIRONMENT: false });
if (!('navigator' in globalThis)) Object.assign(globalThis, { navigator: dom.window.navigator });
// react-dom reads the DOM globals when it loads: import it after they are set.
const { createRoot } = await import('react-dom/client');

function mount(client: DDPClient, element: ReactNode): { root: Root; container: HTMLElement } {
  const container = document.createElement('div');
  document.body.append(container);
  const root = createRoot(container);
  root.render(createElement(DDPProvider, { client }, element));
  return { root, container };
}

const text = (container: HTMLElement, selector: string) => container.querySelector(selector)?.textContent ?? '';
const attr = (container: HTMLElement, selector: string, name: string) => container.querySelector(selector)?.getAttribute(name);

describe('perseid/react', () => {
  let t: TestServer;
  let client: DDPClient;
  let other: DDPClient;
  let tasks: LocalCollection<Task>;
  let release: (() => void) | undefined;
  /** While set, the taskByText publication waits for it before it is ready. */
  let held: Promise<void> | undefined;
  const renders = { list: 0 };

  before(async () => {
    t = await startServer(async (server, { collection }) => {
      const Tasks = collection<Task>('tasks');
      await accounts(server).ready;
      server.methods({
        async addTask(text: unknown) {
          if (text === 'slow') await new Promise<void>((resolve) => (release = resolve));
          if (text === 'refused') throw new DDPError(400, 'No thanks');
          return Tasks.insertAsync({ text: String(text), done: false });
        },
        addDone(text: unknown) {
          return Tasks.insertAsync({ text: String(text), done: true });
        },
        setDone(id: unknown) {
          return Tasks.updateAsync(String(id), { $set: { done: true } });
        },
      });
      server.publish('tasks', () => Tasks.find());
      server.publish('taskByText', async (text: unknown) => {
        await held;
        return Tasks.find({ text: String(text) });
      });
    });
    client = new DDPClient(t.url);
    other = new DDPClient(t.url);
    tasks = client.collection<Task>('tasks');
    client.methods({
      addTask(text: string) {
        return tasks.insert({ text, done: false });
      },
    });
  });
  after(async () => {
    client?.disconnect();
    other?.disconnect();
    await t?.close();
  });

  function TaskList({ onlyOpen }: { onlyOpen: boolean }): ReactNode {
    renders.list++;
    const isLoading = useSubscribe('tasks');
    const list = useFind(() => tasks.cursor(onlyOpen ? { done: false } : {}, { sort: { text: 1 } }), [onlyOpen]);
    const add = useMethod<string>('addTask');
    return createElement(
      'section',
      { 'data-loading': String(isLoading()), 'data-pending': String(add.pending), 'data-error': add.error ? String((add.error as DDPError).reason) : '' },
      createElement('button', { onClick: () => add.call('slow').catch(() => undefined) }),
      createElement('ul', null, ...list.map((task) => createElement('li', { key: task._id, id: `t-${task._id}` }, task.text))),
      createElement(Counter, { add: add.call }),
    );
  }

  function Counter({ add }: { add: (text: string) => Promise<unknown> }): ReactNode {
    const first = useFindOne(() => tasks.cursor({}, { sort: { text: 1 } }), []);
    return createElement('p', { className: 'first', onClick: () => void add('refused').catch(() => undefined) }, first?.text ?? 'none');
  }

  it('renders the subscription live, re-renders only for changes to its query, and follows new props', async () => {
    const { root, container } = mount(client, createElement(TaskList, { onlyOpen: true }));
    await eventually(() => attr(container, 'section', 'data-loading') === 'false', 'the subscription ready');
    assert.equal(text(container, 'ul'), '');

    const milk = await other.call<string>('addTask', 'milk');
    await other.call('addTask', 'bread');
    await eventually(() => text(container, 'ul') === 'breadmilk', "another client's tasks on screen");
    assert.equal(text(container, 'p.first'), 'bread');

    await other.call('setDone', milk);
    await eventually(() => text(container, 'ul') === 'bread', 'a done task leaving the open list');

    // A document the query does not select arrives: the list does not render again.
    const before = renders.list;
    await other.call('addDone', 'zzz');
    await eventually(() => tasks.findOne({ text: 'zzz' }) !== undefined, 'the done task in the local copy');
    await new Promise((resolve) => setTimeout(resolve, 50));
    assert.equal(renders.list, before);

    root.render(createElement(DDPProvider, { client }, createElement(TaskList, { onlyOpen: false })));
    await eventually(() => text(container, 'ul') === 'breadmilkzzz', 'all tasks with the new props');
    root.unmount();
  });

  it('is loading again after its parameters change, even back to ones that were ready before', async () => {
    function Picked({ text: picked }: { text: string }): ReactNode {
      const isLoading = useSubscribe('taskByText', picked);
      return createElement('i', { 'data-text': picked, 'data-loading': String(isLoading()) });
    }
    const show = (picked: string) => createElement(DDPProvider, { client }, createElement(Picked, { text: picked }));
    const { root, container } = mount(client, createElement(Picked, { text: 'a' }));
    await eventually(() => attr(container, 'i', 'data-loading') === 'false', "'a' ready");
    let open!: () => void;
    held = new Promise<void>((resolve) => (open = resolve));
    try {
      root.render(show('b'));
      await eventually(() => attr(container, 'i', 'data-text') === 'b', "'b' rendered");
      assert.equal(attr(container, 'i', 'data-loading'), 'true', "'b' is not ready");
      root.render(show('a')); // before 'b' was ready: a new subscription to 'a', held by the server
      await eventually(() => attr(container, 'i', 'data-text') === 'a', "'a' rendered again");
      await new Promise((resolve) => setTimeout(resolve, 50));
      assert.equal(attr(container, 'i', 'data-loading'), 'true', "the new subscription to 'a' is not ready yet");
    } finally {
      open();
      held = undefined;
    }
    await eventually(() => attr(container, 'i', 'data-loading') === 'false', "'a' ready again");
    root.unmount();
  });

  it('is loading again when the provider hands it another client, with the same parameters', async () => {
    function Picked(): ReactNode {
      const isLoading = useSubscribe('taskByText', 'a');
      return createElement('i', { 'data-loading': String(isLoading()) });
    }
    const { root, container } = mount(client, createElement(Picked));
    await eventually(() => attr(container, 'i', 'data-loading') === 'false', "'a' ready on the first client");
    // A client that never connects: its subscription cannot be ready.
    const other = new DDPClient(t.url, { autoConnect: false });
    try {
      root.render(createElement(DDPProvider, { client: other }, createElement(Picked)));
      await new Promise((resolve) => setTimeout(resolve, 50));
      assert.equal(attr(container, 'i', 'data-loading'), 'true', 'the other client has not made it ready');
    } finally {
      root.unmount();
      other.disconnect();
    }
  });

  it("shows a stub's insert at once through useMethod, pending until the server answers", async () => {
    const { root, container } = mount(client, createElement(TaskList, { onlyOpen: false }));
    await eventually(() => attr(container, 'section', 'data-loading') === 'false', 'the subscription ready');
    (container.querySelector('button') as HTMLButtonElement).click();
    await eventually(() => text(container, 'ul').includes('slow'), 'the stub insert on screen');
    assert.equal(attr(container, 'section', 'data-pending'), 'true');
    await eventually(() => release !== undefined, 'the server method waiting');
    release!();
    await eventually(() => attr(container, 'section', 'data-pending') === 'false', 'the call done');
    assert.ok(text(container, 'ul').includes('slow'));

    (container.querySelector('p.first') as HTMLElement).click();
    await eventually(() => attr(container, 'section', 'data-error') === 'No thanks', 'the refused call');
    assert.ok(!text(container, 'ul').includes('refused'), "the refused call's stub insert is undone");
    root.unmount();
    // Unmounted: the subscription stopped, so its documents are gone from the local copy.
    await eventually(() => tasks.size === 0, 'the documents removed after unsubscribing');
  });

  it('follows the logged-in user and the connection status', async () => {
    function Who(): ReactNode {
      const user = useUser();
      const status = useStatus();
      return createElement('span', { 'data-status': status }, user?.username ?? 'anonymous');
    }
    const own = new DDPClient(t.url);
    const { root, container } = mount(own, createElement(Who));
    await eventually(() => attr(container, 'span', 'data-status') === 'connected', 'connected');
    assert.equal(text(container, 'span'), 'anonymous');
    const login = new AccountsClient(own);
    await login.createUser({ username: 'reacher', password: 'pw' });
    await eventually(() => text(container, 'span') === 'reacher', 'the user shown');
    await login.logout();
    await eventually(() => text(container, 'span') === 'anonymous', 'logged out');
    own.disconnect();
    await eventually(() => attr(container, 'span', 'data-status') === 'closed', 'closed');
    root.unmount();
  });

  it("tells a component whose useFind factory returns find()'s array, as Meteor's returns a cursor, to return a cursor", async () => {
    // Written as with react-meteor-data (useFind(() => Tasks.find(...))), it rendered an empty list for good, without a word.
    await client.call('addTask', 'listed');
    function MeteorStyle(): ReactNode {
      const found = useFind(() => tasks.find({}) as unknown as ReturnType<typeof tasks.cursor>, []);
      return createElement('p', null, String(found.length));
    }
    const container = document.createElement('div');
    const errors: unknown[] = [];
    const root = createRoot(container, { onUncaughtError: (error) => errors.push(error) });
    root.render(createElement(DDPProvider, { client }, createElement(MeteorStyle)));
    await eventually(() => errors.length > 0, 'the error');
    assert.match(String(errors[0]), /^TypeError: useFind's factory returned an array: return collection\.cursor\(selector, options\)/);
    root.unmount();
  });

  it('tells a component outside a provider what is missing', () => {
    function Orphan(): ReactNode {
      useStatus();
      return null;
    }
    const container = document.createElement('div');
    const errors: unknown[] = [];
    const root = createRoot(container, { onUncaughtError: (error) => errors.push(error) });
    root.render(createElement(Orphan));
    return eventually(() => errors.length > 0, 'the error').then(() => {
      assert.match(String(errors[0]), /need a DDPProvider/);
      root.unmount();
    });
  });
});
