/**
 * How long to wait before starting the data plane again, given its crashes in the last minute:
 * at once for an isolated crash (egress is back within a second), then backing off so a crash
 * loop does not spin a core.
 */
export function restartDelay(recentCrashes: number): number {
  if (recentCrashes <= 3) return 0;
  return Math.min(5_000, 100 * 2 ** (recentCrashes - 4));
}
