// Starts the app and talks DDP to it, as two pages in two rooms would.
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { DDPClient } from 'perseid/client';
import { startApp } from 'perseid/testing';

let app;
const clients = [];
before(async () => {
  app = await startApp();
});
after(async () => {
  for (const client of clients) client.disconnect();
  await app?.stop();
});

function join(room) {
  const client = new DDPClient(app.url);
  clients.push(client);
  return { client, ready: client.subscribe('room', room).ready };
}

test('a message reaches its room and no other', async () => {
  const lobby = join('lobby');
  const other = join('other');
  await Promise.all([lobby.ready, other.ready]);
  const id = await lobby.client.call('send', 'lobby', 'hello', 'ada');
  assert.equal(lobby.client.collection('messages').findOne(id)?.text, 'hello');
  assert.equal(other.client.collection('messages').findOne(id), undefined);
});

test('an empty message is refused with a 400', async () => {
  await assert.rejects(join('lobby').client.call('send', 'lobby', ''), { error: 400 });
});
