/** perseid/load: the load tester as a library (the `perseid load` command is built on it). */
export { runScenario, planRun, loadScenario, LoadSetupError, type LoadSettings, type RunPlan } from './run-scenario.js';
export { runLoad, arrivalTimes, type RunOptions, type RunResult } from './runner.js';
export type { Scenario, ScenarioContext, ScenarioDefaults, ScenarioModule, Phase } from './scenario.js';
export type { LoadClient, ApplyOptions, SubscriptionHandle, ClientCounters } from './load-client.js';
export { LeanLoadClient, FullLoadClient, connectClient } from './clients.js';
export { Measurements, summarize, type LatencySummary, type TimelinePoint } from './measurements.js';
export { BUILT_IN } from './scenarios/index.js';
export type { LoadReport, RunSetup, ServerFigures } from './report/model.js';
export { summaryText } from './report/summary.js';
export { htmlReport } from './report/html.js';
export { compareReports, compareText, setupDifferences, differenceText, type Change, type Comparison, type Difference } from './report/compare.js';
export { ProcessSampler } from './process-sampler.js';
export { cpuSeconds } from './process-table.js';
