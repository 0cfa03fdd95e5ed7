/**
 * Chaos, part 1: processes killed with -9 in the middle of S1-like load (real
 * processes on loopback). A worker of `--workers 2` is killed and replaced; a
 * server on the embedded store is killed and started again on its data. In
 * both, no acknowledged write is lost and every client holds exactly what
 * the database holds within 5 s.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, it } from 'node:test';
import { serviceUrl } from '../scripts/services/control.js';
import { freePort } from '../scripts/services/process.js';
import { ChaosLoad, publishedIds, showingLogs, storedIds } from './chaos-load.js';
import { freshDatabase } from './databases.js';
import { eventually, exited, startPerseid } from './processes.js';
import { needsServices } from './skips.js';

const APP = 'dist/test/fixtures/cluster-app.js';
const mongo = await serviceUrl('mongo-java-server');

describe('chaos: kill -9 under load', () => {
  it('a worker: replaced; no acknowledged write lost; every client converged within 5 s', { skip: needsServices({ 'mongo-java-server': mongo }) }, async () => {
    const database = freshDatabase(mongo!);
    const primary = await startPerseid(APP, ['--port', '0', '--workers', '2'], { MONGO_URL: database.url });
    const load = await ChaosLoad.start([primary.url]);
    try {
      await showingLogs([primary], async () => {
        await load.progress(40, 'writes before the kill');
        const { pid } = await load.clients[0]!.call<{ pid: number }>('whoami');
        process.kill(pid, 'SIGKILL');
        await eventually(() => /worker died; replacing it/.test(primary.log()), 'the primary to replace the worker', 10000);
        await load.progress(40, 'writes after the kill');
        await load.stop();
        await load.check(await storedIds(database.url));
      });
    } finally {
      load.close();
      await primary.stop();
      await database.drop();
    }
  });

  it('a server on the embedded store: started again on its data; no acknowledged write lost; every client converged within 5 s', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'perseid-chaos-'));
    const args = ['--port', String(await freePort()), '--data-dir', dir];
    let server = await startPerseid(APP, args);
    const load = await ChaosLoad.start([server.url]);
    try {
      await showingLogs([{ log: () => server.log() }], async () => {
        await load.progress(40, 'writes before the kill');
        server.child.kill('SIGKILL');
        await exited(server.child);
        server = await startPerseid(APP, args);
        await load.progress(40, 'writes after the restart');
        await load.stop();
        await load.check(await publishedIds(server.url));
      });
    } finally {
      load.close();
      await server.stop();
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
