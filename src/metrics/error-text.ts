/**
 * Errors as the APM keeps them: an error's message can carry a client's input
 * (`'Invalid email: ' + email`, up to a whole DDP message), and every error is
 * kept in the recent errors and traces, and sent with each dashboard refresh
 * and each scrape of a worker; so messages and stacks are cut to a bounded
 * length here, once.
 */

const MAX_MESSAGE = 500;
/** About forty frames. */
const MAX_STACK = 4000;

/** `text` cut to at most `max` characters, with an ellipsis when cut. */
export function cut(text: string, max = MAX_MESSAGE): string {
  return text.length > max ? `${text.slice(0, max)}…` : text;
}

/** The message and stack of `error` (anything thrown), bounded; the stack's copy of the message is the cut one. */
export function errorText(error: unknown): { message: string; stack?: string } {
  const err = error instanceof Error ? error : new Error(String(error));
  const message = cut(err.message);
  if (err.stack === undefined) return { message };
  const at = message === err.message ? -1 : err.stack.indexOf(err.message);
  const stack = at < 0 ? err.stack : err.stack.slice(0, at) + message + err.stack.slice(at + err.message.length);
  return { message, stack: cut(stack, MAX_STACK) };
}
