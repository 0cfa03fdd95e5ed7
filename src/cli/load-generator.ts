/**
 * One generator process of `perseid load --processes n` (forked by
 * load/processes.ts): runs its share of the users and reports back over IPC.
 * It lives here, not in load/, because a TypeScript scenario needs the CLI's
 * loader.
 */
import type { GeneratorMessage, GeneratorRequest } from '../load/processes.js';
import { loadScenario } from '../load/run-scenario.js';
import { runLoad } from '../load/runner.js';
import { enableTypeScript, TYPESCRIPT_FILE } from './typescript.js';

function send(message: GeneratorMessage): Promise<void> {
  return new Promise((resolve) => process.send!(message, undefined, {}, () => resolve()));
}

process.once('message', (request: GeneratorRequest) => {
  void (async () => {
    try {
      if (TYPESCRIPT_FILE.test(request.scenario)) await enableTypeScript();
      const { module } = await loadScenario(request.scenario);
      const result = await runLoad({
        ...request.options,
        scenario: module.default,
        share: request.share,
        onProgress: (_line, progress) => void send({ kind: 'progress', progress }),
      });
      await send({ kind: 'result', result });
    } catch (error) {
      await send({ kind: 'error', message: (error as Error).message });
    }
    process.disconnect();
  })();
});
