/**
 * The size of an encoded DDP message: the UTF-8 length of its text, measured
 * once and kept on the message, so the transport (compression threshold and
 * figures) and the live queries (bytes per publication) share one measurement
 * however many connections send it. Structural, so this leaf imports nothing.
 */
export function messageBytes(message: { readonly text: string; byteLength: number | undefined }): number {
  return (message.byteLength ??= Buffer.byteLength(message.text));
}
