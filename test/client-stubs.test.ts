/**
 * Method stubs and latency compensation against a real server whose methods
 * wait at a gate the test opens: the stub's insert is on screen at once with
 * the `_id` the server then gives it, a refused call's writes are undone, a
 * different server write wins, the server's messages for a document a pending
 * stub wrote wait for the call's `updated` while other documents flow; calls
 * made while disconnected go out in order on reconnect, and `wait` calls hold
 * the ones after them.
 */
import assert from 'node:assert/strict';
import { after, afterEach, before, beforeEach, describe, it } from 'node:test';
import { DDPClient, DDPError, type LocalCollection, type StubInvocation } from '../src/client/node.js';
import type { Collection } from '../src/collections/collection.js';
import { startServer, type TestServer } from './helpers.js';
import { eventually } from './processes.js';

interface Task {
  _id: string;
  text: string;
  done: boolean;
  by?: string;
}

/** Promises the server's methods wait on until the test opens them. */
class Gates {
  private waiting: Array<() => void> = [];
  get count(): number {
    return this.waiting.length;
  }
  pass(): Promise<void> {
    return new Promise((resolve) => this.waiting.push(resolve));
  }
  open(): void {
    for (const resolve of this.waiting.splice(0)) resolve();
  }
}

function stubsFor(tasks: LocalCollection<Task>) {
  return {
    addTask(this: StubInvocation, text: string) {
      return tasks.insert({ text, done: false });
    },
    rename(id: string, text: string) {
      tasks.update(id, { $set: { text } });
    },
    addTwo(this: StubInvocation, text: string) {
      tasks.insert({ text: `${text} 1`, done: false });
      tasks.insert({ text: `${text} 2`, done: false });
    },
    removeTask(id: string | undefined) {
      tasks.remove(id!);
    },
    markThenAdd(this: StubInvocation, text: string) {
      tasks.update({ text }, { $set: { done: true } }, { upsert: true });
      return tasks.insert({ text: `after ${text}`, done: false });
    },
    broken() {
      tasks.insert({ text: 'half', done: false });
      throw new Error('the stub failed');
    },
  };
}

describe('method stubs and latency compensation', () => {
  const gates = new Gates();
  const started: string[] = [];
  let t: TestServer;
  let Tasks: Collection<Task>;
  let client: DDPClient;
  let other: DDPClient;
  let tasks: LocalCollection<Task>;

  before(async () => {
    t = await startServer((server, { collection }) => {
      Tasks = collection<Task>('tasks');
      server.methods({
        async addTask(text: unknown) {
          await gates.pass();
          if (text === 'refuse') throw new DDPError(403, 'Refused');
          return Tasks.insertAsync({ text: String(text), done: false });
        },
        async rename(id: unknown, text: unknown) {
          await gates.pass();
          await Tasks.updateAsync(String(id), { $set: { text: `${String(text)} (server)` } });
        },
        async addTwo(text: unknown) {
          await gates.pass();
          await Tasks.insertAsync({ text: `${String(text)} 1`, done: false, by: 'server' });
        },
        async broken() {
          await gates.pass();
          return 'fine on the server';
        },
        async finish(id: unknown) {
          await gates.pass();
          await Tasks.updateAsync(String(id), { $set: { done: true, by: 'server' } });
        },
        markDone(text: unknown) {
          return Tasks.updateAsync({ text: String(text) }, { $set: { done: true } }, { multi: true });
        },
        upsertTask(text: unknown) {
          return Tasks.upsertAsync({ text: String(text) }, { $set: { done: true } });
        },
        // Ungated, for other clients and for the test's own setup.
        insertNow(text: unknown) {
          return Tasks.insertAsync({ text: String(text), done: false });
        },
        setDone(id: unknown) {
          return Tasks.updateAsync(String(id), { $set: { done: true } });
        },
        removeTask(id: unknown) {
          return Tasks.removeAsync(id as string);
        },
        async markThenAdd(text: unknown) {
          await Tasks.upsertAsync({ text: String(text) }, { $set: { done: true } });
          return Tasks.insertAsync({ text: `after ${String(text)}`, done: false });
        },
        async record(this: { unblock(): void }, label: unknown, gated: unknown) {
          this.unblock(); // the server would run later calls meanwhile: only the client holds them back
          started.push(String(label));
          if (gated) await gates.pass();
          return label;
        },
        dropMe(this: { connection: { close(): void } }) {
          setTimeout(() => this.connection.close(), 5);
        },
      });
      server.publish('tasks', () => Tasks.find());
    });
    other = new DDPClient(t.url);
  });

  beforeEach(async () => {
    client = new DDPClient(t.url, { backoff: { minTimeout: 20, maxTimeout: 100 } });
    tasks = client.collection<Task>('tasks');
    client.methods(stubsFor(tasks));
    await client.subscribe('tasks').ready;
  });

  // Also after a failed assertion, which skips the test's own disconnect: an open client would keep the run alive.
  afterEach(() => client?.disconnect());

  after(async () => {
    gates.open();
    client?.disconnect();
    other?.disconnect();
    await t?.close();
  });

  it("shows the stub's insert at once, with the _id the server then gives it", async () => {
    const call = client.call<string>('addTask', 'milk');
    const [shown] = tasks.find({ text: 'milk' });
    assert.ok(shown, 'the stub inserted before the server answered');
    await eventually(() => gates.count === 1, 'the server method waiting at its gate');
    assert.equal(await Tasks.findOneAsync({ text: 'milk' }), undefined, 'the server has not written yet');
    gates.open();
    const id = await call;
    assert.equal(id, shown._id, 'same _id on both sides (randomSeed)');
    assert.deepEqual(tasks.findOne(id), await Tasks.findOneAsync(id));
    client.disconnect();
  });

  it("undoes a refused call's writes", async () => {
    const call = client.call('addTask', 'refuse');
    assert.equal(tasks.find({ text: 'refuse' }).length, 1);
    await eventually(() => gates.count === 1, 'the gate');
    gates.open();
    await assert.rejects(call, { error: 403, reason: 'Refused' });
    assert.equal(tasks.find({ text: 'refuse' }).length, 0);
    client.disconnect();
  });

  it('shows what the server wrote when it differs, and holds its messages for that document until then', async () => {
    const id = await client.call<string>('insertNow', 'draft');
    const call = client.call('rename', id, 'local');
    assert.equal(tasks.findOne(id)?.text, 'local');
    await eventually(() => gates.count === 1, 'the gate');
    // Another client changes the same document meanwhile: held back, the stub's version stays on screen.
    await other.call('setDone', id);
    // ... while a document no stub wrote flows as usual.
    const unrelated = await other.call<string>('insertNow', 'unrelated');
    await eventually(() => tasks.findOne(unrelated) !== undefined, 'the unrelated insert');
    assert.deepEqual(tasks.findOne(id), { _id: id, text: 'local', done: false });
    gates.open();
    await call;
    assert.deepEqual(tasks.findOne(id), { _id: id, text: 'local (server)', done: true });
    client.disconnect();
  });

  it('undoes the writes the server did not make, and keeps those it did', async () => {
    const call = client.call('addTwo', 'pair');
    assert.deepEqual(tasks.find({ text: /^pair/ }, { sort: { text: 1 } }).map((task) => task.text), ['pair 1', 'pair 2']);
    await eventually(() => gates.count === 1, 'the gate');
    gates.open();
    await call;
    assert.deepEqual(tasks.find({ text: /^pair/ }).map((task) => [task.text, task.by]), [['pair 1', 'server']]);
    client.disconnect();
  });

  it('reports a throwing stub and still calls the server, or refuses the call with throwStubExceptions', async () => {
    const errors: Error[] = [];
    client.on('error', (error) => errors.push(error));
    const call = client.call('broken');
    assert.match(errors[0]?.message ?? '', /simulating the effect of invoking 'broken': the stub failed/);
    assert.equal(tasks.find({ text: 'half' }).length, 1);
    await eventually(() => gates.count === 1, 'the gate');
    gates.open();
    assert.equal(await call, 'fine on the server');
    assert.equal(tasks.find({ text: 'half' }).length, 0, 'the server wrote nothing: the half-done write is undone');

    await assert.rejects(client.apply('broken', [], { throwStubExceptions: true }), /the stub failed/);
    assert.equal(tasks.find({ text: 'half' }).length, 0);
    assert.equal(gates.count, 0, 'the call was not sent');
    client.disconnect();
  });

  it('logs a throwing stub on the console when nothing listens to the error event, as Meteor does', async () => {
    // It went unnoticed: the page's change never showed and nothing said why.
    const logged: unknown[][] = [];
    const consoleError = console.error;
    console.error = (...args: unknown[]) => void logged.push(args);
    try {
      const call = client.call('broken');
      assert.equal(logged.length, 1);
      assert.match(String(logged[0]![0]), /simulating the effect of invoking 'broken': the stub failed/);
      assert.match((logged[0]![1] as Error).stack ?? '', /the stub failed/, "the stub's error, with its stack");
      await eventually(() => gates.count === 1, 'the gate');
      gates.open();
      assert.equal(await call, 'fine on the server');
    } finally {
      console.error = consoleError;
      client.disconnect();
    }
  });

  it('removes nothing, in the stub and on the server, when the id is missing', async () => {
    await client.call('insertNow', 'still here');
    const before = tasks.size;
    assert.ok(before > 0);
    const removing = client.call('removeTask', undefined);
    assert.equal(tasks.size, before, 'the stub removed nothing');
    assert.equal(await removing, 0);
    assert.equal(tasks.size, before, 'the server removed nothing');
    assert.equal(await Tasks.find().countAsync(), before);
    client.disconnect();
  });

  it('draws ids for an upsert as the server does, so that a later insert gets the same _id on both sides', async () => {
    await client.call('insertNow', 'to mark'); // the upsert matches: no document inserted, yet an id is drawn
    for (const text of ['to mark', 'new mark']) {
      const call = client.call<string>('markThenAdd', text);
      const [shown] = tasks.find({ text: `after ${text}` });
      assert.ok(shown);
      assert.equal(await call, shown._id, `after the upsert of '${text}': same _id in the stub and on the server`);
    }
    client.disconnect();
  });

  it("runs Meteor 3's async stubs to the end: writes after awaiting the local collections are the stub's, and the call goes after them", async () => {
    // Meteor 3 method code awaits a read before it writes; the write was refused as outside a stub, so nothing showed.
    const id = await client.call<string>('insertNow', 'async stub');
    client.methods({
      async finish(this: StubInvocation, taskId: string) {
        const task = await tasks.findOneAsync({ _id: taskId, done: false });
        if (!task) throw new DDPError('not-found', 'No such task');
        await tasks.updateAsync(task._id, { $set: { done: true } });
        return 'stub done';
      },
    });
    const errors: Error[] = [];
    client.on('error', (error) => errors.push(error));
    const call = client.call('finish', id);
    await new Promise((resolve) => setImmediate(resolve)); // the stub's awaits are over; the server's answer waits at the gate
    assert.equal(tasks.findOne(id)?.done, true, "the stub's write shows before the server answers");
    assert.equal(await call.stubPromise, 'stub done');
    await eventually(() => gates.count === 1, 'the call at the gate');
    gates.open();
    assert.equal(await call.serverPromise, undefined);
    assert.deepEqual(tasks.findOne(id), { _id: id, text: 'async stub', done: true, by: 'server' });
    assert.deepEqual(errors, []);
    client.disconnect();
  });

  it('runs a call made while an async stub runs after it, in call order, stub and send', async () => {
    started.length = 0;
    const order: string[] = [];
    client.methods({
      record(label: string) {
        order.push(`stub ${label}`);
        if (label === 'slow') return tasks.findOneAsync({}).then(() => void order.push('stub slow done'));
      },
    });
    const calls = [client.call('record', 'slow', false), client.call('record', 'quick', false)];
    assert.deepEqual(order, ['stub slow']);
    assert.deepEqual(await Promise.all(calls), ['slow', 'quick']);
    assert.deepEqual(order, ['stub slow', 'stub slow done', 'stub quick']);
    assert.deepEqual(started, ['slow', 'quick']);
    const quick = client.call('record', 'next', false);
    assert.deepEqual(order.at(-1), 'stub next', 'with no async stub running, a stub runs at once again');
    await quick;
    client.disconnect();
  });

  it('refuses the call of an async stub that throws after an await, with throwStubExceptions, and undoes its writes', async () => {
    const id = await client.call<string>('insertNow', 'kept as it was');
    client.methods({
      async finish(taskId: string) {
        await tasks.updateAsync(taskId, { $set: { text: 'half done' } });
        await tasks.findOneAsync(taskId);
        throw new DDPError('not-yours', 'Not your task');
      },
    });
    const call = client.apply('finish', [id], { throwStubExceptions: true });
    await assert.rejects(call, { error: 'not-yours' });
    await assert.rejects(call.stubPromise, { error: 'not-yours' });
    assert.equal(tasks.findOne(id)?.text, 'kept as it was');
    await new Promise((resolve) => setTimeout(resolve, 30));
    assert.equal(gates.count, 0, 'the call was not sent');
  });

  it('ends an async stub that awaits something else at the next task, reports it, and still calls the server', async () => {
    const errors: Error[] = [];
    client.on('error', (error) => errors.push(error));
    client.methods({
      async finish(taskId: string) {
        await new Promise((resolve) => setTimeout(resolve, 20)); // a network round trip, say
        await tasks.updateAsync(taskId, { $set: { text: 'too late' } });
      },
    });
    const id = await client.call<string>('insertNow', 'slow stub');
    const call = client.call('finish', id);
    await assert.rejects(call.stubPromise, /still running at the next task/);
    assert.match(errors[0]?.message ?? '', /invoking 'finish': still running at the next task/);
    await eventually(() => gates.count === 1, 'the call at the gate');
    gates.open();
    await call;
    await new Promise((resolve) => setTimeout(resolve, 30));
    assert.deepEqual(tasks.findOne(id), { _id: id, text: 'slow stub', done: true, by: 'server' }, 'the late write was refused');
    client.disconnect();
  });

  it("upserts in a stub with Meteor's upsertAsync, and counts updates, as the server's methods do, with the same inserted _id", async () => {
    // Method code shared with the server calls upsertAsync: the stub failed with 'upsertAsync is not a function'.
    client.methods({
      upsertTask(text: string) {
        return tasks.upsertAsync({ text }, { $set: { done: true } });
      },
    });
    for (const expectInsert of [true, false]) {
      const call = client.call<{ numberAffected: number; insertedId?: string }>('upsertTask', 'upserted');
      const [inStub, onServer] = await Promise.all([call.stubPromise, call]);
      assert.deepEqual(inStub, onServer);
      assert.equal(onServer.insertedId !== undefined, expectInsert);
    }
    assert.equal(tasks.find({ text: 'upserted' }).length, 1);
    // An update counts the documents it matched, as the server does, whether or not they changed: it counted only changes.
    client.methods({
      markDone(text: string) {
        return tasks.updateAsync({ text }, { $set: { done: true } }, { multi: true });
      },
    });
    const marking = client.call<number>('markDone', 'upserted');
    assert.deepEqual(await Promise.all([marking.stubPromise, marking]), [1, 1]);
  });

  it('refuses writes outside stubs', () => {
    assert.throws(() => tasks.insert({ text: 'direct', done: false }), { error: 'write-outside-stub' });
    client.disconnect();
  });

  it('sends calls made while disconnected on reconnect, in order, and holds calls behind a wait call', async () => {
    started.length = 0;
    const reconnected = new Promise<void>((resolve) => client.once('connected', () => resolve()));
    await client.call('dropMe');
    await eventually(() => client.status !== 'connected', 'the drop');
    const first = client.call('record', 'first', true);
    const waiting = client.apply('record', ['waiting', false], { wait: true });
    const last = client.call('record', 'last', false);
    await reconnected;
    await eventually(() => started.length === 1, 'the first call on the server');
    // `first` waits at its gate; `waiting` must not go out before it is done, nor `last` before `waiting`.
    assert.deepEqual(started, ['first']);
    gates.open();
    assert.deepEqual(await Promise.all([first, waiting, last]), ['first', 'waiting', 'last']);
    assert.deepEqual(started, ['first', 'waiting', 'last']);
    client.disconnect();
  });

  it('gives a stub the call, its random stream and the user', async () => {
    const seen: unknown[] = [];
    client.methods({
      inspect(this: StubInvocation, arg: unknown) {
        seen.push(this.name, this.isSimulation, this.userId, arg, this.randomStream.sequence('x').id() === this.randomStream.sequence('x').id());
      },
    });
    await assert.rejects(client.call('inspect', { a: 1 }), { error: 404 });
    assert.deepEqual(seen, ['inspect', true, null, { a: 1 }, false]);
    client.disconnect();
  });
});
