/**
 * nginx and HAProxy, which the proxies suite runs in front of two servers
 * (Debian's packages). Installed with apt-get when this runs as root on a
 * machine that has it; otherwise one line says how, and the suite skips.
 */
import { spawnSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import { log } from './process.js';

const PROXIES = [
  { name: 'nginx', binary: '/usr/sbin/nginx', package: 'nginx' },
  { name: 'haproxy', binary: '/usr/sbin/haproxy', package: 'haproxy' },
];

function installed(binary: string, name: string): boolean {
  return existsSync(binary) || spawnSync('sh', ['-c', `command -v ${name}`], { stdio: 'ignore' }).status === 0;
}

/** Installs the proxies that are missing when it can; returns the names still missing. */
export function ensureProxies(): string[] {
  const missing = PROXIES.filter((p) => !installed(p.binary, p.name));
  if (missing.length === 0) return [];
  const packages = missing.map((p) => p.package);
  const canInstall = process.getuid?.() === 0 && spawnSync('sh', ['-c', 'command -v apt-get'], { stdio: 'ignore' }).status === 0;
  if (canInstall) {
    log('proxies', `installing ${packages.join(' ')} with apt-get`);
    const env = { ...process.env, DEBIAN_FRONTEND: 'noninteractive' };
    const update = spawnSync('apt-get', ['update', '-qq'], { stdio: 'inherit', env });
    const install = update.status === 0 ? spawnSync('apt-get', ['install', '-y', '-qq', ...packages], { stdio: 'inherit', env }) : update;
    if (install.status === 0) return [];
  }
  const still = missing.filter((p) => !installed(p.binary, p.name)).map((p) => p.package);
  if (still.length) log('proxies', `${still.join(' and ')} not installed: run \`sudo apt-get install ${still.join(' ')}\` (the proxies suite is skipped without them)`);
  return still;
}
