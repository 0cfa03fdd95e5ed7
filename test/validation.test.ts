/**
 * Argument validation: Meteor's check/Match patterns, and Standard Schema
 * libraries (zod, valibot) through `validated()`, over the wire: a mismatch is
 * Meteor's 400 "Match failed" and nothing of the schema reaches the client.
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import * as v from 'valibot';
import { z } from 'zod';
import { check, Match } from '../src/validation/check.js';
import { MatchError } from '../src/validation/match-error.js';
import { validated } from '../src/validation/schema.js';
import { RawPeer, startServer, type Message, type TestServer } from './helpers.js';

describe('check and Match', () => {
  const passes: Array<[unknown, Parameters<typeof check>[1]]> = [
    ['x', String],
    [1.5, Number],
    [true, Boolean],
    [() => 1, Function],
    [{ a: 1 }, Object],
    [new Date(), Date],
    [3, Match.Integer],
    [null, null],
    [undefined, undefined],
    ['literal', 'literal'],
    [[1, 2], [Number]],
    [{ a: 'x' }, { a: String, b: Match.Optional(Number) }],
    [{ a: 'x', extra: 1 }, Match.ObjectIncluding({ a: String })],
    [null, Match.Maybe(String)],
    [2, Match.OneOf(String, Number)],
    [4, Match.Where((x) => x === 4)],
    [{ anything: [1] }, Match.Any],
  ];
  for (const [value, pattern] of passes) {
    it(`accepts ${JSON.stringify(value) ?? String(value)} for ${String((pattern as { name?: string })?.name ?? JSON.stringify(pattern))}`, () => check(value, pattern));
  }

  it("gives Meteor's messages and paths for mismatches", () => {
    const failure = (value: unknown, pattern: Parameters<typeof check>[1]) => {
      try {
        check(value, pattern);
      } catch (error) {
        assert.ok(error instanceof MatchError);
        return error.message;
      }
      assert.fail('no mismatch');
    };
    assert.equal(failure(1, String), 'Match error: Expected string, got number');
    assert.equal(failure({ user: { email: 3 } }, { user: { email: String } }), 'Match error: Expected string, got number in field user.email');
    assert.equal(failure({ a: 'x', b: 1 }, { a: String }), 'Match error: Unknown key in field b');
    assert.equal(failure({}, { a: String }), "Match error: Missing key 'a'");
    assert.equal(failure([1, 'x'], [Number]), 'Match error: Expected number, got string in field [1]');
    assert.equal(failure(1.5, Match.Integer), 'Match error: Expected Integer, got 1.5');
    // Meteor's Integer is a signed 32-bit one: -2^31 passes, 2^31 does not.
    check(-(2 ** 31), Match.Integer);
    assert.equal(failure(2 ** 31, Match.Integer), 'Match error: Expected Integer, got 2147483648');
    assert.equal(failure(null, Match.Optional(String)), 'Match error: Expected string, got null');
    assert.equal(failure(true, Match.OneOf(String, Number)), 'Match error: Failed Match.OneOf, Match.Maybe or Match.Optional validation');
    assert.equal(Match.test('x', String), true);
    assert.equal(Match.test(1, String), false);
  });
});

describe('validated methods and publications over the wire', () => {
  let t: TestServer;
  before(async () => {
    t = await startServer((server) => {
      server.methods({
        addTask: validated([z.object({ description: z.string().min(1).max(100), done: z.boolean().default(false) })], (task) => task),
        rename: validated([v.string(), v.pipe(v.string(), v.minLength(3))], (id, name) => `${id}:${name}`),
        legacy(room: unknown) {
          check(room, { name: String });
          return 'ok';
        },
      });
      server.publish(
        'byOwner',
        validated([z.string().regex(/^[a-z]+$/)], function () {
          this.ready();
        }),
      );
    });
  });
  after(() => t.close());

  it("runs the handler with the schema's output", async () => {
    const peer = await RawPeer.connected(t.wsUrl);
    assert.deepEqual((await peer.call('1', 'addTask', [{ description: 'write' }])).result.result, { description: 'write', done: false });
    assert.equal((await peer.call('2', 'rename', ['a', 'abc'])).result.result, 'a:abc');
    peer.close();
  });

  it('answers a mismatch with 400 "Match failed" and no detail, for schemas and check()', async () => {
    const peer = await RawPeer.connected(t.wsUrl);
    const expected = { isClientSafe: true, error: 400, reason: 'Match failed', message: 'Match failed [400]', errorType: 'Meteor.Error' };
    for (const [method, params] of [
      ['addTask', [{ description: '' }]],
      ['addTask', [{ description: 'x', owner: { $ne: null } }, 'extra']],
      ['addTask', ['not an object']],
      ['rename', ['a', 'ab']],
      ['rename', [1, 'abc']],
      ['legacy', [{ name: { $gt: '' } }]],
    ] as const) {
      const { result } = await peer.call(`${method}${JSON.stringify(params)}`, method, [...params]);
      assert.deepEqual(result.error, expected, `${method} ${JSON.stringify(params)}`);
    }
    peer.send({ msg: 'sub', id: 's', name: 'byOwner', params: ['Not Lowercase'] });
    const nosub = await peer.next((m) => m.msg === 'nosub');
    assert.deepEqual(nosub.error as Message, expected);
    peer.send({ msg: 'sub', id: 's2', name: 'byOwner', params: ['ok'] });
    await peer.next((m) => m.msg === 'ready');
    peer.close();
  });
});
