/**
 * Callers waiting for a background writer to have nothing left to send: `wait` resolves at the
 * writer's next `release`, or after `ms` at the latest, so a shutdown never hangs on Redis.
 */
export class IdleWaiters {
  private waiters: Array<() => void> = [];

  async wait(ms: number): Promise<void> {
    await Promise.race([new Promise<void>((r) => this.waiters.push(r)), new Promise((r) => setTimeout(r, ms).unref())]);
  }

  release(): void {
    for (const w of this.waiters.splice(0)) w();
  }
}
