/**
 * Wire bytes for outgoing messages, built once per message and shared by every
 * connection that sends it: the WebSocket frame (header + UTF-8 payload in one
 * buffer), its permessage-deflate variant, and the SockJS `a[...]` variants.
 *
 * Frames are built here rather than with `ws`'s send() because ws frames (and
 * encodes, and compresses) per call, i.e. per client; a fan-out to N clients
 * would then cost N serialisations instead of one.
 */
import { constants, deflateRawSync } from 'node:zlib';
import type { EncodedMessage } from '../ddp/encoded.js';
import { messageBytes } from '../metrics/message-size.js';

export interface CompressionOptions {
  /** Messages smaller than this many bytes are sent uncompressed (Meteor 3.1.1: 1024). */
  threshold: number;
  /** zlib level; 1 is fastest. */
  level: number;
  /** zlib memLevel (1–9); lower uses less memory per compression. */
  memLevel: number;
}

/** What a connection negotiated: no compression, or deflate with the server's window size. */
export type FrameVariant = 'plain' | 'sockjs' | `deflate-${number}` | `sockjs-deflate-${number}`;

interface FrameCache {
  plain?: Buffer;
  sockjs?: Buffer;
  sockjsText?: string;
  deflated?: Map<string, Buffer>;
}

const TEXT_OPCODE = 0x81; // FIN + text
const TEXT_OPCODE_RSV1 = 0xc1; // FIN + RSV1 (compressed) + text

function header(length: number, first: number): Buffer {
  if (length < 126) {
    const h = Buffer.allocUnsafe(2);
    h[0] = first;
    h[1] = length;
    return h;
  }
  if (length < 65536) {
    const h = Buffer.allocUnsafe(4);
    h[0] = first;
    h[1] = 126;
    h.writeUInt16BE(length, 2);
    return h;
  }
  const h = Buffer.allocUnsafe(10);
  h[0] = first;
  h[1] = 127;
  h.writeUInt32BE(Math.floor(length / 0x100000000), 2);
  h.writeUInt32BE(length >>> 0, 6);
  return h;
}

/** A server-to-client text frame (unmasked) holding `text`, in a single buffer. */
export function textFrame(text: string): Buffer {
  const length = Buffer.byteLength(text);
  const h = header(length, TEXT_OPCODE);
  const frame = Buffer.allocUnsafe(h.length + length);
  h.copy(frame, 0);
  frame.write(text, h.length, 'utf8');
  return frame;
}

function deflatedFrame(payload: Buffer, windowBits: number, options: CompressionOptions): Buffer {
  const compressed = deflateRawSync(payload, {
    level: options.level,
    memLevel: options.memLevel,
    // zlib cannot make 8-bit raw windows; 9 is what every permessage-deflate peer accepts instead.
    windowBits: Math.max(9, windowBits),
    finishFlush: constants.Z_SYNC_FLUSH,
  });
  // RFC 7692 §7.2.1: drop the 00 00 ff ff tail of the sync flush.
  const body = compressed.subarray(0, compressed.length - 4);
  const h = header(body.length, TEXT_OPCODE_RSV1);
  return Buffer.concat([h, body], h.length + body.length);
}

function cacheOf(message: EncodedMessage): FrameCache {
  return (message.frames ??= {}) as FrameCache;
}

/** SockJS quoting: JSON plus escapes for characters some browsers mangle (as sockjs-node's utils.quote). */
// eslint-disable-next-line no-control-regex
const SOCKJS_ESCAPABLE = /[\x00-\x1f\ud800-\udfff\u200c-\u200f\u2028-\u202f\u2060-\u206f\ufff0-\uffff]/g;
export function sockjsQuote(text: string): string {
  const quoted = JSON.stringify(text);
  SOCKJS_ESCAPABLE.lastIndex = 0;
  if (!SOCKJS_ESCAPABLE.test(quoted)) return quoted;
  return quoted.replace(SOCKJS_ESCAPABLE, (c) => '\\u' + c.charCodeAt(0).toString(16).padStart(4, '0'));
}

function sockjsText(message: EncodedMessage): string {
  const cache = cacheOf(message);
  return (cache.sockjsText ??= `a[${sockjsQuote(message.text)}]`);
}

/** The bytes to write for `message` on a connection of this variant. */
export function frameFor(message: EncodedMessage, variant: FrameVariant, compression: CompressionOptions | undefined): Buffer {
  const cache = cacheOf(message);
  if (variant === 'plain') return (cache.plain ??= textFrame(message.text));
  if (variant === 'sockjs') return (cache.sockjs ??= textFrame(sockjsText(message)));
  const sockjs = variant.startsWith('sockjs');
  if (!compression || messageBytes(message) < compression.threshold) {
    return frameFor(message, sockjs ? 'sockjs' : 'plain', compression);
  }
  const text = sockjs ? sockjsText(message) : message.text;
  const deflated = (cache.deflated ??= new Map());
  let frame = deflated.get(variant);
  if (!frame) {
    const windowBits = Number(variant.slice(variant.lastIndexOf('-') + 1));
    frame = deflatedFrame(Buffer.from(text), windowBits, compression);
    deflated.set(variant, frame);
  }
  return frame;
}
