/** Types for the part of fs-native-extensions (which ships none) that lock.ts uses. */
declare module 'fs-native-extensions' {
  /** Takes a lock on `fd` (exclusive unless `shared`) without waiting; false when another holder has it. */
  export function tryLock(fd: number, options?: { shared?: boolean }): boolean;
}
