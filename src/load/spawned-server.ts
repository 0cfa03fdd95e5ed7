/**
 * `perseid load --spawn`: the server command, run in a process group of its
 * own so that it is stopped whole, with whatever it started (the node child of
 * an `npx` wrapper, `--workers` workers): SIGTERM to the group, SIGKILL after a
 * grace period. In a group of its own it gets no Ctrl-C from the terminal: a
 * SIGINT (or SIGTERM, SIGHUP) to this process is passed on to the group, which
 * is waited for before this process ends as the signal says; a second one
 * kills the group at once.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { once } from 'node:events';
import { signalGroup } from '../process-group.js';
import { groupAlive } from './process-table.js';

/** How long the server may take over its own shutdown before it is killed. */
const STOP_GRACE_MS = 5000;
const SIGNALS = ['SIGINT', 'SIGTERM', 'SIGHUP'] as const;

export class SpawnedServer {
  private ended: string | undefined;
  private stopping: Promise<void> | undefined;

  private constructor(
    private readonly child: ChildProcess,
    /** The command's process, also its process group's id. */
    readonly pid: number,
  ) {
    child.once('exit', (code, signal) => (this.ended = signal ? `ended by ${signal}` : `exited with status ${code}`));
    for (const signal of SIGNALS) process.on(signal, this.onSignal);
    process.on('exit', this.onExit);
  }

  /** Runs `command` (a shell command line); rejects if it cannot be started at all. */
  static async start(command: string): Promise<SpawnedServer> {
    // `exec`: the command itself is the group's leader, not a shell waiting for it.
    const child = spawn('sh', ['-c', `exec ${command}`], { stdio: ['ignore', 'inherit', 'inherit'], detached: true });
    await once(child, 'spawn');
    return new SpawnedServer(child, child.pid!);
  }

  /** How the command ended, if it has (for a clearer message than "cannot reach"). */
  get exited(): string | undefined {
    return this.ended;
  }

  /** Stops every process of the group: `signal`, then SIGKILL to what is left after `graceMs`. */
  stop(signal: NodeJS.Signals = 'SIGTERM', graceMs = STOP_GRACE_MS): Promise<void> {
    this.stopping ??= (async () => {
      this.signal(signal);
      if (!(await this.gone(graceMs))) {
        this.signal('SIGKILL');
        await this.gone(2000);
      }
      for (const s of SIGNALS) process.off(s, this.onSignal);
      process.off('exit', this.onExit);
      this.child.unref(); // should a process outlive SIGKILL (stuck in the kernel), not wait for it
    })();
    return this.stopping;
  }

  private readonly onSignal = (signal: NodeJS.Signals): void => {
    if (this.stopping) return this.signal('SIGKILL');
    void this.stop(signal).then(() => {
      // End as the signal would have without this handler, unless someone else handles it.
      if (process.listenerCount(signal) === 0) process.kill(process.pid, signal);
    });
  };

  /** The last resort, when this process exits without stopping the server (process.exit, an uncaught error). */
  private readonly onExit = (): void => this.signal('SIGKILL');

  private signal(signal: NodeJS.Signals): void {
    signalGroup(this.pid, signal);
  }

  private async gone(withinMs: number): Promise<boolean> {
    const deadline = Date.now() + withinMs;
    while (groupAlive(this.pid)) {
      if (Date.now() >= deadline) return false;
      await new Promise((r) => setTimeout(r, 50));
    }
    return true;
  }
}
