#!/usr/bin/env node
/**
 * `npm run services -- <command> [service ...]`: the services the integration
 * suites use, on loopback. Installs or builds each on first use.
 */
import { SERVICES, type ServiceName } from './services.js';
import { serviceUrl, startService, stopService, STATE_FILE } from './control.js';
import { CACHE_DIR, RUN_DIR } from './process.js';
import { ensureProxies } from './proxies.js';

const HELP = `Usage: services <start|stop|restart|status> [redis] [mongo-java-server] [ferretdb]

Runs the servers the integration test suites need, bound to 127.0.0.1, and
records their URLs in ${STATE_FILE} (the suites read it; PERSEID_TEST_<NAME>_URL
overrides). With no service named, all of them.

  start    install or build if needed, then start (no-op when running); with no
           service named, also installs nginx and HAProxy (the proxies suite)
           when it can (root and apt-get), or says how
  stop     stop, saying what it stopped (only processes this tool started)
  restart  stop, then start
  status   print each one's URL, exit 3 if any is not running

Default ports: redis 6380, mongo-java-server 27019, ferretdb 27018.
Run directory (pid files, logs, data, ${STATE_FILE.split('/').pop()}): ${RUN_DIR}
  (PERSEID_SERVICES_RUN_DIR overrides)
Cache directory (downloads and builds, kept between runs): ${CACHE_DIR}
  (PERSEID_SERVICES_CACHE_DIR overrides)`;

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
    if (names.length === 0) ensureProxies();
    break;
  case 'stop':
    for (const name of chosen) {
      const stopped = await stopService(name);
      process.stdout.write(stopped ? `stopped ${name} (pid ${stopped.pid}, port ${stopped.port})\n` : `${name} was not running (nothing to stop)\n`);
    }
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
