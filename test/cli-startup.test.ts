/**
 * `perseid start` as a newcomer meets it: each start-up mistake gets one line
 * that names the thing and what to do, exit code 1 and no stack trace, and
 * leaves no data directory behind.
 */
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { chmodSync, existsSync, mkdirSync } from 'node:fs';
import { createServer } from 'node:net';
import { join } from 'node:path';
import { after, describe, it } from 'node:test';
import { serviceUrl } from '../scripts/services/control.js';
import { appDir, assertOneLine, documentedStartupErrors, OK_APP, oneLiners, perseid, removeAppDirs } from './cli-app-dir.js';
import { freshDatabase } from './databases.js';
import { startPerseid } from './processes.js';
import { needsServices } from './skips.js';
import { smallDiskSkip } from './small-disk.js';

const ferretdb = await serviceUrl('ferretdb');

describe('perseid start: start-up errors', () => {
  after(removeAppDirs);

  it('names a missing app file, and makes nothing', () => {
    const dir = appDir({});
    assertOneLine(perseid(dir, ['start', 'app.js']), /app module app\.js not found .*perseid start app\.js/);
    assert.equal(existsSync(join(dir, '.perseid')), false, 'no data directory');
  });

  it('says in one line that it needs a newer Node, on a Node older than its engines, for every command', () => {
    // This Node, taken for 18 and for 20.18: on a real Node 18 the command failed to link (no zlib.crc32), with a stack trace, --help too.
    const dir = appDir({ 'app.js': OK_APP });
    for (const version of ['18.20.8', '20.18.0']) {
      const older = { NODE_OPTIONS: `--import=data:text/javascript,Object.defineProperty(process.versions,'node',{value:'${version}'})` };
      assertOneLine(perseid(dir, ['start', 'app.js'], older), new RegExp(`^perseid start: needs Node 20\\.19 or later, and this is Node ${version.replaceAll('.', '\\.')}: install a newer Node \\(https://nodejs\\.org\\) and run it again$`));
      for (const args of [['--help'], ['--version']]) {
        const out = perseid(dir, args, older);
        assert.deepEqual([out.status, out.stdout, out.stderr], [1, '', `perseid: needs Node 20.19 or later, and this is Node ${version}: install a newer Node (https://nodejs.org) and run it again\n`]);
      }
    }
    assert.equal(existsSync(join(dir, '.perseid')), false, 'no data directory');
  });

  it('gives the file and line of a syntax error, in the app or in a file it imports, and makes nothing', () => {
    const dir = appDir({
      'app.js': 'export default function app(server) {\n  server.methods({ a() { return 1 }; });\n}\n',
      'main.js': 'import { helper } from "./lib/util.js";\nexport default function () { helper(); }\n',
      'lib/util.js': 'export function helper() {}\nexport const broken = ;\n',
    });
    assertOneLine(perseid(dir, ['start', 'app.js']), /syntax error in app\.js:2: Unexpected token/);
    assertOneLine(perseid(dir, ['start', 'main.js']), /syntax error in lib\/util\.js:2: Unexpected token/);
    assert.equal(existsSync(join(dir, '.perseid')), false, 'no data directory');
  });

  it('names an import its module does not export, in the app or a file it imports, as that and not a syntax error', () => {
    const dir = appDir({
      'app.js': 'import { Nope } from "perseid";\nexport default function () {}\n',
      'main.js': 'import { helper } from "./lib/util.js";\nexport default function () { helper(); }\n',
      'lib/util.js': 'export function helper() {}\nimport { Colection } from "perseid";\n',
      'lib/old.cjs': 'module.exports = { a: 1 };\n',
      'cjs.js': 'import { b } from "./lib/old.cjs";\nexport default function () {}\n',
    });
    assertOneLine(perseid(dir, ['start', 'app.js']), /: app\.js:1 imports Nope from 'perseid', which has no export of that name: check its spelling and case$/);
    assertOneLine(perseid(dir, ['start', 'main.js']), /: lib\/util\.js:2 imports Colection from 'perseid', which has no export of that name/);
    assertOneLine(perseid(dir, ['start', 'cjs.js']), /: cjs\.js:1 imports b from '\.\/lib\/old\.cjs', a CommonJS module that does not export it by name: import its default export and read b from that$/);
    assert.equal(existsSync(join(dir, '.perseid')), false, 'no data directory');
  });

  it('says where an app threw while loading or setting up', () => {
    const dir = appDir({
      'app.js': 'const ready = false;\nif (!ready) throw new Error("config missing");\nexport default function () {}\n',
      'setup.js': 'export default function app(server) {\n  server.methods({ notAFunction: 42 });\n}\n',
      'none.js': 'export const app = () => {};\n',
      'object.js': 'export default { methods: {} };\n',
    });
    assertOneLine(perseid(dir, ['start', 'app.js']), /app\.js failed while loading: config missing \(at app\.js:2:\d+\)/);
    assert.equal(existsSync(join(dir, '.perseid')), false, 'no data directory after a failed load');
    assertOneLine(perseid(dir, ['start', 'setup.js']), /setup\.js failed while setting up the server: Method 'notAFunction' must be a function \(at setup\.js:2:\d+\)/);
    assertOneLine(perseid(dir, ['start', 'none.js']), /none\.js has no default export: end it with export default function app\(server\)/);
    assertOneLine(perseid(dir, ['start', 'object.js']), /object\.js's default export is an object, not a function: end it with export default function app\(server\)/);
  });

  it('says an app that awaits a promise nothing settles never finished, instead of exiting 0 without a word', () => {
    const dir = appDir({
      'load.js': 'await new Promise(() => {});\nexport default function app() {}\n',
      'setup.js': 'export default async function app() {\n  await new Promise(() => {});\n}\n',
    });
    assertOneLine(perseid(dir, ['start', 'load.js']), /^perseid start: load\.js never finished loading: it awaits a promise that nothing left to run can settle$/);
    assertOneLine(perseid(dir, ['start', 'setup.js']), /^perseid start: setup\.js's setup never finished: it awaits a promise that nothing left to run can settle$/);
  });

  it('says what to change when the module format is the wrong one', () => {
    const esmInCjs = appDir({ 'app.js': 'import { Collection } from "perseid";\nexport default function () {}\n' }, 'commonjs');
    // As npm init -y leaves it: "type": "commonjs", to be changed rather than added to.
    assertOneLine(perseid(esmInCjs, ['start', 'app.js']), /app\.js uses import\/export but Node loads it as CommonJS: set "type": "module" in package\.json \(or rename it to app\.mjs\)/);
    const cjsInEsm = appDir({ 'app.js': 'const { Collection } = require("perseid");\nmodule.exports = function () {};\n' });
    assertOneLine(perseid(cjsInEsm, ['start', 'app.js']), /app\.js:1:\d+ uses require but Node loads it as an ES module .*rename it to app\.cjs/);
  });

  it('starts an ES module in a package.json without "type", with one line saying to add it instead of Node\'s warning', async () => {
    const dir = appDir({ 'app.js': OK_APP }, null);
    const server = await startPerseid(join(dir, 'app.js'), ['--port', '0', '--data-dir', join(dir, 'data')]);
    await server.stop('SIGINT');
    const said = server.log().split('\n').filter((line) => /ES module|MODULE_TYPELESS|trace-warnings|Reparsing/.test(line));
    assert.equal(said.length, 1, server.log());
    assert.match(said[0]!, /WARN {2}\[perseid\] .*app\.js is an ES module but .*package\.json does not say so: add "type": "module" to it \(or rename the file to \.mjs\)/);
  });

  it('reports a port in use, an address not of this machine and an invalid one, for --port and --admin-port, before making the data directory', async () => {
    const dir = appDir({ 'app.js': OK_APP });
    const holder = createServer();
    await new Promise<void>((r) => holder.listen(0, '127.0.0.1', () => r()));
    const { port } = holder.address() as { port: number };
    try {
      assertOneLine(perseid(dir, ['start', 'app.js', '--port', String(port)]), new RegExp(`port ${port} on 127\\.0\\.0\\.1 is already in use .*--port or PORT$`));
      assertOneLine(
        perseid(dir, ['start', 'app.js', '--port', '0', '--admin-port', String(port)]),
        new RegExp(`port ${port} on 127\\.0\\.0\\.1 is already in use .*choose another port with --admin-port or PERSEID_ADMIN_PORT$`),
      );
    } finally {
      holder.close();
    }
    // 192.0.2.1 is TEST-NET-1: never an address of this machine. Binding sends nothing.
    assertOneLine(perseid(dir, ['start', 'app.js', '--host', '192.0.2.1', '--port', '0']), /192\.0\.2\.1 is not an address of this machine: use 127\.0\.0\.1, 0\.0\.0\.0/);
    assertOneLine(perseid(dir, ['start', 'app.js', '--host', '999.1.1.1', '--port', '0']), /: 999\.1\.1\.1 is not a valid IP address: give one such as 127\.0\.0\.1 or 0\.0\.0\.0 .*with --host or HOST$/);
    assertOneLine(perseid(dir, ['start', 'app.js', '--port', '0', '--admin-port', '1', '--admin-host', '10.0.0.300']), /: 10\.0\.0\.300 is not a valid IP address: .*with --admin-host or PERSEID_ADMIN_HOST$/);
    assert.equal(existsSync(join(dir, '.perseid')), false, 'no data directory');
  });

  it('refuses a data directory that is a file or cannot be written, naming it', () => {
    const dir = appDir({ 'app.js': OK_APP, 'data.txt': 'not a directory' });
    assertOneLine(perseid(dir, ['start', 'app.js', '--port', '0', '--data-dir', 'data.txt']), /the data directory data\.txt is a file, not a directory: remove it, or choose another with --data-dir/);
    assertOneLine(perseid(dir, ['start', 'app.js', '--port', '0', '--data-dir', 'data.txt/inside']), /the data directory data\.txt\/inside cannot be created: .*data\.txt is a file/);

    // Root may write anywhere: the not-writable case then runs as nobody.
    const readOnly = join(dir, 'read-only');
    mkdirSync(readOnly);
    chmodSync(dir, 0o755);
    chmodSync(readOnly, 0o555);
    const asNobody = process.getuid?.() === 0 ? { uid: 65534, gid: 65534 } : {};
    assertOneLine(
      perseid(dir, ['start', 'app.js', '--port', '0', '--data-dir', 'read-only'], {}, asNobody),
      /the data directory read-only is not writable by this user: fix its permissions, or choose another/,
    );
    assertOneLine(
      perseid(dir, ['start', 'app.js', '--port', '0', '--data-dir', 'read-only/data'], {}, asNobody),
      /the data directory read-only\/data cannot be created: .*read-only is not writable by this user/,
    );
  });

  it('says a data directory on a read-only mount is on one, rather than blaming permissions', { skip: smallDiskSkip }, () => {
    const dir = appDir({ 'app.js': OK_APP });
    const mount = join(dir, 'ro');
    mkdirSync(mount);
    assert.equal(spawnSync('mount', ['-t', 'tmpfs', '-o', 'ro,size=1m', 'tmpfs', mount]).status, 0, 'mounting a read-only tmpfs');
    try {
      assertOneLine(perseid(dir, ['start', 'app.js', '--port', '0', '--data-dir', 'ro']), /the data directory ro is on a read-only file system: mount it read-write, or choose another/);
      assertOneLine(perseid(dir, ['start', 'app.js', '--port', '0', '--data-dir', 'ro/data']), /the data directory ro\/data cannot be created: .*ro is on a read-only file system/);
    } finally {
      spawnSync('umount', [mount]);
    }
  });

  it('names the process that holds the data directory, with no stack after the message', async () => {
    const dir = appDir({ 'app.js': OK_APP });
    const data = join(dir, 'data');
    const first = await startPerseid(join(dir, 'app.js'), ['--port', '0', '--data-dir', data]);
    try {
      assertOneLine(
        perseid(dir, ['start', 'app.js', '--port', '0', '--data-dir', data]),
        new RegExp(`^perseid start: the data directory .*data is in use by another process \\(pid ${first.child.pid} on .*\\): stop it, or give this one another data directory$`),
      );
    } finally {
      await first.stop('SIGINT');
    }
  });

  it('says which MongoDB it cannot reach, its password hidden, and that a MONGO_URL is not one before loading the app', () => {
    const dir = appDir({ 'app.js': OK_APP });
    assertOneLine(
      perseid(dir, ['start', 'app.js', '--port', '0'], { MONGO_URL: 'notaurl' }),
      /^perseid start: MONGO_URL is not a valid MongoDB connection string \(Invalid scheme, expected connection string to start with "mongodb:\/\/" or "mongodb\+srv:\/\/"\): fix it; the form is mongodb:\/\/host:27017\/database$/,
    );
    assertOneLine(perseid(dir, ['start', 'app.js', '--port', '0'], { MONGO_URL: 'mongodb://127.0.0.1:1/x', MONGO_OPLOG_URL: 'mongodb://h/x?nosuchoption=1' }), /^perseid start: MONGO_OPLOG_URL is not a valid MongoDB connection string \(option nosuchoption is not supported\)/);
    const out = perseid(dir, ['start', 'app.js', '--port', '0'], { MONGO_URL: 'mongodb://someone:secret@127.0.0.1:1/x?serverSelectionTimeoutMS=300' });
    assertOneLine(out, /^perseid start: cannot reach MongoDB at mongodb:\/\/someone:\*\*\*@127\.0\.0\.1:1\/x\?serverSelectionTimeoutMS=300 within 300 ms: connect ECONNREFUSED 127\.0\.0\.1:1$/);
  });

  it('refuses a PERSEID_CHANGE_SOURCE it has no such source for, the oplog without MONGO_OPLOG_URL, and MongoDB tuning variables it cannot read, before connecting', () => {
    const dir = appDir({ 'app.js': OK_APP });
    const mongo = { MONGO_URL: 'mongodb://127.0.0.1:1/x?serverSelectionTimeoutMS=300' };
    assertOneLine(perseid(dir, ['start', 'app.js', '--port', '0'], { ...mongo, PERSEID_CHANGE_SOURCE: 'changestream' }), /^perseid start: PERSEID_CHANGE_SOURCE must be auto, change-stream, oplog or poll \(got changestream\)$/);
    assertOneLine(perseid(dir, ['start', 'app.js', '--port', '0'], { ...mongo, PERSEID_CHANGE_SOURCE: 'oplog' }), /^perseid start: PERSEID_CHANGE_SOURCE=oplog needs MONGO_OPLOG_URL \(the replica set's local database\): set it, or choose change-stream, poll or auto$/);
    // Read as numbers or as 'off', these fell back to their defaults without a word.
    assertOneLine(perseid(dir, ['start', 'app.js', '--port', '0'], { ...mongo, PERSEID_POLL_INTERVAL_MS: '5s' }), /^perseid start: PERSEID_POLL_INTERVAL_MS must be a number of milliseconds, 1 or more \(got 5s\)$/);
    assertOneLine(perseid(dir, ['start', 'app.js', '--port', '0'], { ...mongo, PERSEID_MONGO_TIMEOUT_MS: '0' }), /^perseid start: PERSEID_MONGO_TIMEOUT_MS must be a number of milliseconds, 1 or more \(got 0\)$/);
    assertOneLine(perseid(dir, ['start', 'app.js', '--port', '0'], { ...mongo, PERSEID_ROUTE_CHANGES: 'false' }), /^perseid start: PERSEID_ROUTE_CHANGES must be on or off \(got false\)$/);
  });

  it('says in one line that the MongoDB server delivers no change streams when PERSEID_CHANGE_SOURCE asks for them', { skip: needsServices({ ferretdb }) }, async () => {
    const dir = appDir({ 'app.js': OK_APP });
    const database = freshDatabase(ferretdb!);
    try {
      const out = perseid(dir, ['start', 'app.js', '--port', '0'], { MONGO_URL: database.url, PERSEID_CHANGE_SOURCE: 'change-stream' });
      assertOneLine(out, /^perseid start: this MongoDB server does not deliver change streams, which need a replica set: run it as one, or set PERSEID_CHANGE_SOURCE to oplog \(with MONGO_OPLOG_URL\), poll or auto$/);
    } finally {
      await database.drop();
    }
  });

  it('gives up on an unreachable Redis within the bound, saying why', () => {
    const dir = appDir({ 'app.js': OK_APP });
    const started = Date.now();
    const out = perseid(dir, ['start', 'app.js', '--port', '0', '--fanout', 'redis'], {
      REDIS_URL: 'redis://127.0.0.1:1',
      MONGO_URL: 'mongodb://127.0.0.1:1/x',
      PERSEID_CONNECT_TIMEOUT_MS: '1500',
    });
    assertOneLine(out, /cannot reach Redis at redis:\/\/127\.0\.0\.1:1\/? within 1500 ms \(connect ECONNREFUSED 127\.0\.0\.1:1\): start it, or fix REDIS_URL/);
    assert.ok(Date.now() - started < 15000, 'bounded');
  });

  it("docs/getting-started.md's table shows each start-up error as the tests above saw it", () => {
    const documented = documentedStartupErrors();
    assert.ok(documented.length >= 10, `${documented.length} messages in the table`);
    for (const pattern of documented) assert.ok(oneLiners.some((line) => pattern.test(line)), `the table shows ${pattern}, which no start-up error above reads like:\n${oneLiners.join('\n')}`);
  });
});
