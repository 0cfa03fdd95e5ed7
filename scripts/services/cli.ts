#!/usr/bin/env node
/**
 * `npm run services -- <command> [service ...]`: the services the integration
 * suites use, on loopback. Installs or builds each on first use.
 */
import { SERVICES, type ServiceName } from './services.js';
import { serviceUrl, startService, stopService, STATE_FILE } from './control.js';

const HELP = `Usage: services <start|stop|restart|status> [redis] [mongo-java-server] [ferretdb]

Runs the servers the integration test suites need, bound to 127.0.0.1, and
records their URLs in ${STATE_FILE} (the suites read it; PERSEID_TEST_<NAME>_URL
overrides). With no service named, all of them.

  start    install or build if needed, then start (no-op when running)
  stop     stop (only the process this tool started)
  restart  stop, then start
  status   print each one's URL, exit 3 if any is not running

Default ports: redis 6380, mongo-java-server 27019, ferretdb 27018.`;

const [command, ...names] = process.argv.slice(2);
const all = Object.keys(SERVICES) as ServiceName[];
const chosen = (names.length ? names : all) as ServiceName[];
const unknown = chosen.filter((n) => !all.includes(n));

if (!command || command === '--help' || command === '-h' || unknown.length) {
  if (unknown.length) process.stderr.write(`unknown service: ${unknown.join(', ')}\n\n`);
  process.stdout.write(HELP + '\n');
  process.exit(command && !unknown.length ? 0 : 2);
}

async function start(name: ServiceName): Promise<void> {
  const running = await startService(name, { port: SERVICES[name].defaultPort, record: true });
  process.stdout.write(`${name} ${running.url}\n`);
}

switch (command) {
  case 'start':
    for (const name of chosen) await start(name);
    break;
  case 'stop':
    for (const name of chosen) await stopService(name);
    break;
  case 'restart':
    for (const name of chosen) {
      await stopService(name);
      await start(name);
    }
    break;
  case 'status': {
    let missing = 0;
    for (const name of chosen) {
      const url = await serviceUrl(name);
      process.stdout.write(`${name} ${url ?? 'not running'}\n`);
      if (!url) missing++;
    }
    process.exit(missing ? 3 : 0);
    break;
  }
  default:
    process.stderr.write(`unknown command: ${command}\n\n${HELP}\n`);
    process.exit(2);
}
