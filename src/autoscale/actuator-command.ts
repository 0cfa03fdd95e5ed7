/**
 * An actuator that runs a command with the count: `--scale-command
 * "docker compose up -d --no-recreate --scale perseid={n}"`, `fly scale count {n}
 * --yes`, `nomad job scale app web {n}`. Choose it for any platform with a
 * CLI. `{n}` is replaced by the count (and PERSEID_SCALE_TO is set to it); the
 * command runs in a shell and must exit 0. The platform picks which servers
 * to stop; each drains on the SIGTERM it gets (give it a stop grace period
 * longer than PERSEID_DRAIN_MS), so clients reconnect elsewhere.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import type { ServerEntry } from '../cluster/discovery-store.js';
import type { Logger } from '../log.js';
import { signalGroup } from '../process-group.js';
import { checkScaleTarget, type Actuator } from './actuator.js';

export interface CommandActuatorOptions {
  /** The command, with `{n}` where the count goes. */
  template: string;
  /** Longest the command may run (default 120000 ms). */
  timeoutMs?: number;
  log: Logger;
}

export class CommandActuator implements Actuator {
  readonly name = 'command';
  readonly acts = true;
  private count: number | undefined;
  /** The command running now, if one is. */
  private child: ChildProcess | undefined;

  constructor(private readonly options: CommandActuatorOptions) {
    if (!options.template.includes('{n}')) throw new Error('the scale command must contain {n}, where the count goes');
  }

  async current(servers: readonly ServerEntry[]): Promise<number> {
    return this.count ?? servers.length;
  }

  async settling(_servers: readonly ServerEntry[]): Promise<string | undefined> {
    return undefined;
  }

  async scaleTo(n: number, _servers: readonly ServerEntry[]): Promise<void> {
    checkScaleTarget(n);
    const command = this.options.template.replaceAll('{n}', String(n));
    this.options.log.info('running the scale command', { command });
    await new Promise<void>((resolve, reject) => {
      // In a process group of its own, so a timeout stops what the shell started too, not the shell alone.
      const child = spawn(command, { shell: true, detached: true, stdio: ['ignore', 'pipe', 'pipe'], env: { ...process.env, PERSEID_SCALE_TO: String(n) } });
      this.child = child;
      let output = '';
      const keep = (chunk: Buffer) => void (output = (output + chunk.toString()).slice(-2000));
      child.stdout.on('data', keep);
      child.stderr.on('data', keep);
      const timeoutMs = this.options.timeoutMs ?? 120_000;
      let timedOut = false;
      const timer = setTimeout(() => {
        timedOut = true;
        signalGroup(child.pid!, 'SIGKILL');
      }, timeoutMs);
      child.on('error', (error) => {
        clearTimeout(timer);
        this.child = undefined;
        reject(new Error(`the scale command could not start: ${error.message}`));
      });
      child.on('exit', (code, signal) => {
        clearTimeout(timer);
        this.child = undefined;
        const said = output.trim().split('\n').slice(-3).join(' | ') || 'no output';
        if (timedOut) reject(new Error(`the scale command did not finish within ${timeoutMs / 1000} s and was stopped: ${said}`));
        else if (code === 0) resolve();
        else reject(new Error(`the scale command ${signal ? `was killed (${signal})` : `exited with ${code}`}: ${said}`));
      });
    });
    this.count = n;
  }

  abort(): void {
    // The command and what it started: spawned detached, a terminal's Ctrl-C does not reach them.
    if (this.child) signalGroup(this.child.pid!, 'SIGTERM');
  }

  async close(): Promise<void> {}
}
