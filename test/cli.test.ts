/** The `perseid` command: help, usage errors, and a real server process started, used, killed and restarted. */
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { after, describe, it } from 'node:test';
import { adviseCommand, capacityCommand, topCommand } from '../src/cli/apm.js';
import { helpText, parseCommand } from '../src/cli/args.js';
import { autoscaleCommand } from '../src/cli/autoscale.js';
import { createCommand } from '../src/cli/create.js';
import { devCommand } from '../src/cli/dev.js';
import { loadCommand } from '../src/cli/load.js';
import { startCommand } from '../src/cli/start.js';
import { storeCommand } from '../src/cli/store.js';
import { DDPClient } from '../src/client/node.js';
import { serviceUrl } from '../scripts/services/control.js';
import { freePort } from '../scripts/services/process.js';
import { freshDatabase } from './databases.js';
import { CLI, eventually, exited, spawnPerseid, startPerseid, type PerseidProcess } from './processes.js';
import { needsServices } from './skips.js';

const APP = 'dist/examples/tasks/app.js';
/** Every command, in the order `perseid --help` lists them. */
const SPECS = { create: createCommand, dev: devCommand, start: startCommand, load: loadCommand, autoscale: autoscaleCommand, top: topCommand, advise: adviseCommand, capacity: capacityCommand, store: storeCommand };
const mongo = await serviceUrl('mongo-java-server');

/** Bounded: a command that should have refused its arguments but runs on is killed, and fails on its status. */
function run(args: string[], env: NodeJS.ProcessEnv = {}) {
  return spawnSync(process.execPath, [CLI, ...args], { encoding: 'utf8', env: { ...process.env, ...env }, timeout: 15000 });
}

/** Starts the tasks app on a free port over the embedded store in `dataDir`. */
function start(dataDir: string, extra: string[] = []): Promise<PerseidProcess> {
  return startPerseid(APP, ['--port', '0', '--data-dir', dataDir, ...extra]);
}

describe('perseid CLI', () => {
  const dirs: string[] = [];
  const tempDir = () => {
    const dir = mkdtempSync(join(tmpdir(), 'perseid-cli-'));
    dirs.push(dir);
    return dir;
  };
  after(() => {
    for (const dir of dirs) rmSync(dir, { recursive: true, force: true });
  });

  it('prints help for the command and for each subcommand', () => {
    for (const args of [['--help'], ['help'], []]) {
      const out = run(args);
      assert.equal(out.status, 0);
      assert.match(out.stdout, /Usage: perseid <command>/);
      assert.match(out.stdout, /start/);
    }
    for (const args of [['start', '--help'], ['help', 'start']]) {
      const out = run(args);
      assert.equal(out.status, 0);
      assert.match(out.stdout, /Usage: perseid start <app-module>/);
      assert.match(out.stdout, /--port <port>.*env PORT/);
      assert.match(out.stdout, /--data-dir <dir>.*env PERSEID_DATA_DIR/);
    }
  });

  it('gives an example in every command\'s help, whose flags the command takes; create\'s makes the app', () => {
    const listed = [...run(['--help']).stdout.matchAll(/^ {2}(\w+) {2,}/gm)].map((m) => m[1]!);
    assert.deepEqual(listed, Object.keys(SPECS));
    for (const [name, spec] of Object.entries(SPECS)) {
      const example = new RegExp(`^Example: perseid ${name} (.+)$`, 'm').exec(helpText(spec))?.[1];
      assert.ok(example, `perseid ${name} --help has no example`);
      assert.doesNotThrow(() => parseCommand(spec, example.split(' '), {}), `perseid ${name} ${example}`);
      if (name === 'create') {
        const made = spawnSync(process.execPath, [resolve(CLI), name, ...example.split(' ')], { cwd: tempDir(), encoding: 'utf8', timeout: 15000 });
        assert.equal(made.status, 0, made.stderr);
      }
    }
  });

  it('exits 2 with a clear message on bad usage', () => {
    const cases: Array<[string[], RegExp]> = [
      [['frobnicate'], /unknown command 'frobnicate'/],
      [['help', 'strat'], /^perseid: unknown command 'strat' \(did you mean start\?\)$/m],
      [['start'], /Missing the app module/],
      [['create', ''], /^perseid create: Missing the directory: perseid create <dir>/m],
      [['start', APP, '--port', 'abc'], /--port must be an integer/],
      [['start', APP, '--nope'], /unknown option --nope/],
      [['start', APP, '--compression', 'lots'], /--compression must be a byte count or off/],
      [['start', APP, '--log-level', 'loud'], /--log-level must be one of/],
      [['start', APP, 'other.js'], /^perseid start: One app module at a time \(got \S+app\.js and other\.js\)$/m],
      [['dev', APP, 'other.js', 'third.js'], /^perseid dev: One app module at a time \(got \S+app\.js, other\.js and third\.js\)$/m],
      // dev refuses start's options itself: no save could fix them, so it must not sit waiting for one.
      [['dev', APP, '--port', 'abc'], /^perseid dev: --port must be an integer from 0 to 65535 \(got abc\)$/m],
      [['dev', APP, '--log-level', 'loud'], /^perseid dev: --log-level must be one of/m],
      [['top', 'extra'], /^perseid top: takes no arguments, only options \(got extra\)$/m],
      [['autoscale', '--dry-run', 'x', 'y'], /^perseid autoscale: takes no arguments, only options \(got x y\)$/m],
      // A negative number is the flag's value, refused by its range check, not taken for a flag.
      [['start', APP, '--drain-ms', '-5'], /--drain-ms must be an integer from 0 to 3600000 \(got -5\)/],
      [['start', APP, '--max-total-buffered', '1TiB'], /--max-total-buffered must be a byte count of at least 1KiB, in bytes or with K, M or G \(KiB, MiB, GiB\), e\.g\. 64MiB \(got 1TiB\)/],
      [['start', APP, '-p', '-1'], /--port must be an integer from 0 to 65535 \(got -1\)/],
      [['start', APP, '--drain-ms', '--fsync'], /--drain-ms needs a value \(one starting with '-' is written --drain-ms=<value>\)/],
      [['start', APP, '--fsync=yes'], /--fsync takes no value/],
      [['start', APP, '--content-security-policy', "default-src 'self';\nimg-src 'self'"], /^perseid start: --content-security-policy: The Content-Security-Policy must be one line, without a newline/m],
    ];
    for (const [args, message] of cases) {
      const out = run(args);
      assert.equal(out.status, 2, args.join(' '));
      assert.match(out.stderr, message);
    }
  });

  it('says to put -- before its options when npm took one for itself (npm run dev --port 4000)', () => {
    const dir = tempDir();
    const cli = `node ${JSON.stringify(resolve(CLI))}`;
    writeFileSync(join(dir, 'package.json'), JSON.stringify({ type: 'module', scripts: { start: `${cli} start app.js`, dev: `${cli} dev app.js` } }));
    const npm = (args: string[]) => spawnSync('npm', args, { cwd: dir, encoding: 'utf8', timeout: 30000, env: { ...process.env, npm_config_loglevel: 'error' } });
    // npm hands 4000 on as an argument, which was refused as a second app module; with --port=4000 the server ran on 3000.
    const cases: Array<[string[], string]> = [
      [['start', '--port', '4000'], 'perseid start: npm took --port as an option of its own: put -- before the options for perseid, as in npm start -- --port <port>'],
      [['run', 'dev', '--port=4000'], 'perseid dev: npm took --port as an option of its own: put -- before the options for perseid, as in npm run dev -- --port 4000'],
    ];
    for (const [args, line] of cases) {
      const out = npm(args);
      assert.notEqual(out.status, 0, `npm ${args.join(' ')}`);
      assert.ok(out.stderr.split('\n').includes(line), `npm ${args.join(' ')}:\n${out.stderr}`);
    }
  });

  it('refuses an HTTP_FORWARDED_COUNT that is not a count, which would leave the client at the proxy\'s address', () => {
    for (const value of ['one', '-1', '1.5', 'true']) {
      const out = run(['start', APP, '--port', '0'], { HTTP_FORWARDED_COUNT: value });
      assert.equal(out.status, 2, value);
      assert.match(out.stderr, new RegExp(`^perseid start: HTTP_FORWARDED_COUNT must be the number of proxies in front of the server, 0 or more \\(got ${value.replace('.', '\\.')}\\)$`, 'm'));
    }
  });

  it('refuses a PERSEID_ADMIN_TOKEN no request could send, in one line, instead of answering every request 401', () => {
    for (const token of ['open sesame', 'pässwort']) {
      const out = run(['start', APP, '--port', '0'], { PERSEID_ADMIN_TOKEN: token });
      assert.equal(out.status, 2, token);
      assert.match(out.stderr, /^perseid start: PERSEID_ADMIN_TOKEN may hold only visible ASCII characters, no spaces: no request could send it as Authorization: Bearer <token>$/m);
    }
  });

  it('refuses an --admin-port that is the main port, before the app starts and fails to bind it', async () => {
    const port = String(await freePort());
    const dataDir = join(tempDir(), 'data');
    for (const args of [['start', APP], ['dev', APP], ['start', APP, '--host', '0.0.0.0']]) {
      const out = run([...args, '--port', port, '--admin-port', port, '--data-dir', dataDir]);
      assert.equal(out.status, 2, args.join(' '));
      assert.match(out.stderr, new RegExp(`^perseid (start|dev): --admin-port ${port} is the port the app listens on \\(--port\\): give the operational endpoints another port, or leave --admin-port out to serve them on the main one$`, 'm'));
    }
  });

  it('refuses scale-out options that cannot work, saying what is missing', () => {
    const bare = { MONGO_URL: '', REDIS_URL: '' };
    const cases: Array<[string[], NodeJS.ProcessEnv, RegExp]> = [
      [['--workers', '2'], bare, /--workers needs MONGO_URL: the embedded store belongs to a single process/],
      [['--workers', 'many'], bare, /--workers must be a count or auto/],
      [['--public-url', 'http://a.example'], bare, /need MONGO_URL/],
      [['--balancer'], { ...bare, MONGO_URL: 'mongodb://127.0.0.1:1/x' }, /--balancer needs --public-url/],
      [['--public-url', 'ftp://a.example'], { ...bare, MONGO_URL: 'mongodb://127.0.0.1:1/x' }, /--public-url must be an http/],
      [['--public-url', 'http://a.example', '--discovery', 'redis'], { ...bare, MONGO_URL: 'mongodb://127.0.0.1:1/x' }, /Discovery in Redis needs REDIS_URL/],
      [['--fanout', 'redis'], { ...bare, MONGO_URL: 'mongodb://127.0.0.1:1/x' }, /--fanout redis needs REDIS_URL/],
      [['--fanout', 'carrier-pigeon'], { ...bare, MONGO_URL: 'mongodb://127.0.0.1:1/x' }, /--fanout must be redis or off/],
    ];
    for (const [args, env, message] of cases) {
      const out = run(['start', APP, ...args], env);
      assert.equal(out.status, 2, args.join(' '));
      assert.match(out.stderr, message);
    }
    const help = run(['start', '--help']);
    for (const flag of ['--workers', '--drain-ms', '--public-url', '--balancer', '--discovery', '--fanout', '--relay']) assert.match(help.stdout, new RegExp(flag));
  });

  it('takes PORT from the environment, serves health, and stops cleanly on SIGTERM', async () => {
    const dir = tempDir();
    const server = await start(dir);
    const health = (await (await fetch(`${server.url}/health`)).json()) as { status: string };
    assert.equal(health.status, 'ok');
    server.child.kill('SIGTERM');
    assert.equal(await exited(server.child), 0);
    const refused = run(['start', APP, '--data-dir', dir], { PORT: 'x' });
    assert.equal(refused.status, 2);
    // Named as it was set: '--port must be ...' sent one who never typed --port looking for a flag.
    assert.match(refused.stderr, /^perseid start: PORT must be an integer from 0 to 65535 \(got x\)$/m);
    const bytes = run(['start', APP, '--data-dir', dir], { PERSEID_MAX_BUFFERED: 'lots' });
    assert.match(bytes.stderr, /^perseid start: PERSEID_MAX_BUFFERED must be a byte count/m);
    assert.match(run(['start', APP, '--data-dir', dir, '--port', 'x'], { PORT: '3000' }).stderr, /^perseid start: --port must be an integer/m);
  });

  // From the moment it listens, /health answers, and a supervisor that waits for that (autoscale --local, an
  // orchestrator's probe) may send SIGTERM at once, while the jobs role still sets up its leases in MongoDB.
  it('drains on a SIGTERM sent as soon as /health answers, before the rest has started', { skip: needsServices({ 'mongo-java-server': mongo }) }, async () => {
    for (let i = 0; i < 3; i++) {
      const database = freshDatabase(mongo!);
      const port = await freePort();
      const server = spawnPerseid(['start', 'dist/examples/jobs/app.js', '--port', String(port)], { MONGO_URL: database.url });
      try {
        await eventually(() => fetch(`http://127.0.0.1:${port}/health`).then((r) => r.ok, () => false), 'the server answering /health', 15000);
        assert.equal(await server.stop('SIGTERM'), 0, server.output());
        assert.match(server.output(), /draining, then stopping signal=SIGTERM/);
      } finally {
        server.child.kill('SIGKILL');
        await database.drop();
      }
    }
  });

  it('refuses a second server on the same data directory', async () => {
    const dir = tempDir();
    const first = await start(dir);
    try {
      const second = spawnSync(process.execPath, [CLI, 'start', APP, '--port', '0', '--data-dir', dir], { encoding: 'utf8', timeout: 10000 });
      assert.equal(second.status, 1);
      assert.match(second.stderr, new RegExp(`^perseid start: the data directory ${dir} is in use by another process \\(pid ${first.child.pid} on [^\n]*\\): stop it[^\n]*\n$`));
    } finally {
      // A failed check must not leave the server holding the test file open.
      first.child.kill('SIGTERM');
      await exited(first.child);
    }
  });

  it('keeps every acknowledged insert through kill -9 and a restart', async () => {
    const dir = tempDir();
    const first = await start(dir);
    const client = new DDPClient(first.url, { autoReconnect: false });
    const acknowledged: string[] = [];
    let stop = false;
    const writers = [1, 2, 3, 4].map(async (w) => {
      for (let i = 0; !stop; i++) {
        try {
          acknowledged.push(await client.call<string>('insertTask', { description: `w${w} #${i}`, sessionId: `writer-${w}` }));
        } catch {
          return;
        }
      }
    });
    await eventually(() => acknowledged.length >= 300, '300 acknowledged inserts', 30000);
    first.child.kill('SIGKILL');
    await exited(first.child);
    stop = true;
    await Promise.all(writers);
    client.disconnect();

    const second = await start(dir);
    const reader = new DDPClient(second.url);
    try {
      const stored = new Set((await reader.call<Array<{ _id: string }>>('fetchTasks')).map((t) => t._id));
      const missing = acknowledged.filter((id) => !stored.has(id));
      assert.deepEqual(missing, [], `${missing.length} of ${acknowledged.length} acknowledged inserts lost`);
    } finally {
      reader.disconnect();
      second.child.kill('SIGTERM');
      await exited(second.child);
    }
  });
});
