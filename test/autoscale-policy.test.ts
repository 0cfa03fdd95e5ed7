/** The autoscaler's policy, a pure function: a table of figures and the decision each must give, and the configurations it refuses. */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { configProblem, decide, METRICS, windowProblem, type Metric, type PolicyConfig, type PolicyInput, type Sample } from '../src/autoscale/policy.js';

const config: PolicyConfig = {
  min: 1,
  max: 4,
  step: 1,
  rules: [
    { metric: 'sessions', above: 100, below: 40 },
    { metric: 'cpuPercent', above: 70, below: 30 },
  ],
  holdMs: 3000,
  minSamples: 3,
  upCooldownMs: 5000,
  downCooldownMs: 10000,
};

const NOW = 1_000_000;

/** Rounds one second apart ending now, each with these averages (the rest zero). */
function rounds(...figures: Array<Partial<Record<Metric, number>>>): Sample[] {
  return figures.map((f, i) => ({
    at: NOW - (figures.length - 1 - i) * 1000,
    servers: 2,
    averages: { ...(Object.fromEntries(METRICS.map((m) => [m, 0])) as Record<Metric, number>), ...f },
  }));
}

const busy = { sessions: 150, cpuPercent: 50 };
const idle = { sessions: 10, cpuPercent: 5 };
const middling = { sessions: 60, cpuPercent: 20 };

interface Case {
  title: string;
  input: Omit<PolicyInput, 'now'>;
  config?: Partial<PolicyConfig>;
  expect: { direction: 'up' | 'down' | 'hold'; desired: number; reason: RegExp };
}

const cases: Case[] = [
  { title: 'adds a server when a rule stays above its threshold', input: { current: 2, samples: rounds(busy, busy, busy, busy) }, expect: { direction: 'up', desired: 3, reason: /sessions 150 per server > 100 for 3 s/ } },
  { title: 'adds when any rule is over (CPU alone)', input: { current: 2, samples: rounds(...Array(4).fill({ sessions: 5, cpuPercent: 90 })) }, expect: { direction: 'up', desired: 3, reason: /cpuPercent 90%/ } },
  { title: 'ignores a spike that did not last', input: { current: 2, samples: rounds(middling, middling, middling, busy) }, expect: { direction: 'hold', desired: 2, reason: /within thresholds/ } },
  { title: 'removes a server when every rule stays below its lower threshold', input: { current: 3, samples: rounds(idle, idle, idle, idle) }, expect: { direction: 'down', desired: 2, reason: /every rule under/ } },
  { title: 'keeps the count when one rule is between its thresholds', input: { current: 3, samples: rounds(...Array(4).fill({ sessions: 10, cpuPercent: 50 })) }, expect: { direction: 'hold', desired: 3, reason: /within thresholds/ } },
  { title: 'waits for the minimum number of samples', input: { current: 2, samples: rounds(busy, busy) }, expect: { direction: 'hold', desired: 2, reason: /2 of 3 samples/ } },
  { title: 'waits until the figures span the hold time', input: { current: 2, samples: rounds(busy, busy, busy).map((s) => ({ ...s, at: NOW - (NOW - s.at) / 2 })) }, expect: { direction: 'hold', desired: 2, reason: /span less than the 3 s/ } },
  { title: 'never acts while a change is settling', input: { current: 2, samples: rounds(busy, busy, busy, busy), settling: '1 of 2 servers in discovery' }, expect: { direction: 'hold', desired: 2, reason: /settling: 1 of 2 servers/ } },
  { title: 'keeps to the maximum', input: { current: 4, samples: rounds(busy, busy, busy, busy) }, expect: { direction: 'hold', desired: 4, reason: /already at the maximum of 4/ } },
  { title: 'keeps to the minimum', input: { current: 1, samples: rounds(idle, idle, idle, idle) }, expect: { direction: 'hold', desired: 1, reason: /already at the minimum of 1/ } },
  { title: 'raises a count below the minimum at once', input: { current: 0, samples: [] }, expect: { direction: 'up', desired: 1, reason: /below the minimum/ } },
  { title: 'lowers a count above the maximum at once', input: { current: 6, samples: [] }, expect: { direction: 'down', desired: 4, reason: /above the maximum/ } },
  { title: 'waits out the up cooldown', input: { current: 2, samples: rounds(busy, busy, busy, busy), lastChange: { at: NOW - 3000, from: 1, to: 2 } }, config: { minSamples: 1, holdMs: 1000 }, expect: { direction: 'hold', desired: 2, reason: /up cooldown has 2 s left/ } },
  { title: 'waits out the longer down cooldown', input: { current: 3, samples: rounds(idle, idle, idle, idle), lastChange: { at: NOW - 8000, from: 2, to: 3 } }, config: { minSamples: 1, holdMs: 1000 }, expect: { direction: 'hold', desired: 3, reason: /down cooldown has 2 s left/ } },
  { title: 'acts once the cooldown has passed', input: { current: 3, samples: rounds(idle, idle, idle, idle), lastChange: { at: NOW - 10000, from: 2, to: 3 } }, expect: { direction: 'down', desired: 2, reason: /every rule under/ } },
  { title: 'steps by more than one, within the maximum', input: { current: 3, samples: rounds(busy, busy, busy, busy) }, config: { step: 2 }, expect: { direction: 'up', desired: 4, reason: /sessions/ } },
  {
    title: 'does not take rounds no server answered in for an idle cluster',
    input: { current: 3, samples: rounds(idle, idle, {}, {}).map((s, i) => (i < 2 ? s : { ...s, servers: 0 })) },
    expect: { direction: 'hold', desired: 3, reason: /^no server in discovery within the last 3 s: no figures to decide from$/ },
  },
  { title: 'steps down by more than one, within the minimum', input: { current: 2, samples: rounds(idle, idle, idle, idle) }, config: { step: 3 }, expect: { direction: 'down', desired: 1, reason: /every rule under/ } },
];

describe('autoscale policy', () => {
  for (const c of cases) {
    it(c.title, () => {
      const decision = decide({ now: NOW, ...c.input }, { ...config, ...c.config });
      assert.equal(decision.direction, c.expect.direction, decision.reason);
      assert.equal(decision.desired, c.expect.desired);
      assert.match(decision.reason, c.expect.reason);
    });
  }

  it('refuses configurations that cannot work, saying why', () => {
    assert.equal(configProblem(config), undefined);
    assert.match(configProblem({ ...config, min: 5, max: 4 })!, /max must be/);
    assert.match(configProblem({ ...config, min: 0 })!, /min must be a whole number, 1 or more: with no server running, none reports load/);
    assert.match(configProblem({ ...config, step: 0 })!, /step/);
    assert.match(configProblem({ ...config, rules: [] })!, /at least one rule/);
    assert.match(configProblem({ ...config, rules: [{ metric: 'sessions', above: 10, below: 10 }] })!, /lower threshold \(10\) must be below/);
    assert.match(configProblem({ ...config, rules: [{ metric: 'disk' as Metric, above: 10, below: 1 }] })!, /unknown metric disk/);
  });

  it('refuses a window of rounds too short for the hold time or the samples, which would hold for ever', () => {
    const policy = { ...config, holdMs: 60_000, minSamples: 5 };
    assert.equal(windowProblem(policy, 10_000, 300_000), undefined);
    assert.equal(windowProblem(policy, 10_000, 60_000), undefined);
    assert.match(windowProblem(policy, 10_000, 30_000)!, /--window-s \(30\) must be at least --hold-s \(60\)/);
    assert.match(windowProblem({ ...policy, minSamples: 8 }, 10_000, 60_000)!, /--min-samples \(8\) is more rounds than --window-s \(60\) keeps at --interval-s 10 \(7\)/);
  });
});
