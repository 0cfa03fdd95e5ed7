/**
 * The capacity report: from live figures, the CPU and memory one hundred
 * sessions (and one hundred logged-in users) cost, the event loop's headroom,
 * and how many instances N sessions need at a target CPU: the "resources per
 * 100 users" a production Meteor article sized its containers by, computed
 * instead of guessed. Idle costs (the CPU and memory of the process with no
 * session) are taken off before dividing.
 */

export interface CapacityInputs {
  /** Processes the figures cover (workers of a machine). */
  processes: number;
  sessions: number;
  /** Mean sessions open over the minute `cpuPercent` covers: while load ramps up, the sessions open now did not all cost that CPU. */
  sessionsLastMinute: number;
  /** Distinct logged-in users over the open sessions. */
  users: number;
  /** CPU over the last minute, percent of one core (summed over processes). */
  cpuPercent: number;
  /** CPU with no session open, the lowest seen (summed over processes). */
  idleCpuPercent: number;
  rssMb: number;
  /** Memory with no session open, the lowest seen (summed over processes). */
  idleRssMb: number;
  /** Whether the idle figures were seen (no session open) or stand-ins (CPU 0, memory at start). */
  idleMeasured: boolean;
  /** Share of time the busiest event loop was busy over the last minute (0-1). */
  utilization: number;
  lagP99Ms: number;
}

export interface CapacityTarget {
  sessions: number;
  /** CPU each instance may run at, percent of one core (default 70). */
  cpuPercent?: number;
  /** Memory each instance may use, MiB (optional). */
  memoryMb?: number;
}

export interface CapacityReport {
  sessions: number;
  users: number;
  processes: number;
  /** Percent of one core per 100 sessions; null with no session to measure. */
  cpuPer100Sessions: number | null;
  memoryMbPer100Sessions: number | null;
  cpuPer100Users: number | null;
  memoryMbPer100Users: number | null;
  /** How much of the busiest event loop's time is free, percent. */
  eventLoopHeadroomPercent: number;
  lagP99Ms: number;
  plan?: CapacityPlan;
  note?: string;
}

export interface CapacityPlan {
  sessions: number;
  cpuPercent: number;
  memoryMb?: number;
  instances: number | null;
  byCpu: number | null;
  byMemory?: number | null;
  sessionsPerInstance: number | null;
}

function per100(cost: number, count: number): number | null {
  return count > 0 ? Math.max(0, (cost / count) * 100) : null;
}

export function capacityReport(inputs: CapacityInputs, target?: CapacityTarget): CapacityReport {
  const cpu = Math.max(0, inputs.cpuPercent - inputs.idleCpuPercent);
  const memory = Math.max(0, inputs.rssMb - inputs.idleRssMb);
  // Users are counted now only: scaled by how the sessions moved over the minute, as the sessions' own figure is.
  const usersLastMinute = inputs.sessions > 0 ? inputs.users * (inputs.sessionsLastMinute / inputs.sessions) : 0;
  const report: CapacityReport = {
    sessions: inputs.sessions,
    users: inputs.users,
    processes: inputs.processes,
    cpuPer100Sessions: inputs.sessions > 0 ? per100(cpu, inputs.sessionsLastMinute) : null,
    memoryMbPer100Sessions: per100(memory, inputs.sessions),
    cpuPer100Users: per100(cpu, usersLastMinute),
    memoryMbPer100Users: per100(memory, inputs.users),
    eventLoopHeadroomPercent: Math.max(0, 100 * (1 - inputs.utilization)),
    lagP99Ms: inputs.lagP99Ms,
  };
  if (inputs.sessions === 0) report.note = 'No session is open: the per-100 figures need the server under real (or `perseid load`) traffic.';
  else if (!inputs.idleMeasured) report.note = 'No idle moment seen yet: the baseline is CPU 0 and the memory at start, so the per-100 figures err high.';
  if (target) {
    const cpuTarget = target.cpuPercent ?? 70;
    const perSessionCpu = report.cpuPer100Sessions === null ? null : report.cpuPer100Sessions / 100;
    // Each instance pays its idle cost before its sessions' (as the memory plan below).
    const cpuPerInstance = cpuTarget - inputs.idleCpuPercent / Math.max(1, inputs.processes);
    const byCpu = perSessionCpu === null || cpuPerInstance <= 0 ? null : Math.max(1, Math.ceil((target.sessions * perSessionCpu) / cpuPerInstance));
    const sessionsPerInstance = perSessionCpu && cpuPerInstance > 0 ? Math.floor(cpuPerInstance / perSessionCpu) : null;
    if (cpuPerInstance <= 0) report.note = `An idle instance already uses ${(inputs.idleCpuPercent / Math.max(1, inputs.processes)).toFixed(0)} % CPU, the whole ${cpuTarget} % target: no session fits; raise the target.`;
    const plan: CapacityPlan = { sessions: target.sessions, cpuPercent: cpuTarget, instances: byCpu, byCpu, sessionsPerInstance };
    if (target.memoryMb !== undefined) {
      plan.memoryMb = target.memoryMb;
      const perInstance = target.memoryMb - inputs.idleRssMb / Math.max(1, inputs.processes);
      const perSession = report.memoryMbPer100Sessions === null ? null : report.memoryMbPer100Sessions / 100;
      plan.byMemory = perSession === null || perInstance <= 0 ? null : Math.max(1, Math.ceil((target.sessions * perSession) / perInstance));
      if (plan.byMemory !== null && plan.byCpu !== null) plan.instances = Math.max(plan.byCpu, plan.byMemory);
    }
    report.plan = plan;
  }
  return report;
}
