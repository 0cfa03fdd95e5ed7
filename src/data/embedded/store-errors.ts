/**
 * Why the embedded store refuses to open: a data directory another process
 * holds, or damage found on reading it. Each is one line saying what to do;
 * the `perseid` command prints them without a stack trace.
 */
import { defineThrownError, type CataloguedError } from '../../ddp/errors.js';

const IN_USE = defineThrownError(
  'STORE_IN_USE',
  'STORE_IN_USE',
  'the data directory {dir} is in use by another process ({holder}): stop it, or give this one another data directory',
);
const DAMAGED = defineThrownError(
  'STORE_DAMAGED',
  'STORE_DAMAGED',
  'the embedded store at {dir} is damaged: {what}. Run `perseid store repair --data-dir {dir}` to set the damaged records aside and keep every intact one',
);

function fill(entry: CataloguedError, values: Record<string, string>): string {
  return entry.reason.replace(/\{(\w+)\}/g, (_m, key: string) => values[key] ?? `{${key}}`);
}

/** An error an operator acts on: its message is the whole story, in one line. */
export class StoreError extends Error {
  constructor(
    readonly code: string,
    message: string,
  ) {
    super(message);
    this.name = 'StoreError';
  }
}

export class StoreInUseError extends StoreError {
  constructor(dir: string, holder: string) {
    super(IN_USE.code as string, fill(IN_USE, { dir, holder }));
  }
}

export class StoreDamagedError extends StoreError {
  constructor(dir: string, what: string) {
    super(DAMAGED.code as string, fill(DAMAGED, { dir, what }));
  }
}
