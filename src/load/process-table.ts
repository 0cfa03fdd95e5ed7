/**
 * The machine's processes as /proc (Linux) shows them: parent, process group,
 * state, CPU time and resident memory, from one read of /proc/<pid>/stat each.
 * Hand-written rather than pidtree or pidusage: those run `ps` on every call,
 * a process spawned four times a second while sampling a server.
 */
import { execFileSync } from 'node:child_process';
import { readdirSync, readFileSync } from 'node:fs';

export interface ProcessStat {
  pid: number;
  ppid: number;
  /** Process group id. */
  pgrp: number;
  /** R, S, D, Z (a zombie: exited, not yet reaped), ... */
  state: string;
  /** Clock ticks after boot when it started: with the pid, names a process even once its pid is reused. */
  startTicks: number;
  /** User + system CPU seconds it has used (its own, not its children's). */
  cpuSeconds: number;
  rssMb: number;
}

const units = (() => {
  let cached: { ticks: number; pageMb: number } | undefined;
  const conf = (name: string, fallback: number) => {
    try {
      return Number(execFileSync('getconf', [name]).toString().trim()) || fallback;
    } catch {
      return fallback;
    }
  };
  return () => (cached ??= { ticks: conf('CLK_TCK', 100), pageMb: conf('PAGESIZE', 4096) / (1024 * 1024) });
})();

/** One process's figures; throws if there is no such process. */
export function readStat(pid: number): ProcessStat {
  const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
  // The command name, in parentheses, may hold spaces and parentheses: the fields after it start at the last ") ".
  const f = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  const { ticks, pageMb } = units();
  return {
    pid,
    state: f[0]!,
    ppid: Number(f[1]),
    pgrp: Number(f[2]),
    cpuSeconds: (Number(f[11]) + Number(f[12])) / ticks,
    startTicks: Number(f[19]),
    rssMb: Number(f[21]) * pageMb,
  };
}

/** User + system CPU seconds the process has used. */
export function cpuSeconds(pid: number): number {
  return readStat(pid).cpuSeconds;
}

/** The most resident memory the process has had (the kernel's VmHWM, exact between samples too); throws if there is no such process. */
export function highWaterRssMb(pid: number): number {
  const match = /^VmHWM:\s+(\d+) kB/m.exec(readFileSync(`/proc/${pid}/status`, 'utf8'));
  return match ? Number(match[1]) / 1024 : 0;
}

/** Every process now, by pid (those that end while it is read are left out). */
export function processTable(): Map<number, ProcessStat> {
  const table = new Map<number, ProcessStat>();
  for (const entry of readdirSync('/proc')) {
    const pid = Number(entry);
    if (!Number.isInteger(pid)) continue;
    try {
      table.set(pid, readStat(pid));
    } catch {
      // Gone between the listing and the read.
    }
  }
  return table;
}

/** The processes under any of `roots` (children, their children, ...), roots included. */
export function descendants(table: Map<number, ProcessStat>, roots: Iterable<number>): ProcessStat[] {
  const children = new Map<number, ProcessStat[]>();
  for (const p of table.values()) {
    const siblings = children.get(p.ppid);
    if (siblings) siblings.push(p);
    else children.set(p.ppid, [p]);
  }
  const found = new Map<number, ProcessStat>();
  const pending = [...roots].flatMap((pid) => table.get(pid) ?? []);
  for (let p = pending.pop(); p; p = pending.pop()) {
    if (found.has(p.pid)) continue;
    found.set(p.pid, p);
    pending.push(...(children.get(p.pid) ?? []));
  }
  return [...found.values()];
}

/** Whether any live (not zombie) process is in process group `pgrp`. */
export function groupAlive(pgrp: number): boolean {
  for (const p of processTable().values()) if (p.pgrp === pgrp && p.state !== 'Z' && p.state !== 'X') return true;
  return false;
}
