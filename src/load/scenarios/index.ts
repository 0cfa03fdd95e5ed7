/** The built-in scenarios, by the names BENCHMARKS.md gives them. */
import type { ScenarioModule } from '../scenario.js';
import * as s1 from './s1-tasks-reactive.js';
import * as s2 from './s2-tasks-nonreactive.js';
import * as s3 from './s3-pub-cycle.js';
import * as s4 from './s4-chat.js';
import * as s6 from './s6-capacity.js';

export const BUILT_IN: Record<string, ScenarioModule> = { s1, s2, s3, s4, s6 };
