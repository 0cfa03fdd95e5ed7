/** `perseid store repair`: rebuild a damaged embedded store from its intact records, saying what was done. */
import { basename, resolve } from 'node:path';
import { repairStore, type RepairReport } from '../data/embedded/repair.js';
import { UsageError, type CommandSpec, type Parsed } from './args.js';

export const storeCommand: CommandSpec = {
  takesArguments: true,
  name: 'store',
  summary: 'Look after the embedded store: `repair` rebuilds a damaged data directory from its intact records.',
  usage: 'perseid store repair [--data-dir <dir>] [--dry-run]',
  example: 'perseid store repair --data-dir .perseid/data --dry-run',
  options: {
    'data-dir': { type: 'string', env: 'PERSEID_DATA_DIR', default: '.perseid/data', value: '<dir>', help: 'Directory of the embedded store' },
    'dry-run': { type: 'boolean', help: 'Say what repair would do, and change nothing' },
  },
  details: [
    'Every record of the write-ahead log and of snapshots carries a checksum. When one',
    'does not match (or a record is missing), `perseid start` refuses to open the store',
    'and names the place. `perseid store repair` then keeps every intact record, sets the',
    'damaged ones aside in <data-dir>/repair-<time>/damaged.log (the original files are',
    'kept in that folder too, as hard links), and rewrites the store as one snapshot.',
    'A document whose last write was damaged comes back as it was before that write.',
    'Stop the server first: repair takes the directory\'s lock like the server does.',
  ].join('\n'),
};

function summary(dir: string, report: RepairReport, dryRun: boolean): string[] {
  const lines = report.files.map(({ file, records }) => `  ${basename(file)}: ${records} intact record${records === 1 ? '' : 's'}`);
  for (const d of report.damaged) lines.push(`  damaged: ${basename(d.file)} line ${d.line}: ${d.reason}`);
  const contents = `${report.collections} collection${report.collections === 1 ? '' : 's'}, ${report.documents} document${report.documents === 1 ? '' : 's'}, up to seq ${report.lastSeq}`;
  if (report.healthy) {
    lines.push(`Nothing to repair: the store opens as it is (${contents}).`);
  } else if (dryRun) {
    lines.push(`Repair would keep ${contents}, and set ${report.damaged.length} damaged record${report.damaged.length === 1 ? '' : 's'} aside. Nothing was changed (--dry-run).`);
  } else {
    lines.push(`Kept ${contents}.`);
    lines.push(`Set ${report.damaged.length} damaged record${report.damaged.length === 1 ? '' : 's'} aside in ${report.setAside}/damaged.log; the original files are in that folder too (delete it once you are satisfied).`);
    lines.push(`The store opens again: perseid start <app> --data-dir ${dir}`);
  }
  return lines;
}

export async function runStoreCommand(parsed: Parsed): Promise<number> {
  const [action, ...extra] = parsed.positionals;
  if (action !== 'repair') throw new UsageError(action ? `unknown action '${action}' (the one action is repair)` : 'say what to do: perseid store repair');
  if (extra.length) throw new UsageError(`unexpected argument '${extra[0]}'`);
  const dir = resolve(String(parsed.values['data-dir']));
  const dryRun = parsed.values['dry-run'] === true;
  process.stdout.write(`perseid store repair: reading ${dir}\n`);
  const report = await repairStore(dir, { dryRun });
  process.stdout.write(summary(dir, report, dryRun).join('\n') + '\n');
  return 0;
}
