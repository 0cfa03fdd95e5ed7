/**
 * A server message serialised once. The same instance goes to every connection
 * that receives it, and the transport caches its framed bytes on it, so a change
 * fanned out to N clients is stringified and framed once, not N times.
 */
import { toJSONValue } from './ejson.js';
import type { ServerMessage } from './messages.js';

export class EncodedMessage {
  /** Transport-owned cache of framed bytes (see transport/frames.ts). */
  frames: unknown = undefined;
  /** UTF-8 size of `text`, set by the first that measures it (metrics/message-size.ts). */
  byteLength: number | undefined = undefined;
  /** Not counted in a session's messages for resumption (heartbeats, a resumed session's `connected`; see server/resume-log.ts). */
  uncounted = false;
  constructor(readonly text: string) {}
}

/** Serialises any server message; only `fields` and `result` carry EJSON. */
export function encodeMessage(message: ServerMessage): EncodedMessage {
  const m = message as unknown as Record<string, unknown>;
  if (m.fields !== undefined || m.result !== undefined) {
    const copy: Record<string, unknown> = { ...m };
    if (copy.fields !== undefined) copy.fields = toJSONValue(copy.fields);
    if (copy.result !== undefined) copy.result = toJSONValue(copy.result);
    return new EncodedMessage(JSON.stringify(copy));
  }
  return new EncodedMessage(JSON.stringify(m));
}

/** `undefined` field values are not representable in JSON: they travel as `cleared`. */
export function encodeAdded(collection: string, id: string, fields: Record<string, unknown>): EncodedMessage {
  return new EncodedMessage(
    `{"msg":"added","collection":${JSON.stringify(collection)},"id":${JSON.stringify(id)},"fields":${JSON.stringify(toJSONValue(fields))}}`,
  );
}

export function encodeChanged(
  collection: string,
  id: string,
  fields: Record<string, unknown> | undefined,
  cleared: readonly string[] | undefined,
): EncodedMessage {
  let text = `{"msg":"changed","collection":${JSON.stringify(collection)},"id":${JSON.stringify(id)}`;
  if (fields !== undefined) text += `,"fields":${JSON.stringify(toJSONValue(fields))}`;
  if (cleared !== undefined && cleared.length > 0) text += `,"cleared":${JSON.stringify(cleared)}`;
  return new EncodedMessage(text + '}');
}

export function encodeRemoved(collection: string, id: string): EncodedMessage {
  return new EncodedMessage(`{"msg":"removed","collection":${JSON.stringify(collection)},"id":${JSON.stringify(id)}}`);
}
