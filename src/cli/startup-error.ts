/**
 * A start-up failure a person can act on: the CLI prints its message as one
 * line (what went wrong and what to do) and exits 1, with no stack trace
 * (the error behind it, `cause`, is printed only with PERSEID_LOG_LEVEL=debug).
 */
export class StartupError extends Error {
  constructor(message: string, cause?: unknown) {
    super(message, cause === undefined ? undefined : { cause });
    this.name = 'StartupError';
  }
}
