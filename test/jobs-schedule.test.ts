/** Schedules as pure functions of time: cron (croner) and intervals, time zones, bad input, and the same due times whatever a process's clock. */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { JobError } from '../src/jobs/errors.js';
import { parseSchedule, type Schedule } from '../src/jobs/schedule.js';

const at = (iso: string) => new Date(iso);

function dueTimes(schedule: Schedule, from: Date, count: number): string[] {
  const out: string[] = [];
  let t = from;
  for (let i = 0; i < count; i++) {
    t = schedule.next(t)!;
    out.push(t.toISOString());
  }
  return out;
}

describe('job schedules', () => {
  it('reads five-field cron expressions, in UTC unless told', () => {
    assert.deepEqual(dueTimes(parseSchedule('*/15 * * * *'), at('2025-01-01T10:07:00Z'), 3), [
      '2025-01-01T10:15:00.000Z',
      '2025-01-01T10:30:00.000Z',
      '2025-01-01T10:45:00.000Z',
    ]);
  });

  it('reads six fields as seconds first', () => {
    assert.deepEqual(dueTimes(parseSchedule('*/2 * * * * *'), at('2025-01-01T00:00:00.500Z'), 3), [
      '2025-01-01T00:00:02.000Z',
      '2025-01-01T00:00:04.000Z',
      '2025-01-01T00:00:06.000Z',
    ]);
  });

  it('follows a time zone across a daylight-saving change', () => {
    const nineInNewYork = parseSchedule('0 9 * * *', 'America/New_York');
    // 2025-03-09: New York moves from UTC-5 to UTC-4.
    assert.deepEqual(dueTimes(nineInNewYork, at('2025-03-08T00:00:00Z'), 2), ['2025-03-08T14:00:00.000Z', '2025-03-09T13:00:00.000Z']);
    assert.match(nineInNewYork.text, /America\/New_York/);
  });

  it('anchors intervals on the epoch, so processes started at different times agree', () => {
    const every = parseSchedule(5000);
    assert.equal(every.next(at('2025-01-01T00:00:01.234Z'))!.toISOString(), '2025-01-01T00:00:05.000Z');
    assert.equal(every.next(at('2025-01-01T00:00:04.999Z'))!.toISOString(), '2025-01-01T00:00:05.000Z');
    assert.equal(every.next(at('2025-01-01T00:00:05.000Z'))!.toISOString(), '2025-01-01T00:00:10.000Z');
  });

  it('gives the same due times to processes whose clocks differ', () => {
    // Each process asks for the next due time after its own "now"; the identities they reach are the same instants.
    for (const schedule of [parseSchedule('* * * * * *'), parseSchedule(1000), parseSchedule('*/3 * * * * *')]) {
      const real = Date.parse('2025-06-01T12:00:00.000Z');
      const seen = (skewMs: number) => new Set(dueTimes(schedule, new Date(real + skewMs), 20).slice(2, 15));
      const ahead = seen(1500);
      const behind = seen(-1500);
      for (const due of ahead) if (due <= [...behind].at(-1)!) assert.ok(behind.has(due), `${due} is due for one process only`);
    }
  });

  it('refuses what it cannot read, saying why', () => {
    const refused = (when: string | number, timezone?: string) => {
      try {
        parseSchedule(when, timezone);
      } catch (error) {
        assert.ok(error instanceof JobError);
        assert.equal(error.code, 'JOB_BAD_SCHEDULE');
        return error.message;
      }
      assert.fail(`accepted ${String(when)}`);
    };
    assert.match(refused('every day'), /Cannot read the schedule "every day"/);
    assert.match(refused('0 0 0 1 1 * 2030'), /Cannot read/); // seven fields: not a Unix or seconds cron
    assert.match(refused('61 * * * *'), /Cannot read/);
    assert.match(refused(50), /at least 100/);
    assert.match(refused(1.5 as number), /whole number/);
    assert.match(refused(1000, 'Europe/Paris'), /only to cron/);
    assert.match(refused('* * * * *', 'Mars/Olympus'), /unknown time zone/);
    assert.match(refused(''), /cron expression/);
    // croner's message offered seven fields, which are refused.
    assert.match(refused('5000'), /five fields, or six with seconds first \(got 1\); an interval is a number of milliseconds/);
  });

  it('refuses a cron expression that never falls due, and a schedule that is neither text nor a number, naming it', () => {
    // Accepted before: a job on 31 April was defined without a word and never ran.
    assert.throws(() => parseSchedule('0 0 31 4 *'), (e: JobError) => e.code === 'JOB_BAD_SCHEDULE' && /"0 0 31 4 \*": it never falls due/.test(e.message));
    assert.throws(() => parseSchedule('0 0 30 2 *', 'Europe/Paris'), /never falls due/);
    // The functions swapped (schedule(name, fn, when)): the message named the schedule "{schedule}".
    assert.throws(
      () => parseSchedule((() => undefined) as unknown as string),
      (e: JobError) => e.message === 'Cannot read the schedule (a function): give a cron expression (string) or an interval in milliseconds (number)',
    );
  });
});
