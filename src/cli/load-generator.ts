/**
 * One generator process of `perseid load --processes n` (forked by
 * load/processes.ts): runs its share of the users and reports back over IPC.
 * It lives here, not in load/, because a TypeScript scenario needs the CLI's
 * loader.
 */
import type { GeneratorMessage, GeneratorRequest, GeneratorStop } from '../load/processes.js';
import { loadScenario } from '../load/run-scenario.js';
import { runLoad } from '../load/runner.js';
import { enableTypeScript, TYPESCRIPT_FILE } from './typescript.js';

function send(message: GeneratorMessage): Promise<void> {
  return new Promise((resolve) => process.send!(message, undefined, {}, () => resolve()));
}

// A Ctrl-C at the terminal reaches every process of its group: the parent stops this one (with a stop message), so that its figures are still reported.
process.on('SIGINT', () => undefined);
// The parent gone (or done with this process): there is no one left to report to.
process.once('disconnect', () => process.exit());
const stopped = new AbortController();

process.once('message', (request: GeneratorRequest) => {
  process.on('message', (message: GeneratorStop) => {
    if (message.kind === 'stop') stopped.abort();
  });
  void (async () => {
    try {
      if (TYPESCRIPT_FILE.test(request.scenario)) await enableTypeScript();
      const { module } = await loadScenario(request.scenario);
      const result = await runLoad({
        ...request.options,
        scenario: module.default,
        share: request.share,
        signal: stopped.signal,
        onProgress: (_line, progress) => void send({ kind: 'progress', progress }),
      });
      await send({ kind: 'result', result });
    } catch (error) {
      await send({ kind: 'error', message: (error as Error).message });
    }
    process.disconnect();
  })();
});
