/**
 * `npm run dev --port 4000` gives the flag to npm, which passes a script its
 * options only after `--`: npm keeps it as npm_config_port (and warns that it
 * does not know it), and hands `4000` on as an argument, or nothing for
 * `--port=4000`. The server then refused "one app module at a time (got app.js
 * and 4000)", or ran on the default port without a word. This says what to type.
 */
import type { OptionSpec } from './args.js';

/** npm's own settings of the same names as perseid's flags: they may come from an .npmrc, meant for npm. */
const NPM_OWN = new Set(['json', 'cpu', 'dry-run']);

/** The npm command that ran the script: `npm start` for the scripts npm has a command of, else `npm run <name>`. */
function npmCommand(script: string): string {
  return ['start', 'test', 'stop', 'restart'].includes(script) ? `npm ${script}` : `npm run ${script}`;
}

/** What to type instead, when npm ran this command and took one of its flags for itself; undefined otherwise. */
export function flagNpmTook(options: Record<string, OptionSpec>, env: NodeJS.ProcessEnv): string | undefined {
  const script = env.npm_lifecycle_event;
  if (!script) return undefined;
  for (const [name, spec] of Object.entries(options)) {
    const taken = env[`npm_config_${name.replaceAll('-', '_')}`];
    if (taken === undefined || NPM_OWN.has(name)) continue;
    // --port 4000 leaves "true" (4000 went on as an argument); --port=4000 leaves "4000".
    const value = spec.type === 'boolean' ? '' : ` ${taken === 'true' ? (spec.value ?? '<value>') : taken}`;
    return `npm took --${name} as an option of its own: put -- before the options for perseid, as in ${npmCommand(script)} -- --${name}${value}`;
  }
  return undefined;
}
