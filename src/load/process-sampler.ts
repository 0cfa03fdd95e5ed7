/**
 * Server CPU and memory read from /proc (Linux), as BENCHMARKS.md prescribes:
 * user+system time and RSS every 250 ms, of the process and everything under
 * it, since the server is often not the process one knows: `npx perseid start`
 * runs it as a grandchild, and `--workers` adds worker processes.
 */
import { descendants, highWaterRssMb, processTable, readStat, type ProcessStat } from './process-table.js';

export interface Sample {
  t: number;
  /** CPU seconds the processes have used since the sampler started. */
  cpuSeconds: number;
  /** Their resident memory, added up. */
  rssMb: number;
}

const key = (p: ProcessStat) => `${p.pid}:${p.startTicks}`;

export class ProcessSampler {
  readonly samples: Sample[] = [];
  private timer: NodeJS.Timeout | undefined;
  private readonly t0 = Date.now();
  /** Every process seen under the root, with its CPU time when first and last seen: one that ends keeps what it used. */
  private readonly seen = new Map<string, { pid: number; startTicks: number; first: number; last: number }>();
  private peakRssMb = 0;
  private mostProcesses = 0;
  private lastTree: number[] = [];

  /** Throws if there is no process `pid`. */
  constructor(
    private readonly pid: number,
    intervalMs = 250,
  ) {
    readStat(pid);
    this.sample(true);
    this.timer = setInterval(() => this.sample(false), intervalMs);
  }

  private sample(atStart: boolean): void {
    const table = processTable();
    // Processes already seen are followed even if re-parented away from the root (their parent ended).
    const roots = [this.pid, ...[...this.seen.values()].filter((s) => table.get(s.pid)?.startTicks === s.startTicks).map((s) => s.pid)];
    const tree = descendants(table, roots);
    if (tree.length === 0) return; // all gone; the caller notices
    this.lastTree = tree.map((p) => p.pid);
    let rssMb = 0;
    for (const p of tree) {
      rssMb += p.rssMb;
      const known = this.seen.get(key(p));
      // One that starts during the run counts from zero.
      if (known) known.last = p.cpuSeconds;
      else this.seen.set(key(p), { pid: p.pid, startTicks: p.startTicks, first: atStart ? p.cpuSeconds : 0, last: p.cpuSeconds });
    }
    this.peakRssMb = Math.max(this.peakRssMb, rssMb);
    this.mostProcesses = Math.max(this.mostProcesses, tree.length);
    if (!atStart) this.samples.push({ t: (Date.now() - this.t0) / 1000, cpuSeconds: this.cpuSeconds(), rssMb });
  }

  private cpuSeconds(): number {
    let total = 0;
    for (const s of this.seen.values()) total += s.last - s.first;
    return total;
  }

  /**
   * Stops sampling; returns the CPU seconds used since the start, the peak of
   * the summed RSS (never below one process's own peak, which the kernel keeps
   * exactly: a lone server's figure is its VmHWM), and the most processes seen at once.
   */
  stop(): { cpuSeconds: number; peakRssMb: number; processes: number } {
    if (this.timer) {
      clearInterval(this.timer);
      this.timer = undefined;
      this.sample(false);
      for (const pid of this.lastTree) {
        try {
          this.peakRssMb = Math.max(this.peakRssMb, highWaterRssMb(pid));
        } catch {
          // It has just ended.
        }
      }
    }
    return { cpuSeconds: this.cpuSeconds(), peakRssMb: Math.round(this.peakRssMb), processes: this.mostProcesses };
  }
}
