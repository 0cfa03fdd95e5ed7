import js from '@eslint/js';
import globals from 'globals';
import tseslint from 'typescript-eslint';

/**
 * Which way imports run between the folders of src/ (the README's Layout):
 * each folder may import only the folders listed for it, besides itself, the
 * root modules (log.ts) and packages. Lower layers know nothing of higher ones.
 */
const LAYERS = {
  metrics: [],
  ddp: [],
  query: ['ddp'], // pure (mingo and the codec): the client shares it
  data: ['ddp', 'query', 'metrics', 'fanout', 'coordination'],
  coordination: ['data', 'ddp', 'metrics'],
  fanout: ['metrics', 'ddp'],
  reactive: ['data', 'query', 'ddp', 'metrics'],
  collections: ['reactive', 'data', 'query', 'ddp', 'metrics'],
  transport: ['ddp', 'metrics'],
  jobs: ['collections', 'coordination', 'data', 'ddp', 'metrics'],
  server: ['transport', 'jobs', 'collections', 'reactive', 'data', 'query', 'ddp', 'metrics'],
  'rate-limit': ['server', 'ddp', 'metrics'],
  contract: [], // pure: shared by server and client
  validation: ['server', 'contract', 'ddp'],
  accounts: ['server', 'rate-limit', 'validation', 'collections', 'data', 'ddp', 'metrics'],
  cluster: ['server', 'jobs', 'transport', 'collections', 'reactive', 'data', 'fanout', 'coordination', 'ddp', 'metrics'],
  autoscale: ['cluster', 'metrics'],
  client: ['ddp', 'query', 'contract'],
  react: ['client', 'contract', 'ddp'],
  load: ['client', 'ddp'],
  testing: [], // runs the CLI as a process: imports nothing of ours
};
const FOLDERS = ['metrics', 'ddp', 'query', 'data', 'coordination', 'fanout', 'reactive', 'collections', 'jobs', 'transport', 'server', 'rate-limit', 'contract', 'validation', 'accounts', 'cluster', 'autoscale', 'client', 'react', 'load', 'testing', 'cli'];

/** Folders that run in browsers (the client bundle): no Node modules. */
const BROWSER = ['ddp', 'query', 'contract', 'client', 'react'];

function layerRules() {
  return Object.entries(LAYERS).map(([folder, allowed]) => {
    const forbidden = FOLDERS.filter((f) => f !== folder && !allowed.includes(f));
    const patterns = [
      {
        regex: `^\\.\\.?/(\\.\\./)*(${forbidden.join('|')})/`,
        message: `src/${folder}/ may import only ${allowed.length ? allowed.join(', ') : 'nothing else of Perseid'} (see LAYERS in eslint.config.js).`,
      },
    ];
    if (BROWSER.includes(folder)) {
      // The browser client is bundled for pages: Node's modules must stay out (client/node.ts is the Node entry).
      patterns.push({ regex: '^node:', message: `src/${folder}/ runs in browsers: no Node modules (client/node.ts is the Node entry).` });
    }
    return {
      files: [`src/${folder}/**/*.ts`],
      ignores: folder === 'client' ? ['src/client/node.ts'] : [],
      rules: { 'no-restricted-imports': ['error', { patterns }] },
    };
  });
}

export default tseslint.config(
  { ignores: ['dist/', 'node_modules/', '.cache/', 'examples/*/public/vendor/'] },
  js.configs.recommended,
  ...tseslint.configs.recommended,
  {
    languageOptions: {
      parserOptions: { projectService: true, tsconfigRootDir: import.meta.dirname },
    },
    rules: {
      '@typescript-eslint/no-floating-promises': [
        'error',
        {
          allowForKnownSafeCalls: [
            { from: 'package', package: 'node:test', name: ['describe', 'it', 'test', 'suite', 'before', 'after'] },
          ],
        },
      ],
      '@typescript-eslint/no-misused-promises': ['error', { checksVoidReturn: false }],
      '@typescript-eslint/no-unused-vars': ['error', { argsIgnorePattern: '^_', varsIgnorePattern: '^_' }],
      '@typescript-eslint/consistent-type-imports': 'error',
      'no-constant-condition': ['error', { checkLoops: false }],
    },
  },
  ...layerRules(),
  {
    files: ['**/*.js', '**/*.mjs'],
    extends: [tseslint.configs.disableTypeChecked],
    languageOptions: {
      parserOptions: { projectService: false },
      globals: globals.node,
    },
  },
  {
    files: ['examples/*/public/**/*.js', 'templates/*/public/**/*.js', 'docs/samples/readme/page.js'],
    languageOptions: { globals: globals.browser },
  },
);
