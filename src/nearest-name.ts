/** The name meant by a mistyped one (a flag, a command, an option), when one is close enough to be a likely typo. */
import { closest, distance } from 'fastest-levenshtein';

export function nearestName(given: string, names: readonly string[]): string | undefined {
  if (names.length === 0 || given === '') return undefined;
  // Case does not make a name another one: `heartbeatinterval` means heartbeatInterval.
  const lower = names.map((name) => name.toLowerCase());
  const typed = given.toLowerCase();
  const best = closest(typed, lower);
  const near = distance(typed, best) <= Math.max(2, Math.floor(typed.length / 3)) || best.startsWith(typed);
  return near ? names[lower.indexOf(best)] : undefined;
}
