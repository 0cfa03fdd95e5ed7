/** The `perseid` command's commands, loaded by main.ts once the Node version is known to be new enough. */
import { readFileSync } from 'node:fs';
import { helpText, nearestFlag, parseCommand, UsageError, type CommandSpec, type Parsed } from './args.js';
import { ChangeSourceUnavailableError } from '../data/change-source.js';
import { DatabaseUnavailableError } from '../data/driver.js';
import { StoreError } from '../data/embedded/store-errors.js';
import { createCommand, runCreate } from './create.js';
import { devCommand, runDev } from './dev.js';
import { autoscaleCommand, runAutoscale } from './autoscale.js';
import { adviseCommand, capacityCommand, runAdvise, runCapacity, runTop, topCommand } from './apm.js';
import { loadCommand, runLoadCommand } from './load.js';
import { runStart, startCommand } from './start.js';
import { StartupError } from './startup-error.js';
import { runStoreCommand, storeCommand } from './store.js';

interface Command {
  spec: CommandSpec;
  /** Resolves with the exit status, or undefined for a command that keeps running (a server). */
  run(parsed: Parsed): Promise<number | undefined>;
}

const commands: Record<string, Command> = {
  create: { spec: createCommand, run: (parsed) => runCreate(parsed) },
  dev: { spec: devCommand, run: (parsed) => runDev(parsed) },
  start: { spec: startCommand, run: (parsed) => runStart(parsed).then(() => undefined) },
  load: { spec: loadCommand, run: (parsed) => runLoadCommand(parsed) },
  autoscale: { spec: autoscaleCommand, run: (parsed) => runAutoscale(parsed).then(() => undefined) },
  top: { spec: topCommand, run: (parsed) => runTop(parsed) },
  advise: { spec: adviseCommand, run: (parsed) => runAdvise(parsed) },
  capacity: { spec: capacityCommand, run: (parsed) => runCapacity(parsed) },
  store: { spec: storeCommand, run: (parsed) => runStoreCommand(parsed) },
};

function version(): string {
  const pkg = JSON.parse(readFileSync(new URL('../../../package.json', import.meta.url), 'utf8')) as { version: string };
  return pkg.version;
}

function overview(): string {
  const width = Math.max(...Object.keys(commands).map((n) => n.length)) + 2;
  return [
    'perseid: a real-time application server that speaks Meteor\'s DDP protocol.',
    '',
    'Usage: perseid <command> [options]',
    '',
    'Commands:',
    ...Object.values(commands).map(({ spec }) => `  ${spec.name.padEnd(width)}${spec.summary}`),
    '',
    'Run `perseid <command> --help` for a command\'s options; `perseid --version` prints the version.',
  ].join('\n');
}

/** Commands whose output a person pipes on (`perseid top --json | head`): a reader that goes away ends them quietly, as it ends `ls`. */
const PRINTS_FOR_A_READER = new Set(['top', 'advise', 'capacity']);

function endWhenReaderLeaves(error: NodeJS.ErrnoException): void {
  if (error.code !== 'EPIPE') throw error;
  process.exit(0);
}

function unknownCommand(name: string): number {
  const near = nearestFlag(name, Object.keys(commands));
  process.stderr.write(`perseid: unknown command '${name}'${near ? ` (did you mean ${near}?)` : ''}\n\n${overview()}\n`);
  return 2;
}

async function main(argv: string[]): Promise<number> {
  const [name, ...rest] = argv;
  if (name === undefined || name === '--help' || name === '-h' || name === 'help') {
    const topic = name === 'help' ? rest[0] : undefined;
    const command = topic ? commands[topic] : undefined;
    if (topic && !command) return unknownCommand(topic);
    process.stdout.write((command ? helpText(command.spec) : overview()) + '\n');
    return 0;
  }
  if (name === '--version' || name === '-v' || name === 'version') {
    process.stdout.write(`${version()}\n`);
    return 0;
  }
  const command = commands[name];
  if (!command) return unknownCommand(name);
  if (PRINTS_FOR_A_READER.has(name)) process.stdout.on('error', endWhenReaderLeaves);
  let parsed: Parsed;
  try {
    parsed = parseCommand(command.spec, rest);
    if (parsed.help) {
      process.stdout.write(helpText(command.spec) + '\n');
      return 0;
    }
    return (await command.run(parsed)) ?? -1; // -1: still running (a server); its exit is its own
  } catch (error) {
    if (error instanceof UsageError) {
      process.stderr.write(`perseid ${name}: ${error.message}\n\nRun \`perseid ${name} --help\` for usage.\n`);
      return 2;
    }
    if (error instanceof DatabaseUnavailableError) {
      process.stderr.write(`perseid ${name}: ${error.detail}\n`);
      return 1;
    }
    if (error instanceof StartupError) {
      process.stderr.write(`perseid ${name}: ${error.message}\n`);
      if (process.env.PERSEID_LOG_LEVEL === 'debug' && error.cause instanceof Error) process.stderr.write(`${error.cause.stack}\n`);
      return 1;
    }
    if (error instanceof StoreError || error instanceof ChangeSourceUnavailableError) {
      process.stderr.write(`perseid ${name}: ${error.message}\n`);
      return 1;
    }
    throw error;
  }
}

main(process.argv.slice(2)).then(
  (code) => {
    if (code >= 0) process.exit(code);
  },
  (error: unknown) => {
    process.stderr.write(`perseid: ${error instanceof Error ? (error.stack ?? error.message) : String(error)}\n`);
    process.exit(1);
  },
);
