/**
 * The databases a suite can run against: the embedded store always, and each
 * MongoDB-wire stand-in that is running (`npm run services start`), with the
 * change sources it supports. Suites show what is missing as skipped (skips.ts).
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { serviceUrl } from '../scripts/services/control.js';
import { openDatabase, type Database } from '../src/collections/database.js';
import type { ChangeSourceChoice } from '../src/data/mongo/store.js';
import { Random } from '../src/ddp/random.js';

export type ServerName = 'embedded' | 'mongo-java-server' | 'ferretdb';

export interface DatabaseTarget {
  /** e.g. "ferretdb (oplog)" */
  label: string;
  server: ServerName;
  source: ChangeSourceChoice | 'embedded';
  /** Opens a fresh, empty database on this target. */
  open(): Promise<{ database: Database; url?: string; dbName?: string; cleanup(): Promise<void> }>;
}

/** What each stand-in can feed live queries with (see ../shared/services/README.md). */
const SOURCES: Record<Exclude<ServerName, 'embedded'>, ChangeSourceChoice[]> = {
  'mongo-java-server': ['change-stream', 'oplog', 'poll'],
  ferretdb: ['oplog', 'poll'],
};

function withDatabase(url: string, name: string): string {
  const u = new URL(url);
  u.pathname = `/${name}`;
  return u.toString();
}

/** A new, empty database on a MongoDB-wire server, and how to remove it afterwards. */
export function freshDatabase(baseUrl: string): { url: string; dbName: string; drop(): Promise<void> } {
  const dbName = `perseid_test_${Random.id(8).toLowerCase()}`;
  const url = withDatabase(baseUrl, dbName);
  return {
    url,
    dbName,
    async drop() {
      const { MongoClient } = await import('mongodb');
      const client = new MongoClient(url);
      await client.db(dbName).dropDatabase().catch(() => undefined);
      await client.close();
    },
  };
}

export function embeddedTarget(): DatabaseTarget {
  return {
    label: 'embedded',
    server: 'embedded',
    source: 'embedded',
    async open() {
      const dir = mkdtempSync(join(tmpdir(), 'perseid-db-'));
      const database = await openDatabase({ dataDir: dir });
      return {
        database,
        async cleanup() {
          await database.close();
          rmSync(dir, { recursive: true, force: true });
        },
      };
    },
  };
}

/** A target on a MongoDB-wire server, fed by `source`; each open() gets a database of its own. */
export function mongoTarget(server: Exclude<ServerName, 'embedded'>, baseUrl: string, source: ChangeSourceChoice): DatabaseTarget {
  return {
    label: `${server} (${source})`,
    server,
    source,
    async open() {
      const { url, dbName, drop } = freshDatabase(baseUrl);
      const database = await openDatabase({
        mongoUrl: url,
        oplogUrl: source === 'oplog' ? withDatabase(baseUrl, 'local') : undefined,
        changeSource: source,
        pollIntervalMs: 200,
      });
      return {
        database,
        url,
        dbName,
        async cleanup() {
          await drop();
          await database.close();
        },
      };
    },
  };
}

/** Every running stand-in × change source, plus which servers are missing. */
export async function mongoTargets(): Promise<{ targets: DatabaseTarget[]; missing: string[] }> {
  const targets: DatabaseTarget[] = [];
  const missing: string[] = [];
  for (const server of Object.keys(SOURCES) as Array<keyof typeof SOURCES>) {
    const url = await serviceUrl(server);
    if (!url) {
      missing.push(server);
      continue;
    }
    for (const source of SOURCES[server]) targets.push(mongoTarget(server, url, source));
  }
  return { targets, missing };
}
