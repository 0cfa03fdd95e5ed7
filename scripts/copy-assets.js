#!/usr/bin/env node
// Copies the examples' static files next to their compiled modules, so an app
// finds ./public beside itself whether it runs from source or from dist/.
import { cpSync, existsSync, readdirSync } from 'node:fs';
import { join } from 'node:path';

for (const app of readdirSync('examples')) {
  const from = join('examples', app, 'public');
  if (existsSync(from)) cpSync(from, join('dist', 'examples', app, 'public'), { recursive: true });
}
