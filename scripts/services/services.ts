/**
 * The services the integration suites need, each installed or built on first
 * use and run on loopback: Redis (Debian's package), mongo-java-server (Maven
 * Central; change streams and a built-in oplog) and FerretDB on SQLite (the Go
 * module; oplog tailing and persistence, no change streams). See
 * ../shared/services/README.md of the steering repo for what each supports.
 */
import { execFileSync, spawnSync } from 'node:child_process';
import { cpSync, existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, renameSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { connect } from 'node:net';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { CACHE_DIR, HOST, log, portOpen, sleep, type Launch } from './process.js';

export type ServiceName = 'redis' | 'mongo-java-server' | 'ferretdb';

export interface Service {
  readonly name: ServiceName;
  readonly defaultPort: number;
  /** Installs or builds what the service needs; quick when already done. */
  prepare(): Promise<void>;
  launch(port: number, dataDir: string): Launch;
  ready(port: number): Promise<boolean>;
  url(port: number): string;
  beforeStart?(dataDir: string): Promise<void>;
  afterStart?(url: string): Promise<void>;
}

function have(command: string): boolean {
  return spawnSync('sh', ['-c', `command -v ${command}`], { stdio: 'ignore' }).status === 0;
}

function run(name: string, command: string, args: string[], options: { cwd?: string; env?: NodeJS.ProcessEnv } = {}): string {
  const result = spawnSync(command, args, { encoding: 'utf8', cwd: options.cwd, env: { ...process.env, ...options.env }, maxBuffer: 64 * 1024 * 1024 });
  if (result.status !== 0) {
    throw new Error(`${name}: ${command} ${args.join(' ')} failed:\n${(result.stderr || result.stdout || '').split('\n').slice(-30).join('\n')}`);
  }
  return result.stdout;
}

const SOURCE_DIR = join(dirname(fileURLToPath(import.meta.url)), '..', '..', '..', 'scripts', 'services');

export const redis: Service = {
  name: 'redis',
  defaultPort: 6380,
  async prepare() {
    if (have('redis-server')) return;
    if (process.getuid?.() !== 0 || !have('apt-get')) throw new Error('redis: redis-server is missing (apt-get install redis-server)');
    log('redis', 'installing redis-server with apt-get');
    run('redis', 'apt-get', ['update', '-qq']);
    run('redis', 'apt-get', ['install', '-y', '-qq', 'redis-server'], { env: { DEBIAN_FRONTEND: 'noninteractive' } });
  },
  launch(port, dataDir) {
    return {
      command: 'redis-server',
      args: ['--bind', HOST, '--port', String(port), '--save', '', '--appendonly', 'no', '--protected-mode', 'yes', '--daemonize', 'no', '--dir', dataDir],
      // Redis retitles itself "redis-server 127.0.0.1:PORT".
      markers: ['redis-server', `${HOST}:${port}`],
    };
  },
  ready: (port) =>
    new Promise((resolve) => {
      const socket = connect({ host: HOST, port });
      let reply = '';
      socket.once('connect', () => socket.write('PING\r\n'));
      socket.on('data', (d) => {
        reply += d.toString();
        if (reply.includes('\r\n')) {
          socket.destroy();
          resolve(reply.startsWith('+PONG'));
        }
      });
      socket.once('error', () => resolve(false));
    }),
  url: (port) => `redis://${HOST}:${port}`,
};

const MJS_VERSION = process.env.PERSEID_MJS_VERSION ?? '1.47.0';
const MJS_BUILD = join(CACHE_DIR, `mongo-java-server-${MJS_VERSION}`);
const MJS_MAIN = 'PerseidMongoJavaServer';

export const mongoJavaServer: Service = {
  name: 'mongo-java-server',
  defaultPort: 27019,
  async prepare() {
    const pom = join(SOURCE_DIR, 'mongo-java-server', 'pom.xml');
    const source = join(SOURCE_DIR, 'mongo-java-server', `${MJS_MAIN}.java`);
    const classpath = join(MJS_BUILD, 'classpath.txt');
    const compiled = join(MJS_BUILD, 'classes', `${MJS_MAIN}.class`);
    mkdirSync(join(MJS_BUILD, 'classes'), { recursive: true });
    const stale = (target: string, ...sources: string[]) => !existsSync(target) || sources.some((s) => statSync(s).mtimeMs > statSync(target).mtimeMs);
    if (stale(classpath, pom)) {
      if (!have('mvn') || !have('javac')) throw new Error('mongo-java-server: Maven and a JDK are needed to build it');
      log('mongo-java-server', `resolving ${MJS_VERSION} with Maven`);
      run('mongo-java-server', 'mvn', ['-q', '-B', '-f', pom, `-Dmjs.version=${MJS_VERSION}`, 'dependency:build-classpath', `-Dmdep.outputFile=${classpath}.tmp`]);
      renameSync(`${classpath}.tmp`, classpath);
    }
    if (stale(compiled, source, classpath)) {
      run('mongo-java-server', 'javac', ['-d', join(MJS_BUILD, 'classes'), '-cp', readFileSync(classpath, 'utf8').trim(), source]);
      log('mongo-java-server', 'built the launcher');
    }
  },
  launch(port) {
    // Never built here (stopping, say): the markers are all that is needed then.
    const resolved = join(MJS_BUILD, 'classpath.txt');
    const classpath = `${join(MJS_BUILD, 'classes')}:${existsSync(resolved) ? readFileSync(resolved, 'utf8').trim() : ''}`;
    return {
      command: 'java',
      args: ['-Xmx1g', '-Dorg.slf4j.simpleLogger.defaultLogLevel=warn', '-cp', classpath, MJS_MAIN, '--port', String(port), '--wire-version', '13'],
      markers: [MJS_MAIN, `--port ${port} `],
    };
  },
  ready: portOpen,
  url: (port) => `mongodb://${HOST}:${port}/`,
};

const FERRETDB_VERSION = process.env.PERSEID_FERRETDB_VERSION ?? 'v1.24.0';
const FERRETDB_BIN = join(CACHE_DIR, `ferretdb-${FERRETDB_VERSION}`, 'ferretdb');

function newestSqliteWrite(dataDir: string): number {
  if (!existsSync(dataDir)) return 0;
  return Math.max(0, ...readdirSync(dataDir).filter((f) => f.includes('.sqlite')).map((f) => statSync(join(dataDir, f)).mtimeMs));
}

export const ferretdb: Service = {
  name: 'ferretdb',
  defaultPort: 27018,
  async prepare() {
    if (existsSync(FERRETDB_BIN)) return;
    if (!have('go')) throw new Error('ferretdb: Go is needed to build it');
    log('ferretdb', `building FerretDB ${FERRETDB_VERSION} from the Go module proxy (first time only, 1-2 min)`);
    const work = mkdtempSync(join(CACHE_DIR, 'ferretdb-build-'));
    try {
      const env = { GOFLAGS: '-mod=mod -buildvcs=false' };
      run('ferretdb', 'go', ['mod', 'init', 'ferretdb-build'], { cwd: work, env });
      // `go install ...@version` trips over this module's deprecation lookup; downloading the exact version works.
      const info = JSON.parse(run('ferretdb', 'go', ['mod', 'download', '-json', `github.com/FerretDB/FerretDB@${FERRETDB_VERSION}`], { cwd: work, env })) as { Dir: string };
      const src = join(work, 'src');
      cpSync(info.Dir, src, { recursive: true });
      // The module cache is read-only; the copy must be writable.
      execFileSync('chmod', ['-R', 'u+w', src]);
      // The published module lacks this file, and the binary refuses to start without it.
      writeFileSync(join(src, 'build', 'version', 'version.txt'), `${FERRETDB_VERSION}\n`);
      mkdirSync(dirname(FERRETDB_BIN), { recursive: true });
      run('ferretdb', 'go', ['build', '-trimpath', '-o', `${FERRETDB_BIN}.tmp`, './cmd/ferretdb'], { cwd: src, env: { ...env, CGO_ENABLED: '0' } });
      renameSync(`${FERRETDB_BIN}.tmp`, FERRETDB_BIN);
    } finally {
      rmSync(work, { recursive: true, force: true });
    }
  },
  async beforeStart(dataDir) {
    // FerretDB numbers records and oplog entries by (unix second, counter restarting at 0): a
    // write in the same second as one before a restart collides and its oplog entry is lost.
    const wait = newestSqliteWrite(dataDir) + 1100 - Date.now();
    if (wait > 0) await sleep(wait);
  },
  launch(port, dataDir) {
    return {
      command: FERRETDB_BIN,
      args: [
        '--handler=sqlite',
        `--sqlite-url=file:${dataDir}/`,
        `--state-dir=${dataDir}`,
        `--listen-addr=${HOST}:${port}`,
        '--debug-addr=-',
        '--telemetry=disable',
        '--log-level=warn',
        '--test-capped-cleanup-interval=5s',
        '--repl-set-name=rs0',
      ],
      markers: ['ferretdb', `--listen-addr=${HOST}:${port}`],
    };
  },
  ready: portOpen,
  url: (port) => `mongodb://${HOST}:${port}/`,
  async afterStart(url) {
    // FerretDB has an oplog only if someone creates it; keep it small, since each tailing read scans it.
    const { MongoClient } = await import('mongodb');
    const client = new MongoClient(url, { serverSelectionTimeoutMS: 10000 });
    try {
      const local = client.db('local');
      const existing = await local.listCollections({ name: 'oplog.rs' }).toArray();
      if (existing.length === 0) await local.createCollection('oplog.rs', { capped: true, size: 8 * 1024 * 1024, max: 2000 });
    } finally {
      await client.close();
    }
  },
};

export const SERVICES: Record<ServiceName, Service> = { redis, 'mongo-java-server': mongoJavaServer, ferretdb };
