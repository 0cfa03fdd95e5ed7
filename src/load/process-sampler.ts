/** Server CPU and memory read from /proc (Linux), as BENCHMARKS.md prescribes: user+system time, RSS every 250 ms. */
import { execFileSync } from 'node:child_process';
import { readFileSync } from 'node:fs';

const CLOCK_TICKS = (() => {
  try {
    return Number(execFileSync('getconf', ['CLK_TCK']).toString().trim()) || 100;
  } catch {
    return 100;
  }
})();

/** User + system CPU seconds the process has used. */
export function cpuSeconds(pid: number): number {
  const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
  // Fields after the command name (which may contain spaces) start at ") ".
  const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  return (Number(fields[11]) + Number(fields[12])) / CLOCK_TICKS;
}

function statusKb(pid: number, key: string): number {
  const status = readFileSync(`/proc/${pid}/status`, 'utf8');
  const match = new RegExp(`^${key}:\\s+(\\d+) kB`, 'm').exec(status);
  return match ? Number(match[1]) : NaN;
}

export interface Sample {
  t: number;
  cpuSeconds: number;
  rssMb: number;
}

export class ProcessSampler {
  readonly samples: Sample[] = [];
  private timer: NodeJS.Timeout | undefined;
  private readonly t0 = Date.now();
  private readonly cpu0: number;

  constructor(
    private readonly pid: number,
    intervalMs = 250,
  ) {
    this.cpu0 = cpuSeconds(pid);
    this.timer = setInterval(() => this.sample(), intervalMs);
  }

  private sample(): void {
    try {
      this.samples.push({ t: (Date.now() - this.t0) / 1000, cpuSeconds: cpuSeconds(this.pid) - this.cpu0, rssMb: statusKb(this.pid, 'VmRSS') / 1024 });
    } catch {
      // The process is gone; the caller notices.
    }
  }

  /** Stops sampling; returns CPU seconds used since the start and the peak RSS (the kernel's high-water mark). */
  stop(): { cpuSeconds: number; peakRssMb: number } {
    clearInterval(this.timer);
    this.sample();
    const peak = statusKb(this.pid, 'VmHWM') / 1024;
    return { cpuSeconds: cpuSeconds(this.pid) - this.cpu0, peakRssMb: Math.round(peak) };
  }
}
