import type { ActiveRun } from "./run-types.ts";

/** Followers of whole threads (`GET /threads/{id}/stream`), told of each run that starts here. */
export class ThreadWatchers {
  private readonly byThread = new Map<string, Set<(a: ActiveRun) => void>>();

  /** Calls `fn` for every run of the thread that starts in this process from now on; returns the unsubscribe. */
  watch(threadId: string, fn: (a: ActiveRun) => void): () => void {
    const set = this.byThread.get(threadId) ?? new Set();
    set.add(fn);
    this.byThread.set(threadId, set);
    return () => {
      set.delete(fn);
      if (set.size === 0 && this.byThread.get(threadId) === set) this.byThread.delete(threadId);
    };
  }

  /** Tells the thread's watchers that `active` started. */
  started(threadId: string, active: ActiveRun): void {
    for (const w of this.byThread.get(threadId) ?? []) w(active);
  }
}
