/**
 * TypeScript app files run as written, through tsx (a maintained loader,
 * loaded only when an app file is TypeScript), on every Node version. Node's
 * own type stripping (22.18+, 24) is not enough for apps written for tsc: it
 * does not find `./contract.ts` from `import './contract.js'`, and refuses
 * enums and parameter properties.
 */
export const TYPESCRIPT_FILE = /\.[cm]?tsx?$/;

let enabled: Promise<void> | undefined;

export function enableTypeScript(): Promise<void> {
  return (enabled ??= (async () => {
    const [esm, cjs] = await Promise.all([import('tsx/esm/api'), import('tsx/cjs/api')]);
    esm.register();
    cjs.register();
  })());
}
