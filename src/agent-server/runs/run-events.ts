/**
 * Ended runs, as they end, for whoever measures them in this process (the platform's metrics). A
 * stateless run's row is gone once it ends, so its duration can only be seen here.
 */
export interface RunEnded {
  serverId: string;
  /** The run's final status (`success`, `error`, `interrupted`, `timeout`). */
  status: string;
  /** From the run's creation (queue wait included) to its end. */
  seconds: number;
}

const listeners = new Set<(e: RunEnded) => void>();

/** Calls `fn` for every run that ends in this process from now on; returns the unsubscribe. */
export function onRunEnded(fn: (e: RunEnded) => void): () => void {
  listeners.add(fn);
  return () => void listeners.delete(fn);
}

export function runEnded(e: RunEnded): void {
  for (const fn of listeners) {
    try {
      fn(e);
    } catch {
      // A listener's fault stays its own: the run has ended either way.
    }
  }
}

/** Seconds from a run's `created_at` to `endedAt`, or from when it started if that is unreadable. */
export function runSeconds(createdAt: string, startedAt: Date, endedAt = Date.now()): number {
  const from = Date.parse(createdAt);
  return Math.max(0, (endedAt - (Number.isFinite(from) ? from : startedAt.getTime())) / 1000);
}
