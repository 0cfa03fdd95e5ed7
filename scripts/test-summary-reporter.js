// A reporter for Node's test runner that counts what the spec reporter's own
// summary leaves out: it counts a skipped `describe` (whose tests never run,
// so Node counts nothing), keeps every skip's reason and where it was, and
// counts a suite that failed in a hook although its tests passed. It writes
// one JSON object at the end; scripts/run-tests.js prints the summary.
import { relative } from 'node:path';

function where(file) {
  return file ? relative(process.cwd(), file).replace(/^dist\//, '').replace(/\.js$/, '.ts') : '?';
}

export default async function* summary(source) {
  const result = { passed: 0, failed: 0, skipped: [], todo: [], failures: [] };
  const stacks = new Map(); // file → frames by nesting: { name, failedInside }
  for await (const event of source) {
    const { type, data } = event;
    if (type !== 'test:start' && type !== 'test:pass' && type !== 'test:fail') continue;
    const file = data.file ?? '?';
    const frames = stacks.get(file) ?? stacks.set(file, []).get(file);
    if (type === 'test:start') {
      frames[data.nesting] = { name: data.name, failedInside: false };
      frames.length = data.nesting + 1;
      continue;
    }
    const path = [...frames.slice(0, data.nesting).map((f) => f.name), data.name].join(' › ');
    const suite = data.details?.type === 'suite' || data.name === data.file;
    if (data.skip !== undefined && data.skip !== false) {
      result.skipped.push({ kind: suite ? 'suite' : 'test', name: path, file: where(data.file), reason: data.skip === true ? '(no reason given)' : String(data.skip) });
    } else if (data.todo !== undefined && data.todo !== false) {
      // Neither a pass nor a failure: listed, with how it went.
      result.todo.push({ name: path, file: where(data.file), reason: data.todo === true ? '(no reason given)' : String(data.todo), outcome: type === 'test:pass' ? 'passed' : 'failed' });
    } else if (type === 'test:pass') {
      if (!suite) result.passed += 1;
    } else {
      // A failed test counts once; a suite or file counts only when nothing inside it failed (a hook, an import).
      const own = frames[data.nesting];
      if (!suite || !own?.failedInside) {
        result.failed += 1;
        result.failures.push({ name: path, file: where(data.file) });
      }
      for (let i = 0; i < data.nesting; i++) if (frames[i]) frames[i].failedInside = true;
    }
  }
  yield JSON.stringify(result) + '\n';
}
