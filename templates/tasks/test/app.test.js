// Starts the app and talks DDP to it, as a page would.
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { DDPClient } from 'perseid/client';
import { startApp } from 'perseid/testing';

let app;
let client;
before(async () => {
  app = await startApp();
  client = new DDPClient(app.url);
  await client.subscribe('tasks').ready;
});
after(async () => {
  client?.disconnect();
  await app?.stop();
});

test('a task is added, marked done and removed, live', async () => {
  const tasks = client.collection('tasks');
  const id = await client.call('addTask', 'Write the tests');
  assert.deepEqual({ ...tasks.findOne(id), createdAt: undefined }, { _id: id, text: 'Write the tests', done: false, createdAt: undefined });
  await client.call('setDone', id, true);
  assert.equal(tasks.findOne(id)?.done, true);
  await client.call('removeTask', id);
  assert.equal(tasks.findOne(id), undefined);
});

test('bad arguments are refused with a 400', async () => {
  await assert.rejects(client.call('addTask', ''), { error: 400 });
  await assert.rejects(client.call('setDone', 'some-id', 'yes'), { error: 400 });
});
