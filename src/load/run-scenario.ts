/**
 * One `perseid load` run from start to report: resolve the scenario (built-in
 * or a script), check the server answers, sample its process if asked, run the
 * users, and assemble the report.
 */
import { resolve } from 'node:path';
import { pathToFileURL } from 'node:url';
import { toWebSocketUrl } from '../client/url.js';
import { ProcessSampler } from './process-sampler.js';
import { operationsPerSecond, type LoadReport, type RunSetup, type ServerFigures, type ServerSample } from './report/model.js';
import { runLoadInProcesses } from './processes.js';
import { runLoad, type RunOptions } from './runner.js';
import type { Phase, ScenarioModule } from './scenario.js';
import { BUILT_IN } from './scenarios/index.js';
import { LoadSetupError } from './setup-error.js';
import { SpawnedServer } from './spawned-server.js';

export interface LoadSettings {
  /** The server, or several: users are spread over them in turn. */
  url: string | string[];
  /** A built-in name (s1 … s6) or the path of a script module. */
  scenario: string;
  client?: 'lean' | 'full';
  phases?: Phase[];
  concurrency?: number;
  duration?: number;
  iterations?: number;
  thinkMs?: number;
  timeoutMs?: number;
  maxUsers?: number;
  graceSeconds?: number;
  params?: Record<string, string>;
  /** Sample this process's CPU and memory. */
  serverPid?: number;
  /** Start this command (a shell command line) as the server, sample it, stop it at the end. */
  spawnServer?: string;
  command?: string;
  onProgress?: RunOptions['onProgress'];
  /** Generator processes the users are spread over (default 1: this one). */
  processes?: number;
  /** The module each generator process runs (see processes.ts); needed when `processes` > 1. */
  generatorEntry?: URL;
  /** Stops the run early; the report covers what was measured until then. */
  signal?: AbortSignal;
}

export { LoadSetupError };

export async function loadScenario(name: string): Promise<{ module: ScenarioModule; name: string }> {
  const builtIn = BUILT_IN[name.toLowerCase()];
  if (builtIn) return { module: builtIn, name: name.toLowerCase() };
  let module: ScenarioModule;
  try {
    module = (await import(pathToFileURL(resolve(name)).href)) as ScenarioModule;
  } catch (error) {
    throw new LoadSetupError(`cannot load the scenario '${name}' (not one of ${Object.keys(BUILT_IN).join(', ')}, and not a module: ${(error as Error).message})`);
  }
  if (typeof module.default !== 'function') throw new LoadSetupError(`${name} has no default export async function (client, ctx) => { ... }`);
  return { module, name };
}

/** Why nothing answers HTTP at the URL's host and port, or undefined if something does. */
async function noAnswer(url: string): Promise<string | undefined> {
  const http = new URL(toWebSocketUrl(url).replace(/^ws/, 'http'));
  try {
    await fetch(`${http.origin}/`, { signal: AbortSignal.timeout(2000) });
    return undefined;
  } catch (error) {
    return ((error as { cause?: { code?: string } }).cause?.code ?? (error as Error).message) || 'no answer';
  }
}

/** Checks that something answers at the URL before starting users, for a clear message instead of N connection errors. */
async function reachable(url: string, timeoutMs: number, server?: SpawnedServer): Promise<string | undefined> {
  const deadline = Date.now() + timeoutMs;
  let last = '';
  while (Date.now() < deadline) {
    if (server?.exited) return `the --spawn command ${server.exited}`;
    const problem = await noAnswer(url);
    if (problem === undefined) return undefined;
    last = problem;
    await new Promise((r) => setTimeout(r, 200));
  }
  return last;
}

function serverSamples(sampler: ProcessSampler): ServerSample[] {
  const out: ServerSample[] = [];
  let previous = { t: 0, cpuSeconds: 0 };
  for (const sample of sampler.samples) {
    const dt = sample.t - previous.t;
    out.push({ t: Math.round(sample.t * 100) / 100, cpuPercent: dt > 0 ? Math.round(((sample.cpuSeconds - previous.cpuSeconds) / dt) * 1000) / 10 : 0, rssMb: Math.round(sample.rssMb) });
    previous = sample;
  }
  return out;
}

/** A scenario's default phases stretched or shrunk to last `duration` seconds, when `--duration` alone is given. */
export function fitted(phases: Phase[], duration: number | undefined): Phase[] {
  if (duration === undefined) return phases;
  const total = phases.reduce((sum, phase) => sum + phase.duration, 0);
  return phases.map((phase) => ({ ...phase, duration: (phase.duration * duration) / total }));
}

/** What a run will do, resolved from the settings and the scenario's defaults before it starts. */
export interface RunPlan extends RunSetup {
  module: ScenarioModule;
}

export async function planRun(settings: LoadSettings): Promise<RunPlan> {
  const { module, name } = await loadScenario(settings.scenario);
  const defaults = module.options ?? {};
  const fixed = settings.concurrency !== undefined || (settings.phases === undefined && defaults.concurrency !== undefined);
  if (settings.iterations !== undefined && !fixed) {
    throw new LoadSetupError(`--iterations counts the runs of each user at a fixed concurrency, and ${name} runs by arrivals (each user runs it once): add --concurrency <n>, or leave out --iterations`);
  }
  const shape = fixed
    ? { concurrency: settings.concurrency ?? defaults.concurrency!, duration: settings.duration ?? defaults.duration ?? 60, iterations: settings.iterations }
    : { phases: settings.phases ?? fitted(defaults.phases ?? [{ duration: 60, arrivalRate: 4 }], settings.duration) };
  const processes = settings.processes ?? 1;
  return {
    module,
    scenario: { name, description: defaults.description ?? 'custom scenario' },
    client: settings.client ?? defaults.client ?? 'full',
    shape: { ...shape, thinkMs: settings.thinkMs ?? 0, ...(processes > 1 ? { processes } : {}) },
    params: { ...defaults.params, ...settings.params },
  };
}

export async function runScenario(settings: LoadSettings): Promise<LoadReport> {
  const plan = await planRun(settings);
  const { module, client, shape, params } = plan;
  const { name } = plan.scenario;
  const timeoutMs = settings.timeoutMs ?? 30000;

  const urls = [settings.url].flat();
  let spawned: SpawnedServer | undefined;
  let sampler: ProcessSampler | undefined;
  try {
    if (settings.spawnServer) {
      // Another server there would take the load while the one started is sampled (and fails on the busy port).
      for (const url of urls) {
        if ((await noAnswer(url)) === undefined) throw new LoadSetupError(`${url} already answers before the --spawn command starts: stop the server there, or load it with --server-pid instead of --spawn`);
      }
      spawned = await SpawnedServer.start(settings.spawnServer).catch((error: Error) => {
        throw new LoadSetupError(`cannot start the --spawn command: ${error.message}`);
      });
    }
    for (const url of urls) {
      const problem = await reachable(url, spawned ? 30000 : 3000, spawned);
      if (problem) throw new LoadSetupError(`cannot reach ${url}: ${problem}`);
    }
    const pid = spawned?.pid ?? settings.serverPid;
    if (pid !== undefined) {
      try {
        sampler = new ProcessSampler(pid);
      } catch {
        throw new LoadSetupError(`cannot sample process ${pid}: no such process (or no /proc here)`);
      }
    }
    const options = {
      urls,
      client,
      phases: shape.phases,
      concurrency: shape.concurrency,
      duration: shape.duration,
      iterations: shape.iterations,
      thinkMs: shape.thinkMs,
      timeoutMs,
      maxUsers: settings.maxUsers ?? 20000,
      graceSeconds: settings.graceSeconds ?? Math.max(60, (2 * timeoutMs) / 1000),
      params,
    };
    const progressExtra = sampler
        ? () => {
            const s = sampler!.samples;
            const last = s.at(-1);
            const before = s.at(-5);
            if (!last || !before) return '';
            return `server ${(((last.cpuSeconds - before.cpuSeconds) / (last.t - before.t)) * 100).toFixed(0)} % CPU ${last.rssMb.toFixed(0)} MB`;
          }
        : undefined;
    const result =
      shape.processes !== undefined
        ? await runLoadInProcesses({
            processes: shape.processes,
            entry: settings.generatorEntry!,
            scenario: BUILT_IN[name] ? name : resolve(settings.scenario),
            options,
            onProgress: settings.onProgress,
            progressExtra,
            signal: settings.signal,
          })
        : await runLoad({ ...options, scenario: module.default, onProgress: settings.onProgress, progressExtra, signal: settings.signal });
    let server: ServerFigures | undefined;
    if (sampler && pid !== undefined) {
      const { cpuSeconds, peakRssMb, processes } = sampler.stop();
      server = { pid, processes, cpuSeconds, cpuPercent: (100 * cpuSeconds) / result.seconds, peakRssMb, samples: serverSamples(sampler) };
      sampler = undefined;
    }
    const subscribe = result.measures.subscribe;
    return {
      tool: 'perseid load',
      date: new Date().toISOString(),
      node: process.version,
      command: settings.command ?? `perseid load ${name}`,
      url: urls.join(' '),
      scenario: plan.scenario,
      client,
      shape,
      params,
      ...result,
      rates: {
        operationsPerSecond: operationsPerSecond(result.measures, result.seconds),
        subscriptionsPerMinute: subscribe ? (subscribe.count / result.seconds) * 60 : undefined,
      },
      server,
    };
  } finally {
    sampler?.stop();
    await spawned?.stop();
  }
}
