/**
 * Typed contracts over the wire: one definition gives the server a validated
 * handler (400 "Match failed" for a bad parameter, a 500 for a result its
 * schema refuses) and the client the call and subscription by the same name.
 * The types themselves are checked by test/types/contract.ts.
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import * as v from 'valibot';
import { z } from 'zod';
import { DDPClient, defineMethod, definePublication, returns } from '../src/client/node.js';
import { implement } from '../src/validation/index.js';
import { startServer, type TestServer } from './helpers.js';

const addItem = defineMethod({
  name: 'items.add',
  params: [z.object({ text: z.string().min(1), qty: z.number().int().default(1) })],
  result: returns<string>(),
});
const countItems = defineMethod({ name: 'items.count', params: [v.nullish(v.string())], result: v.number() });
const broken = defineMethod({ name: 'items.broken', params: [], result: z.string() });
const items = definePublication({ name: 'items', params: [z.number().int().positive()] });

describe('typed contracts', () => {
  let t: TestServer;
  let client: DDPClient;
  before(async () => {
    t = await startServer((server, { collection }) => {
      const Items = collection<{ text: string; qty: number }>('items');
      server.methods({
        [addItem.name]: implement(addItem, ({ text, qty }) => Items.insertAsync({ text, qty })),
        [countItems.name]: implement(countItems, async (text) => (await Items.find(text ? { text } : {}).fetchAsync()).length),
        // The definition promises a string: returning a number is the server's bug.
        [broken.name]: implement(broken, (() => 42) as never),
      });
      server.publish(items.name, implement(items, (limit) => Items.find({}, { limit, sort: { text: 1 } })));
    });
    client = new DDPClient(t.url);
  });
  after(async () => {
    client?.disconnect();
    await t?.close();
  });

  it('calls with the parsed parameters and subscribes by the definition', async () => {
    const id = await client.call(addItem, { text: 'apples' });
    await client.call(addItem, { text: 'pears', qty: 3 });
    assert.equal(await client.call(countItems, 'apples'), 1);
    assert.equal(await client.call(countItems, undefined), 2);
    await client.subscribe(items, 1).ready;
    assert.deepEqual(client.collection('items').find(), [{ _id: id, text: 'apples', qty: 1 }]);
  });

  it("refuses parameters the schemas refuse with Meteor's Match failed", async () => {
    await assert.rejects(client.call(addItem, { text: '' }), { error: 400, reason: 'Match failed' });
    await assert.rejects(client.apply('items.add', [{ text: 'x', qty: 1.5 }]), { error: 400 });
    await assert.rejects(client.subscribe(items, -1).ready, { error: 400 });
  });

  it('answers 500 when a handler breaks its own definition', async () => {
    await assert.rejects(client.call(broken), { error: 500, reason: 'Internal server error' });
  });
});
