import { addType } from './ejson.js';
import { Random } from './random.js';

const HEX24 = /^[0-9a-f]{24}$/;

/** Meteor's `Mongo.ObjectID`: 24 lowercase hex digits, EJSON type `oid`. */
export class ObjectID {
  private readonly str: string;

  constructor(hex?: string) {
    const value = hex === undefined ? Random.hexString(24) : hex.toLowerCase();
    if (!HEX24.test(value)) throw new Error('Invalid hexadecimal string for creating an ObjectID');
    this.str = value;
  }

  static isValid(hex: string): boolean {
    return HEX24.test(hex);
  }

  toHexString(): string {
    return this.str;
  }

  valueOf(): string {
    return this.str;
  }

  toString(): string {
    return `ObjectID("${this.str}")`;
  }

  toJSON(): string {
    return this.str;
  }

  equals(other: unknown): boolean {
    return other instanceof ObjectID && other.str === this.str;
  }

  clone(): ObjectID {
    return new ObjectID(this.str);
  }

  typeName(): string {
    return 'oid';
  }

  toJSONValue(): string {
    return this.str;
  }

  /** The timestamp part, for ids made by MongoDB. */
  getTimestamp(): Date {
    return new Date(Number.parseInt(this.str.slice(0, 8), 16) * 1000);
  }
}

addType('oid', (value) => {
  if (typeof value !== 'string') throw new Error('EJSON: oid value must be a hex string');
  return new ObjectID(value);
});
