/**
 * `perseid create <dir>`: a new app from one of the templates in templates/
 * (the server module, a page that uses the client, a test that starts the app
 * and talks DDP to it, a README), with a package.json whose `dev`, `start` and
 * `test` scripts are all it needs.
 */
import { cpSync, existsSync, mkdirSync, readdirSync, readFileSync, statSync, writeFileSync } from 'node:fs';
import { basename, dirname, isAbsolute, join, relative, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { onePositional, UsageError, type CommandSpec, type Parsed } from './args.js';
import { StartupError } from './startup-error.js';

const TEMPLATES = fileURLToPath(new URL('../../../templates/', import.meta.url));
const PACKAGE_ROOT = fileURLToPath(new URL('../../../', import.meta.url)).replace(/[/\\]$/, '');
const PACKAGE = JSON.parse(readFileSync(join(PACKAGE_ROOT, 'package.json'), 'utf8')) as { version: string; engines: { node: string } };
/**
 * Perseid runs from a checkout of its repository (its sources are there; an
 * installed copy, under node_modules, has only dist/): a new app then depends
 * on that checkout, since Perseid is not on the npm registry yet.
 */
const FROM_CHECKOUT = !PACKAGE_ROOT.split(/[/\\]/).includes('node_modules') && existsSync(join(PACKAGE_ROOT, 'src', 'index.ts'));
export const TEMPLATE_NAMES = ['minimal', 'tasks', 'chat'] as const;

export const createCommand: CommandSpec = {
  takesArguments: true,
  name: 'create',
  summary: 'Create a new Perseid app in a new directory: a server, a page, a test and a README, ready for npm install.',
  usage: 'perseid create <dir> [options]',
  example: 'perseid create my-app --template tasks',
  options: {
    template: { type: 'string', short: 't', default: 'minimal', value: '<name>', help: `What the app starts as: ${TEMPLATE_NAMES.join(', ')}` },
    perseid: {
      type: 'string',
      env: 'PERSEID_PACKAGE',
      value: '<spec>',
      help: `Where the app's npm install gets Perseid: a version range, a tarball (perseid-${PACKAGE.version}.tgz), a directory or a git URL (default: the checkout perseid runs from, if it runs from one, else ^${PACKAGE.version})`,
    },
  },
  details: [
    'Then: cd <dir> && npm install && npm run dev (restarts and reloads the page on every save),',
    'npm test (starts the app and calls it over DDP), npm start (the server alone).',
  ].join('\n'),
};

/** npm's rules for a package name, applied to the directory's name. */
function packageName(dir: string): string {
  const name = basename(resolve(dir))
    .toLowerCase()
    .replace(/[^a-z0-9._~-]+/g, '-')
    .replace(/^[._-]+|-+$/g, '');
  return name || 'perseid-app';
}

/** A tarball or a directory given by path becomes a file: spec that works from inside the new app; one that is not there is refused. */
function perseidSpec(raw: string | undefined): string {
  if (raw === undefined || raw === '') return FROM_CHECKOUT ? `file:${PACKAGE_ROOT}` : `^${PACKAGE.version}`;
  const path = raw.startsWith('file:') ? raw.slice('file:'.length) : raw;
  const isPath = raw.startsWith('file:') || path.startsWith('.') || isAbsolute(path) || /\.t(ar\.)?gz$/.test(path);
  if (!isPath || /^[a-z+]+:/.test(path)) return raw;
  const full = resolve(path);
  const missing = !existsSync(full) ? `there is no ${full}` : statSync(full).isDirectory() && !existsSync(join(full, 'package.json')) ? `${full} has no package.json` : undefined;
  if (missing) throw new StartupError(`--perseid ${raw}: ${missing}: give a perseid tarball (npm pack), a checkout of Perseid, or a version`);
  return `file:${full}`;
}

/** Where Perseid comes from, said once the app is made: the default needs saying either way. */
function specNote(raw: string | undefined, spec: string): string | undefined {
  if (raw !== undefined && raw !== '') return undefined;
  if (FROM_CHECKOUT) return `It depends on the Perseid checkout this command ran from (${spec}); --perseid <tarball|path|version> chooses another.`;
  return `perseid ${spec} may not be on the npm registry yet: if npm install cannot find it, make the app with --perseid <tarball|path|version>.`;
}

/** `target` as the user gave it: relative to here when given so and that is not longer, else absolute. */
function shownPath(given: string, target: string): string {
  const rel = relative(process.cwd(), target) || '.';
  return isAbsolute(given) || rel.length > target.length ? target : rel;
}

/** `path` as a POSIX shell reads it after `cd`: quoted when it holds anything a shell would read differently. */
function shellWord(path: string): string {
  const word = path.startsWith('-') ? `./${path}` : path;
  return /^[\w@%+=:,./-]+$/.test(word) ? word : `'${word.replaceAll("'", `'\\''`)}'`;
}

export async function runCreate(parsed: Parsed): Promise<number> {
  const dir = onePositional(parsed, 'Missing the directory: perseid create <dir>, e.g. perseid create my-app', 'directory');
  const template = String(parsed.values.template);
  if (!(TEMPLATE_NAMES as readonly string[]).includes(template)) throw new UsageError(`--template must be one of ${TEMPLATE_NAMES.join(', ')} (got ${template})`);
  const target = resolve(dir);
  if (existsSync(target) && (!statSync(target).isDirectory() || readdirSync(target).length > 0)) {
    // A suggestion next to the directory, named after it: `.-2` (from `perseid create .`) would be no name at all.
    const sibling = join(dirname(target), `${basename(target)}-2`);
    const suggestion = isAbsolute(dir) ? sibling : relative(process.cwd(), sibling);
    throw new StartupError(`${dir} already exists and is not an empty directory: choose a new name, e.g. perseid create ${shellWord(suggestion)}`);
  }
  const name = packageName(dir);
  const spec = perseidSpec(parsed.values.perseid as string | undefined);

  try {
    mkdirSync(target, { recursive: true });
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code;
    const why = code === 'ENOTDIR' ? 'a file stands in its path' : code === 'EROFS' ? 'the file system is read-only' : `${code ?? (error as Error).message}`;
    throw new StartupError(`cannot create ${dir}: ${why}: choose a directory you may write in`);
  }
  cpSync(join(TEMPLATES, template), target, { recursive: true });
  const readme = readFileSync(join(TEMPLATES, 'common', 'README.md'), 'utf8').replaceAll('{{name}}', name).replaceAll('{{template}}', template);
  writeFileSync(join(target, 'README.md'), readme);
  const pkg = {
    name,
    version: '0.1.0',
    private: true,
    type: 'module',
    scripts: { dev: 'perseid dev app.js', start: 'perseid start app.js', test: 'node --test' },
    engines: { node: PACKAGE.engines.node },
    dependencies: { perseid: spec },
  };
  writeFileSync(join(target, 'package.json'), JSON.stringify(pkg, null, 2) + '\n');
  // Written here: npm leaves .gitignore files out of packages, so a template cannot carry one.
  writeFileSync(join(target, '.gitignore'), 'node_modules/\n.perseid/\n');

  const shown = shownPath(dir, target);
  const note = specNote(parsed.values.perseid as string | undefined, spec);
  process.stdout.write(
    [
      `Created ${name} in ${shown} from the ${template} template.`,
      ...(note ? [note] : []),
      '',
      'Next:',
      `  cd ${shellWord(shown)}`,
      '  npm install',
      '  npm run dev    # http://127.0.0.1:3000, reloads on every save',
      '  npm test',
      '',
    ].join('\n'),
  );
  return 0;
}
