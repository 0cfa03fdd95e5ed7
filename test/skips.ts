/**
 * Skips for what this machine lacks, in one shape: `needs <what> — enable:
 * <command>`. scripts/run-tests.js lists every skipped suite and test with its
 * reason at the end of a run, and with PERSEID_TEST_EXPECT_ALL=1 (which
 * .ci/run sets) fails the run on any skip of this shape: CI has everything.
 */
import { describe } from 'node:test';

export const START_SERVICES = 'npm run build && npm run services start (or .ci/run)';

export function needs(what: string, enable: string): string {
  return `needs ${what} — enable: ${enable}`;
}

/** The reason to skip a suite that needs these test services, or false when they all run. */
export function needsServices(services: Record<string, string | undefined>): string | false {
  const missing = Object.entries(services)
    .filter(([, url]) => !url)
    .map(([name]) => name);
  return missing.length ? needs(`${missing.join(' and ')} (not running)`, START_SERVICES) : false;
}

/** Shows a suite that would run on each missing MongoDB-wire server as skipped, so the run's summary counts it. */
export function skipOnMissing(suite: string, missing: readonly string[]): void {
  for (const server of missing) describe(`${suite} on ${server}`, { skip: needs(`${server} (not running)`, START_SERVICES) }, () => undefined);
}
