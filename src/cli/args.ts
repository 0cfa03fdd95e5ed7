/** Command-line parsing shared by every `perseid` command: options, environment fallbacks, help. */
import { parseArgs, type ParseArgsConfig } from 'node:util';
import { nearestName } from '../nearest-name.js';
import { flagNpmTook } from './npm-flags.js';

export interface OptionSpec {
  type: 'string' | 'boolean';
  short?: string;
  /** The environment variable that sets it when the flag is absent. */
  env?: string;
  default?: string | boolean;
  /** One line for --help. */
  help: string;
  /** Placeholder in --help, e.g. `<port>`. */
  value?: string;
  /** May be given several times; the value is then an array. */
  multiple?: boolean;
}

export interface CommandSpec {
  name: string;
  summary: string;
  usage: string;
  /** A command line that works when copied (in an app made by `perseid create`, or against its running server). */
  example: string;
  options: Record<string, OptionSpec>;
  /** Extra paragraphs for --help. */
  details?: string;
  /** It takes arguments besides its options (an app module, a directory); one that does not refuses any. */
  takesArguments?: boolean;
}

export class UsageError extends Error {}

export function helpText(command: CommandSpec): string {
  const lines = [`${command.summary}`, '', `Usage: ${command.usage}`, `Example: ${command.example}`, '', 'Options:'];
  const rows = Object.entries(command.options).map(([name, spec]) => {
    const flag = `${spec.short ? `-${spec.short}, ` : '    '}--${name}${spec.value ? ` ${spec.value}` : ''}`;
    const extra = [spec.env ? `env ${spec.env}` : '', spec.default !== undefined && spec.default !== false ? `default ${String(spec.default)}` : '']
      .filter(Boolean)
      .join(', ');
    return [flag, `${spec.help}${extra ? ` (${extra})` : ''}`] as const;
  });
  rows.push(['-h, --help', 'Show this help']);
  const width = Math.max(...rows.map(([flag]) => flag.length)) + 2;
  for (const [flag, text] of rows) lines.push(`  ${flag.padEnd(width)}${text}`);
  if (command.details) lines.push('', command.details);
  return lines.join('\n');
}

export interface Parsed {
  values: Record<string, string | boolean | string[] | undefined>;
  positionals: string[];
  help: boolean;
}

/** The options of each parse that an environment variable set, and which: an error about the value names what was set. */
const fromEnvironment = new WeakMap<Parsed['values'], Map<string, string>>();

/** The option as the user gave it: `PORT` when the environment set it, else `--port`. */
export function optionName(values: Parsed['values'], name: string): string {
  return fromEnvironment.get(values)?.get(name) ?? `--${name}`;
}

/** Parses argv for `command`; flags win over environment variables, which win over defaults. */
export function parseCommand(command: CommandSpec, argv: string[], env: NodeJS.ProcessEnv = process.env): Parsed {
  const npmTook = flagNpmTook(command.options, env);
  if (npmTook) throw new UsageError(npmTook);
  const options: NonNullable<ParseArgsConfig['options']> = { help: { type: 'boolean', short: 'h' } };
  for (const [name, spec] of Object.entries(command.options)) {
    options[name] = { type: spec.type, ...(spec.short ? { short: spec.short } : {}), ...(spec.multiple ? { multiple: true } : {}) };
  }
  let parsed;
  try {
    parsed = parseArgs({ args: negativeValuesJoined(argv, command.options), options, allowPositionals: true, strict: true });
  } catch (error) {
    throw new UsageError(explainParseError(error as NodeJS.ErrnoException, ['help', ...Object.keys(command.options)]));
  }
  if (!command.takesArguments && parsed.positionals.length > 0) {
    throw new UsageError(`takes no arguments, only options (got ${parsed.positionals.join(' ')})`);
  }
  const values: Parsed['values'] = {};
  const setBy = new Map<string, string>();
  for (const [name, spec] of Object.entries(command.options)) {
    let value = parsed.values[name] as string | boolean | string[] | undefined;
    if (value === undefined && spec.env && env[spec.env] !== undefined && env[spec.env] !== '') {
      const raw = env[spec.env]!;
      value = spec.type === 'boolean' ? !['0', 'false', 'no', 'off'].includes(raw.toLowerCase()) : raw;
      setBy.set(name, spec.env);
    }
    values[name] = value ?? spec.default;
  }
  fromEnvironment.set(values, setBy);
  return { values, positionals: parsed.positionals, help: parsed.values.help === true };
}

/**
 * `--drain-ms -5` as `--drain-ms=-5`: node:util takes a value starting with '-'
 * for a flag, so a negative number would be refused as a missing value instead
 * of reaching the option's range check, which says what is allowed.
 */
function negativeValuesJoined(argv: readonly string[], specs: Record<string, OptionSpec>): string[] {
  const out: string[] = [];
  for (let i = 0; i < argv.length; i++) {
    const arg = argv[i]!;
    if (arg === '--') return [...out, ...argv.slice(i)];
    const name = arg.startsWith('--') ? arg.slice(2) : Object.keys(specs).find((n) => specs[n]!.short !== undefined && arg === `-${specs[n]!.short}`);
    const next = argv[i + 1];
    if (name !== undefined && specs[name]?.type === 'string' && next !== undefined && /^-\.?\d/.test(next)) {
      out.push(`--${name}=${next}`);
      i++;
    } else out.push(arg);
  }
  return out;
}

/** The flag meant by a mistyped one, when one is close enough to be a likely typo. */
export function nearestFlag(given: string, flags: readonly string[]): string | undefined {
  return nearestName(given.replace(/^-+/, '').split('=')[0]!, flags);
}

/** node:util's messages, said our way: an unknown flag names the nearest real one. */
function explainParseError(error: NodeJS.ErrnoException, flags: readonly string[]): string {
  if (error.code === 'ERR_PARSE_ARGS_UNKNOWN_OPTION') {
    const given = /Unknown option '([^']+)'/.exec(error.message)?.[1] ?? '';
    const near = nearestFlag(given, flags);
    return `unknown option ${given}${near ? ` (did you mean --${near}?)` : ''}`;
  }
  if (error.code === 'ERR_PARSE_ARGS_INVALID_OPTION_VALUE') {
    const flag = /--([\w-]+)/.exec(error.message)?.[1];
    if (flag && / argument missing/.test(error.message)) return `--${flag} needs a value`;
    // What follows the flag starts with '-' (another flag, most likely).
    if (flag && / argument is ambiguous/.test(error.message)) return `--${flag} needs a value (one starting with '-' is written --${flag}=<value>)`;
    if (flag) return `--${flag} takes no value`;
  }
  return error.message.split('. ')[0]!;
}

/** The command's one positional argument (its app module, directory, scenario): none, or more than one, is a usage error. */
export function onePositional(parsed: Parsed, missing: string, what: string): string {
  const [first, ...extra] = parsed.positionals;
  if (first === undefined || first.trim() === '') throw new UsageError(missing);
  if (extra.length > 0) throw new UsageError(`One ${what} at a time (got ${[first, ...extra.slice(0, -1)].join(', ')} and ${extra.at(-1)})`);
  return first;
}

export function integerOption(values: Parsed['values'], name: string, min: number, max: number): number | undefined {
  const raw = values[name];
  if (raw === undefined) return undefined;
  const n = Number(raw);
  if (!Number.isInteger(n) || n < min || n > max) throw new UsageError(`${optionName(values, name)} must be an integer from ${min} to ${max} (got ${String(raw)})`);
  return n;
}

export function numberOption(values: Parsed['values'], name: string, min: number, max: number): number | undefined {
  const raw = values[name];
  if (raw === undefined) return undefined;
  const n = Number(raw);
  if (!Number.isFinite(n) || n < min || n > max) throw new UsageError(`${optionName(values, name)} must be a number from ${min} to ${max} (got ${String(raw)})`);
  return n;
}
