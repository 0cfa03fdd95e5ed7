/** A promise together with the functions that settle it (Promise.withResolvers is newer than Node 20). */
export interface Deferred<T> {
  promise: Promise<T>;
  resolve(value: T): void;
  reject(error: Error): void;
}

/**
 * `optional`: the promise is one callers may ignore (a subscription's `ready`),
 * so its rejection must not be reported as unhandled; awaiting it still throws.
 */
export function deferred<T>(optional = false): Deferred<T> {
  let resolve!: (value: T) => void;
  let reject!: (error: Error) => void;
  const promise = new Promise<T>((res, rej) => {
    resolve = res;
    reject = rej;
  });
  if (optional) promise.catch(() => undefined);
  return { promise, resolve, reject };
}
