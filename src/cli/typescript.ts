/**
 * TypeScript app files run as written: with Node's own type stripping where
 * this Node has it turned on, else through tsx (a maintained loader, loaded
 * only when an app file is TypeScript).
 */
export const TYPESCRIPT_FILE = /\.[cm]?tsx?$/;

let enabled: Promise<void> | undefined;

/** Node's type stripping (22.18+ and 23.6+ by default; 22.6+ with --experimental-strip-types). */
export function nodeStripsTypes(): boolean {
  return Boolean((process.features as { typescript?: string | false }).typescript);
}

export function enableTypeScript(): Promise<void> {
  return (enabled ??= (async () => {
    if (nodeStripsTypes()) return;
    const [esm, cjs] = await Promise.all([import('tsx/esm/api'), import('tsx/cjs/api')]);
    esm.register();
    cjs.register();
  })());
}
