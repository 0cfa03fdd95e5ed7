/**
 * The autoscaler's decision as a pure function: the figures of the last
 * rounds in, a desired instance count and its reason out; no clock, no I/O.
 * Add `step` servers when any rule has been above its threshold for `holdMs`;
 * remove `step` when every rule has been below its lower threshold for as
 * long; stay within min and max; never while a previous change is still
 * settling; not again before the up or down cooldown since the last change
 * has passed; not before `minSamples` rounds since that change (the figures
 * of a different server count say little about this one). The lower
 * threshold sits below the upper one, so a count that was just raised is not
 * lowered again by the same load (the margin `cluster/balancer.ts` keeps too).
 */

/** Per-server figures the rules read (averages over the servers of a round). */
export const METRICS = ['sessions', 'cpuPercent', 'lagMs', 'memoryMb', 'methodP95Ms'] as const;
export type Metric = (typeof METRICS)[number];

export interface Rule {
  metric: Metric;
  /** Add servers when the average per server stays above this. */
  above: number;
  /** Remove servers when the average per server (of every rule) stays below this. */
  below: number;
}

export interface PolicyConfig {
  min: number;
  max: number;
  /** Servers added or removed per change. */
  step: number;
  rules: Rule[];
  /** How long a rule must hold (every round in this span) before it counts. */
  holdMs: number;
  /** Rounds needed since the last change before any decision. */
  minSamples: number;
  /** Least time between the last change and an increase. */
  upCooldownMs: number;
  /** Least time between the last change and a decrease. */
  downCooldownMs: number;
}

/** One round's figures: how many servers answered, and their averages. */
export interface Sample {
  at: number;
  servers: number;
  averages: Record<Metric, number>;
}

export interface PolicyInput {
  now: number;
  /** The count the platform is asked to run now. */
  current: number;
  /** Rounds since the last change, oldest first (older ones are dropped by the caller). */
  samples: readonly Sample[];
  lastChange?: { at: number; from: number; to: number };
  /** Why a previous change is not done yet (servers still starting or draining), if it is not. */
  settling?: string;
}

export interface Decision {
  desired: number;
  direction: 'up' | 'down' | 'hold';
  reason: string;
}

const UNITS: Record<Metric, string> = { sessions: '', cpuPercent: '%', lagMs: ' ms', memoryMb: ' MB', methodP95Ms: ' ms' };

function shown(metric: Metric, value: number): string {
  return `${metric} ${Math.round(value * 10) / 10}${UNITS[metric]}`;
}

/** Checks a configuration; returns what is wrong with it, or undefined. */
export function configProblem(config: PolicyConfig): string | undefined {
  if (!Number.isInteger(config.min) || config.min < 1) return 'min must be a whole number, 1 or more: with no server running, none reports load, so the count would never rise again';
  if (!Number.isInteger(config.max) || config.max < Math.max(1, config.min)) return 'max must be a whole number, at least min and at least 1';
  if (!Number.isInteger(config.step) || config.step < 1) return 'step must be a whole number, 1 or more';
  if (config.rules.length === 0) return 'give at least one rule';
  for (const rule of config.rules) {
    if (!METRICS.includes(rule.metric)) return `unknown metric ${rule.metric} (one of ${METRICS.join(', ')})`;
    if (!(rule.below < rule.above)) return `${rule.metric}: the lower threshold (${rule.below}) must be below the upper one (${rule.above})`;
  }
  return undefined;
}

/**
 * Checks the rounds against the policy: the rounds a rule must hold, or the samples a decision needs, must fit in
 * the window of rounds kept, or the autoscaler holds for ever. Returns what is wrong, or undefined.
 */
export function windowProblem(config: PolicyConfig, intervalMs: number, windowMs: number): string | undefined {
  if (windowMs < config.holdMs) return `--window-s (${windowMs / 1000}) must be at least --hold-s (${config.holdMs / 1000}): a rule must hold over rounds the window keeps`;
  const kept = Math.floor(windowMs / intervalMs) + 1;
  if (config.minSamples > kept) {
    return `--min-samples (${config.minSamples}) is more rounds than --window-s (${windowMs / 1000}) keeps at --interval-s ${intervalMs / 1000} (${kept}): lower it or widen the window`;
  }
  return undefined;
}

export function decide(input: PolicyInput, config: PolicyConfig): Decision {
  const { now, current, samples, lastChange, settling } = input;
  const hold = (reason: string): Decision => ({ desired: current, direction: 'hold', reason });
  if (settling) return hold(`settling: ${settling}`);
  if (current < config.min) return { desired: config.min, direction: 'up', reason: `below the minimum of ${config.min}` };
  if (current > config.max) return { desired: config.max, direction: 'down', reason: `above the maximum of ${config.max}` };
  if (samples.length < config.minSamples) return hold(`${samples.length} of ${config.minSamples} samples since the last change`);
  // The rounds of the last holdMs, which must reach back that far.
  const held = samples.filter((s) => s.at >= now - config.holdMs);
  if (samples[0]!.at > now - config.holdMs || held.length === 0) return hold(`figures span less than the ${config.holdMs / 1000} s a rule must hold`);
  // A round in which no server answered (a change that never settled, servers registering elsewhere) has no figures:
  // its zeros are not an idle cluster, and would have every rule under its lower threshold.
  if (held.some((s) => s.servers === 0)) return hold(`no server in discovery within the last ${config.holdMs / 1000} s: no figures to decide from`);
  const since = lastChange ? now - lastChange.at : Infinity;

  const over = config.rules.find((rule) => held.every((s) => s.averages[rule.metric] > rule.above));
  if (over) {
    const value = held.at(-1)!.averages[over.metric];
    const why = `${shown(over.metric, value)} per server > ${over.above} for ${config.holdMs / 1000} s`;
    if (current >= config.max) return hold(`${why}, but already at the maximum of ${config.max}`);
    if (since < config.upCooldownMs) return hold(`${why}, but the up cooldown has ${Math.ceil((config.upCooldownMs - since) / 1000)} s left`);
    return { desired: Math.min(config.max, current + config.step), direction: 'up', reason: why };
  }
  const allUnder = config.rules.every((rule) => held.every((s) => s.averages[rule.metric] < rule.below));
  if (allUnder) {
    const latest = held.at(-1)!.averages;
    const why = `every rule under its lower threshold for ${config.holdMs / 1000} s (${config.rules.map((r) => `${shown(r.metric, latest[r.metric])} < ${r.below}`).join(', ')})`;
    if (current <= config.min) return hold(`${why}, but already at the minimum of ${config.min}`);
    if (since < config.downCooldownMs) return hold(`${why}, but the down cooldown has ${Math.ceil((config.downCooldownMs - since) / 1000)} s left`);
    return { desired: Math.max(config.min, current - config.step), direction: 'down', reason: why };
  }
  return hold('within thresholds');
}
