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
});
after(async () => {
  client?.disconnect();
  await app?.stop();
});

test('a note added by a method arrives through the publication', async () => {
  await client.subscribe('notes').ready;
  const id = await client.call('addNote', '  hello  ');
  assert.equal(client.collection('notes').findOne(id)?.text, 'hello');
});

test('an empty note is refused with a 400', async () => {
  await assert.rejects(client.call('addNote', ' '), { error: 400 });
});
