/**
 * Plain-text logs people can read and tools can parse: one line per event,
 * `time LEVEL [component] message key=value ...`, on stderr; the fields every
 * line of the process carries (a worker's `worker=2`) come last.
 * Hand-written: structured JSON loggers need a second tool to be readable, and
 * the server logs little enough that speed is not the concern.
 */
export type LogLevel = 'debug' | 'info' | 'warn' | 'error' | 'silent';
const RANK: Record<LogLevel, number> = { debug: 10, info: 20, warn: 30, error: 40, silent: 100 };

export interface Logger {
  debug(message: string, fields?: Record<string, unknown>): void;
  info(message: string, fields?: Record<string, unknown>): void;
  warn(message: string, fields?: Record<string, unknown>): void;
  error(message: string, fields?: Record<string, unknown>): void;
  child(component: string): Logger;
}

function parseLevel(value: string | undefined): LogLevel {
  return value !== undefined && value in RANK ? (value as LogLevel) : 'info';
}

let threshold = RANK[parseLevel(typeof process === 'undefined' ? undefined : process.env.PERSEID_LOG_LEVEL)];
let sink: (line: string) => void = (line) => process.stderr.write(line + '\n');

let context: Record<string, unknown> = {};

export function setLogLevel(level: LogLevel): void {
  threshold = RANK[level];
}

/** Fields for every line of this process, after the line's own: what tells the processes of a machine apart. */
export function setLogContext(fields: Record<string, unknown>): void {
  context = fields;
}

/** Redirects log lines (tests capture them; the CLI keeps stderr). */
export function setLogSink(write: (line: string) => void): void {
  sink = write;
}

/** A field is cut past this many characters: a client's oversized input quoted in an error must not make the line as long. */
const MAX_VALUE_CHARS = 4000;

function clipped(text: string): string {
  return text.length <= MAX_VALUE_CHARS ? text : `${text.slice(0, MAX_VALUE_CHARS)}... (${text.length - MAX_VALUE_CHARS} more characters)`;
}

function formatValue(value: unknown): string {
  if (value instanceof Error) return JSON.stringify(clipped(value.stack ?? value.message));
  const text = typeof value === 'string' ? value : JSON.stringify(value);
  if (text === undefined) return JSON.stringify(String(value));
  return /^[\w.:/@+-]+$/.test(text) && text.length <= MAX_VALUE_CHARS ? text : JSON.stringify(clipped(text));
}

function write(level: LogLevel, component: string, message: string, fields?: Record<string, unknown>): void {
  if (RANK[level] < threshold) return;
  let line = `${new Date().toISOString()} ${level.toUpperCase().padEnd(5)} [${component}] ${message}`;
  const own = fields ?? {};
  // The line's own fields, then the process's (a line's own value of the same name wins).
  for (const [key, value] of [...Object.entries(own), ...Object.entries(context).filter(([key]) => !(key in own))]) {
    if (value !== undefined) line += ` ${key}=${formatValue(value)}`;
  }
  sink(line);
}

export function createLogger(component: string): Logger {
  return {
    debug: (m, f) => write('debug', component, m, f),
    info: (m, f) => write('info', component, m, f),
    warn: (m, f) => write('warn', component, m, f),
    error: (m, f) => write('error', component, m, f),
    child: (sub) => createLogger(`${component}:${sub}`),
  };
}

/** A URL fit for logs and error messages: its password hidden. */
export function redactedUrl(raw: string): string {
  try {
    const url = new URL(raw);
    if (url.password) url.password = '***';
    return url.href;
  } catch {
    return '(an unparsable URL)';
  }
}
