/**
 * Running out of file descriptors (EMFILE for the process, ENFILE for the host) is a passing state,
 * typically a flood of connections: work that must finish, such as killing a sandbox's processes,
 * waits it out instead of failing halfway or taking "cannot read /proc" for "the process is gone".
 */

export function isOutOfDescriptors(err: unknown): boolean {
  for (let e = err, depth = 0; e && typeof e === "object" && depth < 5; e = (e as { cause?: unknown }).cause, depth++) {
    const code = (e as { code?: unknown }).code;
    if (code === "EMFILE" || code === "ENFILE") return true;
  }
  return false;
}

/** Delay before attempt `n` (1-based) of a retry: 100 ms more each time, at most 2 s. */
export function descriptorRetryDelayMs(attempt: number): number {
  return Math.min(2000, 100 * attempt);
}

/** Runs `fn`, again while it fails for want of descriptors (about 30 s in all), else rethrows. */
export async function retryOutOfDescriptors<T>(
  fn: () => Promise<T>,
  opts: {
    attempts?: number;
    sleep?: (ms: number) => Promise<void>;
    onRetry?: (err: unknown, attempt: number) => void;
  } = {},
): Promise<T> {
  const attempts = opts.attempts ?? 24;
  const sleep = opts.sleep ?? ((ms: number) => new Promise<void>((r) => setTimeout(r, ms)));
  for (let attempt = 1; ; attempt++) {
    try {
      return await fn();
    } catch (err) {
      if (!isOutOfDescriptors(err) || attempt >= attempts) throw err;
      opts.onRetry?.(err, attempt);
      await sleep(descriptorRetryDelayMs(attempt));
    }
  }
}
