/** A promise given a deadline: for answers that may never come (a silent connection, a client that keeps a command to resend). */

/** `operation`'s outcome, or a rejection with `timedOut()` once `ms` have passed without one. */
export async function withDeadline<T>(operation: Promise<T>, ms: number, timedOut: () => Error): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const deadline = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(timedOut()), ms);
  });
  try {
    return await Promise.race([operation, deadline]);
  } finally {
    clearTimeout(timer);
  }
}
