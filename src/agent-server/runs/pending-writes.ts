/** Writes nobody waits for (their errors are handled where they start), settled before the database closes. */
export class PendingWrites {
  private readonly pending = new Set<Promise<unknown>>();

  track(write: Promise<unknown>): void {
    this.pending.add(write);
    void write
      .finally(() => this.pending.delete(write))
      .catch(() => {
        // The write's own failure is logged where it started; this chain only forgets it.
      });
  }

  /** Resolves when every write tracked so far has settled. */
  async settled(): Promise<void> {
    await Promise.allSettled([...this.pending]);
  }
}
