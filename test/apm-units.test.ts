/**
 * The APM's pure parts: query shapes (never values), the index advisor's
 * rules (ESR order, prefix suppression, inferred advice where the database
 * gives no plan), the capacity arithmetic, the fixed-bucket histogram, and
 * the dashboard's percentiles over several workers' reports.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { adviseIndexes, esrIndex, isPrefix, type ShapeFigures } from '../src/metrics/advisor.js';
import { adviceLines } from '../src/cli/apm.js';
import { Apm, type ApmReport, type MethodReport } from '../src/metrics/apm.js';
import { capacityReport } from '../src/metrics/capacity.js';
import { dashboardView } from '../src/metrics/dashboard-view.js';
import { Histogram } from '../src/metrics/histogram.js';
import { queryShape } from '../src/metrics/query-shape.js';

function figures(collection: string, selector: Record<string, unknown>, sort: Array<[string, 1 | -1]> | undefined, examined: number | undefined, returned: number): ShapeFigures {
  const measured = examined !== undefined;
  return {
    collection,
    shape: queryShape(selector, sort),
    ops: 10,
    timeMs: 50,
    slow: 0,
    returned: returned * 10,
    examined: measured ? examined * 10 : 0,
    measuredOps: measured ? 10 : 0,
    measuredReturned: measured ? returned * 10 : 0,
    firstAt: 0,
    lastAt: 10000,
  };
}

describe('query shapes', () => {
  it('name fields and operator kinds and the sort, never the values', () => {
    const shape = queryShape({ owner: 'alice@example.com', at: { $gt: new Date(5), $lt: new Date(9) }, tags: { $in: ['secret'] }, $and: [{ kind: /x/ }] }, [['at', -1]]);
    assert.equal(shape.key, '{at: range, kind: regex, owner: eq, tags: in} sort {at: -1}');
    assert.doesNotMatch(shape.key, /alice|secret|x\//);
    assert.equal(queryShape({ _id: 'abc' }).byId, true);
    assert.equal(queryShape({ $or: [{ a: 1 }, { b: 2 }] }).unindexable, 'the selector has $or');
  });
});

describe('the index advisor', () => {
  it('orders keys equality, $in, sort, range (ESR)', () => {
    const shape = queryShape({ at: { $gte: 1 }, tags: { $in: ['a'] }, status: 'open' }, [['score', -1]]);
    assert.deepEqual(Object.entries(esrIndex(shape)), [
      ['status', 1],
      ['tags', 1],
      ['score', -1],
      ['at', 1],
    ]);
    assert.equal(isPrefix({ a: 1 }, { a: 1, b: -1 }), true);
    assert.equal(isPrefix({ a: -1, b: 1 }, { a: 1, b: -1 }), true, 'an index serves both directions');
    assert.equal(isPrefix({ b: 1 }, { a: 1, b: 1 }), false);
  });

  it('advises nothing for shapes that do not scan, by _id, or that no single index serves', () => {
    const advice = adviseIndexes(
      [figures('c', { a: 1 }, undefined, 10, 10), figures('c', { _id: 'x' }, undefined, 1, 1), figures('c', { $or: [{ a: 1 }, { b: 1 }] }, undefined, 5000, 1)],
      { c: [] },
    );
    assert.deepEqual(advice, []);
  });

  it('folds a shorter advised index into a longer one it starts', () => {
    const advice = adviseIndexes([figures('c', { a: 1 }, undefined, 1000, 10), figures('c', { a: 1, b: 2 }, undefined, 1000, 1)], { c: [] }, undefined, undefined, 10000);
    assert.equal(advice.length, 1);
    assert.deepEqual(advice[0]!.index, { a: 1, b: 1 });
    assert.equal(advice[0]!.shapes.length, 2);
    assert.equal(advice[0]!.cost!.docsExamined, 20000);
    assert.equal(advice[0]!.cost!.docsExaminedPerSecond, 2000);
  });

  it('spreads a past burst over the time since the shape first ran, not over the burst', () => {
    // 10 operations examining 1000 documents each within 5 ms, a minute before the report.
    const burst = { ...figures('c', { a: 1 }, undefined, 1000, 1), firstAt: 0, lastAt: 5 };
    const [advice] = adviseIndexes([burst], { c: [] }, undefined, undefined, 60000);
    assert.equal(advice!.cost!.docsExamined, 10000);
    assert.equal(Math.round(advice!.cost!.docsExaminedPerSecond!), 167);
  });

  it('judges a shape without a plan (no explain) from the collection\'s indexes, and says so', () => {
    const shape = figures('c', { owner: 'x' }, undefined, undefined, 3);
    const inferred = adviseIndexes([shape], { c: [{ name: '_id_', keys: { _id: 1 } }] });
    assert.equal(inferred.length, 1);
    assert.equal(inferred[0]!.cost!.inferred, true);
    assert.match(inferred[0]!.reason, /inferred/);
    // Nothing counted the documents examined: not zero, unknown.
    assert.equal(inferred[0]!.cost!.docsExamined, null);
    assert.equal(inferred[0]!.cost!.docsExaminedPerSecond, null);
    assert.match(adviceLines(inferred).join('\n'), /documents examined not reported by the database/);
    assert.deepEqual(adviseIndexes([shape], { c: [{ name: 'owner_1_at_1', keys: { owner: 1, at: 1 } }] }), []);
  });

  it('quotes field and collection names so the line runs as written', () => {
    const [advice] = adviseIndexes([figures("it's", { 'a.b': 1 }, undefined, 1000, 1)], {});
    assert.equal(advice!.line, "await new Collection('it\\'s').createIndexAsync({ 'a.b': 1 });");
  });
});

describe('the capacity report', () => {
  it('takes the idle cost off, divides per 100 sessions and users, and plans instances', () => {
    const report = capacityReport(
      { processes: 1, sessions: 400, sessionsLastMinute: 400, users: 200, cpuPercent: 45, idleCpuPercent: 5, rssMb: 300, idleRssMb: 100, idleMeasured: true, utilization: 0.4, lagP99Ms: 3 },
      { sessions: 10000, cpuPercent: 70, memoryMb: 1024 },
    );
    assert.equal(report.cpuPer100Sessions, 10);
    assert.equal(report.memoryMbPer100Sessions, 50);
    assert.equal(report.cpuPer100Users, 20);
    assert.equal(report.eventLoopHeadroomPercent, 60);
    assert.equal(report.plan!.byCpu, 16); // 10000 sessions × 0.1 % = 1000 % of a core, over (70 - 5 idle) % each
    assert.equal(report.plan!.byMemory, 6); // 5000 MB over (1024 - 100) MB each
    assert.equal(report.plan!.instances, 16);
    assert.equal(report.plan!.sessionsPerInstance, 650);
  });

  it('divides the last minute\'s CPU by the sessions open over that minute, not by those open now', () => {
    // Ramping up: 400 sessions now, 200 on average over the minute whose CPU (45 %) is measured.
    const report = capacityReport(
      { processes: 1, sessions: 400, sessionsLastMinute: 200, users: 200, cpuPercent: 45, idleCpuPercent: 5, rssMb: 300, idleRssMb: 100, idleMeasured: true, utilization: 0.4, lagP99Ms: 3 },
      { sessions: 10000, cpuPercent: 70 },
    );
    assert.equal(report.cpuPer100Sessions, 20);
    assert.equal(report.cpuPer100Users, 40);
    assert.equal(report.memoryMbPer100Sessions, 50); // memory is a figure of now: the sessions open now
    assert.equal(report.plan!.byCpu, 31);
  });

  it('says so when an idle instance already uses the whole CPU target', () => {
    const report = capacityReport(
      { processes: 2, sessions: 10, sessionsLastMinute: 10, users: 0, cpuPercent: 180, idleCpuPercent: 150, rssMb: 300, idleRssMb: 100, idleMeasured: true, utilization: 0.9, lagP99Ms: 3 },
      { sessions: 100, cpuPercent: 70 },
    );
    assert.equal(report.plan!.instances, null);
    assert.match(report.note!, /An idle instance already uses 75 % CPU, the whole 70 % target/);
  });

  it('says when there is nothing to measure', () => {
    const report = capacityReport({ processes: 1, sessions: 0, sessionsLastMinute: 0, users: 0, cpuPercent: 1, idleCpuPercent: 1, rssMb: 90, idleRssMb: 90, idleMeasured: true, utilization: 0, lagP99Ms: 0 }, { sessions: 100 });
    assert.equal(report.cpuPer100Sessions, null);
    assert.equal(report.plan!.instances, null);
    assert.match(report.note!, /No session is open/);
  });
});

describe('the histogram', () => {
  it('reads percentiles within a bucket and merges exactly', () => {
    const a = new Histogram();
    const b = new Histogram();
    for (let i = 1; i <= 1000; i++) (i % 2 ? a : b).record(i / 10);
    const merged = new Histogram().add(a).add(b.data());
    assert.equal(merged.count, 1000);
    assert.ok(Math.abs(merged.percentile(50) - 50) <= 50 * 0.25, `p50 ${merged.percentile(50)}`);
    assert.ok(Math.abs(merged.percentile(99) - 99) <= 99 * 0.25, `p99 ${merged.percentile(99)}`);
    assert.equal(merged.max, 100);
    assert.equal(merged.countAtMost(10), 100);
  });
});

describe('the dashboard over several workers', () => {
  /** A process's report after one call of `method` that took about `ms`. */
  function reportAfterCall(method: string, ms: number): ApmReport {
    const apm = new Apm();
    apm.enabled = true;
    apm.methodEnded(apm.methodStarted(method, performance.now() - ms, 'session', null));
    return apm.report();
  }

  it('reads percentiles from the recent calls of every worker, not beside another worker\'s calls since its start', () => {
    // Worker 1's slow call was more than a minute ago: its recent window is empty. Worker 2's fast one is recent.
    const old = reportAfterCall('save', 2000);
    const quiet: MethodReport = { ...old.methods[0]!, recent: { calls: 0, errors: 0, time: new Histogram().data(), parts: [0, 0, 0, 0, 0] } };
    const view = dashboardView({ reports: [{ ...old, methods: [quiet] }, reportAfterCall('save', 1)], indexes: {} });
    const save = view.methods.find((m) => m.name === 'save')!;
    assert.equal(save.calls, 2);
    assert.ok(save.p95 < 10, `the recent call only: p95 ${save.p95} ms`);
    // With no recent call anywhere, the figures since start stand in.
    const idle = dashboardView({ reports: [{ ...old, methods: [quiet] }], indexes: {} }).methods[0]!;
    assert.ok(idle.p95 > 1000, `since start: p95 ${idle.p95} ms`);
  });
});
