/**
 * The chat example's methods from Node, with Perseid's client: what the page
 * cannot show in a bounded browser test. A call whose answer was lost with its
 * connection is sent again, with the same randomSeed, on the client's next
 * session (docs/client.md): the message it stored must not come back as an
 * error.
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { createChat } from '../examples/chat/app.js';
import { accounts } from '../src/accounts/index.js';
import { DDPClient, Random } from '../src/client/node.js';
import { RawPeer, startServer, type TestServer } from './helpers.js';
import { eventually } from './processes.js';

describe('the chat example’s methods', () => {
  let t: TestServer;
  let client: DDPClient;

  before(async () => {
    t = await startServer((server) => createChat()(server));
    client = new DDPClient(t.url);
  });
  after(async () => {
    client?.disconnect();
    await t?.close();
  });

  it('answers a sendMessage sent again (its answer lost) with the message it stored, stored once', async () => {
    const call = { randomSeed: Random.id(20) };
    const params = [{ group: 'general', message: 'sent twice' }];
    // What a client does on a new session for a call it had no answer to: the same call, the same seed.
    const first = await client.apply<string>('sendMessage', params, call);
    const again = await client.apply<string>('sendMessage', params, call);
    assert.equal(again, first);
    assert.equal((await t.collection('messages').find({ text: 'sent twice' }).fetchAsync()).length, 1);
  });

  it('shows nobody online for connections that closed while their login ran', async () => {
    let logins = 0;
    const users = accounts(t.server);
    users.onLogin(() => void logins++);
    await users.createUser({ username: 'brief', password: 'secret' });
    // Each sends a login and leaves at once: its hash, waiting behind the others', ends after the close.
    const peers = await Promise.all(Array.from({ length: 5 }, () => RawPeer.connected(t.wsUrl)));
    for (const peer of peers) {
      peer.send({ msg: 'method', id: 'l', method: 'login', params: [{ user: { username: 'brief' }, password: 'secret' }] });
      peer.close();
    }
    await eventually(() => logins === 5, 'the five logins to finish', 20000);
    await eventually(() => t.server.sessionCount + t.server.awaitingResumeCount <= 1, 'the connections to close');
    assert.deepEqual(await t.collection('presence').find({}).fetchAsync(), []);
  });
});
