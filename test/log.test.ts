import assert from 'node:assert/strict';
import { after, describe, it } from 'node:test';
import { createLogger, setLogSink } from '../src/log.js';

describe('log lines', () => {
  const lines: string[] = [];
  setLogSink((line) => lines.push(line));
  after(() => setLogSink((line) => process.stderr.write(line + '\n')));
  const log = createLogger('test');

  it('writes short fields as they are, quoting only what needs it', () => {
    log.warn('something', { plain: 'a-b.c', spaced: 'two words', n: 3 });
    assert.match(lines.at(-1)!, / WARN {2}\[test\] something plain=a-b\.c spaced="two words" n=3$/);
  });

  it("cuts a field past 4,000 characters, so a client's oversized input quoted in an error cannot make the line as long", () => {
    log.error('login failed', { name: 'z'.repeat(100_000), error: new Error(`bad ${'y'.repeat(50_000)}`) });
    const line = lines.at(-1)!;
    assert.ok(line.length < 8_500, `${line.length} characters`);
    assert.match(line, / name="z{4000}\.\.\. \(96000 more characters\)"/);
    assert.match(line, / error="Error: bad y+\.\.\. \(\d+ more characters\)"$/);
  });
});
