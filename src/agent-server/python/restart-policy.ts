/** Delay before starting the worker again after its `crashes`-th consecutive crash (pure): 0.5 s doubling to 30 s. */
export function restartDelayMs(crashes: number): number {
  return Math.min(30_000, 500 * 2 ** Math.max(0, crashes));
}
