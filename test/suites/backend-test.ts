/**
 * A shared suite's `it`: each test gets a fresh backend from `make`, hands
 * `pick(backend)` to its body, and closes the backend whatever the body did.
 */
import { it } from 'node:test';

export function backendTest<B extends { close(): Promise<void> }, T = B>(
  make: () => Promise<B>,
  pick: (backend: B) => T = (backend) => backend as unknown as T,
): (title: string, body: (subject: T) => Promise<void>) => void {
  return (title, body) =>
    void it(title, async () => {
      const backend = await make();
      try {
        await body(pick(backend));
      } finally {
        await backend.close();
      }
    });
}
