/**
 * Clients we did not write, from npm, against the tasks app: simpleddp over the
 * raw WebSocket, and the official sockjs-client over SockJS's transports.
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import SimpleDDP from 'simpleddp';
import WebSocket from 'ws';
import tasksApp from '../examples/tasks/app.js';
import { startServer, type Message, type TestServer } from './helpers.js';
import { eventually, SockjsPeer } from './processes.js';

/** simpleddp keeps a document's id in `id`. */
interface Task {
  id: string;
  description: string;
  sessionId: string;
  createdAt: Date;
}

describe('simpleddp (npm) against the tasks app', () => {
  let t: TestServer;
  let ddp: SimpleDDP;
  before(async () => {
    t = await startServer(async (server) => {
      await tasksApp(server);
      server.methods({
        dropMyConnection(this: { connection: { close(): void } }) {
          setTimeout(() => this.connection.close(), 10);
        },
        echoDate: (date: unknown) => ({ date, isDate: date instanceof Date }),
      });
    });
    ddp = new SimpleDDP({ endpoint: t.wsUrl, SocketConstructor: WebSocket, reconnectInterval: 100, maxTimeout: 5000 });
    await ddp.connect();
  });
  after(async () => {
    await ddp.disconnect();
    await t.close();
  });

  it('calls methods, receives published documents as they are added and removed, with Dates', async () => {
    const sub = ddp.subscribe('fetchTasks');
    await sub.ready();
    const tasks = ddp.collection<Task>('taskCollection');
    await ddp.call('removeAllTasks', { sessionId: 'sd' });
    const id = await ddp.call<string>('insertTask', { description: 'from simpleddp', sessionId: 'sd' });
    await eventually(() => tasks.fetch().some((task) => task.id === id), 'the added task');
    const task = tasks.fetch().find((x) => x.id === id)!;
    assert.equal(task.description, 'from simpleddp');
    assert.ok(task.createdAt instanceof Date, 'createdAt arrives as a Date');
    const fetched = await ddp.call<Array<Task & { _id: string }>>('fetchTasks');
    assert.ok(fetched.find((x) => x._id === id)!.createdAt instanceof Date);
    await ddp.call('removeTask', { taskId: id });
    await eventually(() => !tasks.fetch().some((x) => x.id === id), 'the removed task');
  });

  it('round-trips a Date parameter', async () => {
    const result = await ddp.call<{ date: Date; isDate: boolean }>('echoDate', new Date(1234567));
    assert.equal(result.isDate, true);
    assert.equal(result.date.getTime(), 1234567);
  });

  it('gets Meteor-shaped errors for unknown methods, bad arguments and unknown publications', async () => {
    await assert.rejects(ddp.call('noSuchMethod'), (error: Message) => error.error === 404 && error.reason === "Method 'noSuchMethod' not found");
    await assert.rejects(ddp.call('insertTask', { description: 42 }), (error: Message) => error.error === 400);
    // Through simpleddp's connection rather than subscribe(): its subscription
    // object drops a promise that rejects when the server refuses the sub.
    const nosub = new Promise<Message>((resolve) => {
      const listener = ddp.on('nosub', (m) => {
        listener.stop();
        resolve(m);
      });
    });
    const subId = ddp.ddpConnection.sub('noSuchPublication', []);
    const refused = await nosub;
    assert.equal(refused.id, subId);
    assert.equal((refused.error as Message).error, 404);
    assert.equal((refused.error as Message).reason, "Subscription 'noSuchPublication' not found");
  });

  it('reconnects after the server drops it, resubscribes, and sees new data', async () => {
    const tasks = ddp.collection<Task>('taskCollection');
    let disconnected = 0;
    const listener = ddp.on('disconnected', () => disconnected++);
    await ddp.call('dropMyConnection');
    await eventually(() => disconnected > 0, 'the disconnect');
    await eventually(() => ddp.connected, 'the reconnect');
    listener.stop();
    const other = new SimpleDDP({ endpoint: t.wsUrl, SocketConstructor: WebSocket, autoReconnect: false });
    await other.connect();
    const id = await other.call<string>('insertTask', { description: 'after reconnect', sessionId: 'other' });
    await eventually(() => tasks.fetch().some((x) => x.id === id), 'a task inserted after the reconnect');
    await other.disconnect();
  });
});

describe('sockjs-client (npm) against the tasks app', () => {
  let t: TestServer;
  before(async () => {
    t = await startServer((server) => tasksApp(server));
  });
  after(() => t.close());

  it('advertises the websocket transport at /sockjs/info', async () => {
    const info = (await (await fetch(`${t.url}/sockjs/info`)).json()) as Record<string, unknown>;
    assert.equal(info.websocket, true);
    assert.equal(info.cookie_needed, false);
    assert.deepEqual(info.origins, ['*:*']);
    assert.equal(typeof info.entropy, 'number');
  });

  for (const transport of ['websocket', 'xhr-streaming', 'xhr-polling']) {
    it(`speaks DDP over SockJS ${transport}`, async () => {
      const peer = await SockjsPeer.open(`${t.url}/sockjs`, transport);
      peer.send({ msg: 'connect', version: '1', support: ['1'] });
      await peer.next((m) => m.msg === 'connected');
      peer.send({ msg: 'sub', id: 's', name: 'fetchTasks' });
      await peer.next((m) => m.msg === 'ready');
      const description = `via ${transport} \u2028 “quoted” ✓`;
      peer.send({ msg: 'method', id: '1', method: 'insertTask', params: [{ description, sessionId: transport }] });
      const result = await peer.next((m) => m.msg === 'result' && m.id === '1');
      const added = await peer.next((m) => m.msg === 'added' && m.id === result.result);
      assert.equal((added.fields as Message).description, description);
      assert.ok(((added.fields as Message).createdAt as Message).$date);
      await peer.next((m) => m.msg === 'updated');
      peer.close();
    });
  }
});
