/**
 * Start, stop and find the test services. The shared instances (default ports)
 * are recorded in a state file the test suites read; suites that must restart
 * or break a server start private instances on free ports instead.
 */
import { existsSync, mkdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { ManagedProcess, RUN_DIR, freePort, log, portOpen } from './process.js';
import { SERVICES, type ServiceName } from './services.js';

export const STATE_FILE = join(RUN_DIR, 'services.json');

export interface RunningService {
  name: ServiceName;
  port: number;
  url: string;
  dataDir: string;
  pid: number;
  stop(): Promise<void>;
  /** Stops and starts again on the same port with the same data. */
  restart(): Promise<void>;
}

type State = Partial<Record<ServiceName, { url: string; port: number }>>;

function readState(): State {
  try {
    return JSON.parse(readFileSync(STATE_FILE, 'utf8')) as State;
  } catch {
    return {};
  }
}

function writeState(state: State): void {
  mkdirSync(RUN_DIR, { recursive: true });
  writeFileSync(STATE_FILE, JSON.stringify(state, null, 2) + '\n');
}

export async function startService(name: ServiceName, options: { port?: number; dataDir?: string; record?: boolean } = {}): Promise<RunningService> {
  const service = SERVICES[name];
  await service.prepare();
  const port = options.port ?? (await freePort());
  const dataDir = options.dataDir ?? join(RUN_DIR, `${name}-${port}`);
  // A private instance (a test's or a benchmark's) leaves nothing behind once stopped.
  const ephemeral = !options.record && !options.dataDir;
  const managed = new ManagedProcess(name, port);
  const launch = service.launch(port, dataDir);
  const boot = async () => {
    mkdirSync(dataDir, { recursive: true });
    await service.beforeStart?.(dataDir);
    const t0 = Date.now();
    const pid = await managed.start(launch, () => service.ready(port));
    await service.afterStart?.(service.url(port));
    log(name, `running on ${service.url(port)} (pid ${pid}, ${Date.now() - t0} ms)`);
    return pid;
  };
  const handle: RunningService = {
    name,
    port,
    url: service.url(port),
    dataDir,
    pid: await boot(),
    // Stopping a private instance deletes its data; restart() keeps it.
    async stop() {
      await managed.stop(launch.markers);
      if (ephemeral) managed.remove(dataDir);
    },
    async restart() {
      await managed.stop(launch.markers);
      handle.pid = await boot();
    },
  };
  if (options.record) writeState({ ...readState(), [name]: { url: handle.url, port } });
  return handle;
}

/** Stops the shared instance of `name` (the one recorded in the state file); resolves with what it stopped. */
export async function stopService(name: ServiceName): Promise<{ pid: number; port: number } | undefined> {
  const state = readState();
  const port = state[name]?.port ?? SERVICES[name].defaultPort;
  const pid = await new ManagedProcess(name, port).stop(SERVICES[name].launch(port, '').markers);
  delete state[name];
  if (Object.keys(state).length) writeState(state);
  else rmSync(STATE_FILE, { force: true });
  return pid === undefined ? undefined : { pid, port };
}

/**
 * The URL of a running shared instance: from PERSEID_TEST_<NAME>_URL, else from
 * the state file when that server still answers.
 */
export async function serviceUrl(name: ServiceName): Promise<string | undefined> {
  const fromEnv = process.env[`PERSEID_TEST_${name.toUpperCase().replace(/-/g, '_')}_URL`];
  if (fromEnv) return fromEnv;
  if (!existsSync(STATE_FILE)) return undefined;
  const entry = readState()[name];
  return entry && (await portOpen(entry.port)) ? entry.url : undefined;
}
