import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { EJSON, addType, type EJSONCustomType } from '../src/ddp/ejson.js';
import { idParse, idStringify } from '../src/ddp/ids.js';
import { ObjectID } from '../src/ddp/object-id.js';
import { RandomStream, collectionIdSequence, createWithSeeds, makeRpcSeed } from '../src/ddp/random.js';
import { negotiateVersion, parseClientMessage, parseServerMessage } from '../src/ddp/messages.js';
import { DDPError, toClientError } from '../src/ddp/errors.js';

class Point implements EJSONCustomType {
  constructor(
    readonly x: number,
    readonly y: number,
  ) {}
  typeName(): string {
    return 'point';
  }
  toJSONValue(): unknown {
    return { x: this.x, y: this.y };
  }
  equals(other: unknown): boolean {
    return other instanceof Point && other.x === this.x && other.y === this.y;
  }
}
addType('point', (v) => {
  const { x, y } = v as { x: number; y: number };
  return new Point(x, y);
});

describe('EJSON', () => {
  it('encodes the built-in types in Meteor wire form', () => {
    const value = {
      d: new Date(1700000000123),
      b: new Uint8Array([0, 1, 2, 250]),
      inf: Infinity,
      ninf: -Infinity,
      nan: NaN,
      re: /ab+c/gi,
      oid: new ObjectID('0123456789abcdef01234567'),
      p: new Point(1, 2),
    };
    assert.equal(
      EJSON.stringify(value),
      '{"d":{"$date":1700000000123},"b":{"$binary":"AAEC+g=="},"inf":{"$InfNaN":1},"ninf":{"$InfNaN":-1},' +
        '"nan":{"$InfNaN":0},"re":{"$regexp":"ab+c","$flags":"gi"},' +
        '"oid":{"$type":"oid","$value":"0123456789abcdef01234567"},"p":{"$type":"point","$value":{"x":1,"y":2}}}',
    );
    const back = EJSON.parse(EJSON.stringify(value));
    assert.ok(EJSON.equals(back, value));
    assert.ok((back as { oid: unknown }).oid instanceof ObjectID);
  });

  it('escapes plain objects that look like tagged values, one level deep', () => {
    const value = { a: { $date: 5 }, b: { $type: 'x', $value: { $date: 1 } } };
    const json = EJSON.toJSONValue(value);
    assert.deepEqual(json, {
      a: { $escape: { $date: 5 } },
      b: { $escape: { $type: 'x', $value: { $escape: { $date: 1 } } } },
    });
    assert.deepEqual(EJSON.fromJSONValue(json), value);
  });

  it('returns plain JSON untouched and copies only the converted path', () => {
    const inner = { s: 'x', n: [1, 2] };
    const plain = { a: inner, b: 2 };
    assert.equal(EJSON.toJSONValue(plain), plain);
    const mixed = { a: inner, d: new Date(0) };
    const out = EJSON.toJSONValue(mixed) as Record<string, unknown>;
    assert.notEqual(out, mixed);
    assert.equal(out.a, inner);
  });

  it('rejects malformed tagged values and unknown custom types', () => {
    assert.throws(() => EJSON.parse('{"$date":"yesterday"}'), /\$date/);
    assert.throws(() => EJSON.parse('{"$type":"nope","$value":1}'), /unknown custom type/);
    assert.throws(() => EJSON.parse('{"$binary":"!!"}'), /base64/);
    assert.throws(() => EJSON.parse('{"$InfNaN":7}'), /InfNaN/);
  });

  it('compares deeply, key-order-insensitively by default', () => {
    assert.ok(EJSON.equals({ a: 1, b: [1, { c: NaN }] }, { b: [1, { c: NaN }], a: 1 }));
    assert.ok(!EJSON.equals({ a: 1, b: 2 }, { b: 2, a: 1 }, { keyOrderSensitive: true }));
    assert.ok(EJSON.equals(new Date(5), new Date(5)));
    assert.ok(!EJSON.equals(new Uint8Array([1]), new Uint8Array([2])));
    assert.ok(!EJSON.equals({ a: undefined }, { b: undefined }));
  });

  it('clones deeply', () => {
    const value = { d: new Date(3), b: new Uint8Array([1]), o: { x: [1] }, p: new Point(1, 1) };
    const copy = EJSON.clone(value);
    assert.ok(EJSON.equals(copy, value));
    assert.notEqual(copy.d, value.d);
    assert.notEqual(copy.o.x, value.o.x);
  });
});

describe('document ids', () => {
  it('follows Meteor\'s id-stringify rules both ways', () => {
    const cases: Array<[unknown, string]> = [
      ['abc', 'abc'],
      ['', ''],
      ['-x', '--x'],
      ['~x', '-~x'],
      ['{x', '-{x'],
      ['0123456789abcdef01234567', '-0123456789abcdef01234567'],
      [new ObjectID('0123456789abcdef01234567'), '0123456789abcdef01234567'],
      [5, '~5'],
      [true, '~true'],
      [null, '~null'],
      [undefined, '-'],
    ];
    for (const [id, text] of cases) {
      assert.equal(idStringify(id), text);
      assert.ok(EJSON.equals(idParse(text), id), `round trip of ${text}`);
    }
    assert.throws(() => idStringify({ a: 1 }));
  });
});

describe('random', () => {
  it('matches Meteor\'s Alea test vector', () => {
    const r = createWithSeeds(0);
    assert.deepEqual(
      [r.id(), r.id(), r.id(), r.id()],
      ['cp9hWvhg8GSvuZ9os', '3f3k6Xo7rrHCifQhR', 'shxDnjWWmnKPEoLhM', '6QTjB8C5SEqhmz4ni'],
    );
  });

  it('gives a method\'s inserts the same ids on every side that has the seed', () => {
    const a = collectionIdSequence(new RandomStream('abcdef0123456789abcd'), 'tasks');
    const b = collectionIdSequence(new RandomStream('abcdef0123456789abcd'), 'tasks');
    const ids = [a.id(), a.id()];
    assert.deepEqual([b.id(), b.id()], ids);
    assert.match(ids[0]!, /^[23456789ABCDEFGHJKLMNPQRSTWXYZabcdefghijkmnopqrstuvwxyz]{17}$/);
    const other = collectionIdSequence(new RandomStream('abcdef0123456789abcd'), 'notes');
    assert.notEqual(other.id(), ids[0]);
    assert.equal(makeRpcSeed(new RandomStream('s'), 'm'), makeRpcSeed(new RandomStream('s'), 'm'));
    assert.match(makeRpcSeed(undefined, 'm'), /^[0-9a-f]{20}$/);
  });
});

describe('DDP messages', () => {
  it('validates client messages with Meteor\'s error reasons', () => {
    const reason = (text: string) => {
      const out = parseClientMessage(text);
      return 'rejection' in out ? out.rejection.reason : 'ok';
    };
    assert.equal(reason('not json'), 'Bad request');
    assert.equal(reason('[1,2]'), 'Bad request');
    assert.equal(reason('"str"'), 'Bad request');
    assert.equal(reason('{"msg":"bogus"}'), 'Bad request');
    assert.equal(reason('{"nomsg":1}'), 'Bad request');
    assert.equal(reason('{"msg":"sub","id":1,"name":"x"}'), 'Malformed subscription');
    assert.equal(reason('{"msg":"sub","id":"1","name":"x","params":{}}'), 'Malformed subscription');
    assert.equal(reason('{"msg":"method","id":"1","method":"m","randomSeed":5}'), 'Malformed method invocation');
    assert.equal(reason('{"msg":"method","id":"1","method":"m","params":[{"$date":"x"}]}'), 'Parse error');
    assert.equal(reason('{"msg":"unsub","id":null}'), 'Malformed unsubscription');
    assert.equal(reason('{"msg":"method","id":"1","method":"m","params":[{"$date":5}]}'), 'ok');
    const ok = parseClientMessage('{"msg":"method","id":"1","method":"m","params":[{"$date":5}]}');
    assert.ok('message' in ok && ok.message.msg === 'method' && ok.message.params[0] instanceof Date);
  });

  it('negotiates versions as Meteor does', () => {
    assert.deepEqual(negotiateVersion({ msg: 'connect', version: '1', support: ['1', 'pre2', 'pre1'] }), { accepted: '1' });
    assert.deepEqual(negotiateVersion({ msg: 'connect', version: 'pre1', support: ['pre1'] }), { accepted: 'pre1' });
    assert.deepEqual(negotiateVersion({ msg: 'connect', version: 'pre2', support: ['1', 'pre2'] }), { failed: '1' });
    assert.deepEqual(negotiateVersion({ msg: 'connect', version: '9', support: ['9'] }), { failed: '1' });
    assert.deepEqual(negotiateVersion({ msg: 'connect', version: '1', support: 'x' } as never), { failed: '1' });
  });

  it('parses server messages, folding cleared fields back in and ignoring server_id', () => {
    assert.equal(parseServerMessage('{"server_id":"0"}'), undefined);
    const msg = parseServerMessage('{"msg":"changed","collection":"c","id":"a","fields":{"d":{"$date":1}},"cleared":["x"]}');
    assert.deepEqual(msg, { msg: 'changed', collection: 'c', id: 'a', fields: { d: new Date(1), x: undefined } });
  });
});

describe('errors', () => {
  it('serialises client-safe errors in Meteor.Error shape and hides the rest', () => {
    const e = new DDPError('not-allowed', 'Nope', { why: 1 });
    assert.deepEqual(e.toJSON(), {
      isClientSafe: true,
      error: 'not-allowed',
      reason: 'Nope',
      details: { why: 1 },
      message: 'Nope [not-allowed]',
      errorType: 'Meteor.Error',
    });
    assert.equal(toClientError(new TypeError('secret')).error.reason, 'Internal server error');
    assert.equal(toClientError(new TypeError('secret')).error.error, 500);
    const wrapped = Object.assign(new Error('x'), { sanitizedError: new DDPError(403, 'Denied') });
    assert.equal(toClientError(wrapped).error.error, 403);
  });
});
