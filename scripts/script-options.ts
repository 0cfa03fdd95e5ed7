/**
 * The command line of a script in scripts/: options parsed strictly, `--help`
 * printed, and a bad option said in one line with exit status 2.
 */
import { parseArgs, type ParseArgsConfig } from 'node:util';

type Options = NonNullable<ParseArgsConfig['options']>;

export interface ScriptOptions<O extends Options> {
  values: ReturnType<typeof parseArgs<{ options: O; strict: true }>>['values'];
  /** Says `message` about the options in one line and exits 2. */
  fail(message: string): never;
  /** `value` as an integer of at least `min`, or `fallback` when absent; anything else fails. */
  integer(value: string | undefined, name: string, fallback: number, min?: number): number;
}

export function scriptOptions<O extends Options>(script: string, help: string, options: O): ScriptOptions<O> {
  const fail = (message: string): never => {
    process.stderr.write(`${script}: ${message}\n\nRun with --help for usage.\n`);
    process.exit(2);
  };
  let values: ScriptOptions<O>['values'];
  try {
    values = parseArgs({ options: { ...options, help: { type: 'boolean', short: 'h' } }, strict: true }).values as ScriptOptions<O>['values'];
  } catch (error) {
    return fail((error as Error).message);
  }
  if ((values as { help?: boolean }).help) {
    process.stdout.write(`${help}\n`);
    process.exit(0);
  }
  const integer = (value: string | undefined, name: string, fallback: number, min = 1): number => {
    if (value === undefined) return fallback;
    const n = Number(value);
    if (!Number.isInteger(n) || n < min) fail(min === 1 ? `--${name} must be a positive integer (got ${value})` : `--${name} must be an integer of at least ${min} (got ${value})`);
    return n;
  };
  return { values, fail, integer };
}
