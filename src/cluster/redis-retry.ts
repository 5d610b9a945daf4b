/** How soon a Redis write that failed (Redis down or restarting) is tried again. */
const RETRY_MS = 250;

/**
 * At most one pending retry of a writer's Redis write: while one waits, new events only join the
 * next batch. The timer never holds the process open.
 */
export class RedisRetry {
  private timer: NodeJS.Timeout | null = null;

  get pending(): boolean {
    return this.timer !== null;
  }

  schedule(write: () => void): void {
    if (this.timer) return;
    this.timer = setTimeout(() => {
      this.timer = null;
      write();
    }, RETRY_MS);
    this.timer.unref();
  }
}
