import type { Logger } from "../../log/logger.ts";

/**
 * Periodic housekeeping passes (one timer per process: renew our leases, end runs whose process
 * died), never two at once; one asked for meanwhile runs right after.
 */
export class HousekeepingPasses {
  private passing = false;
  /** The pass asked for while one ran: a full one covers a slot fill. */
  private passAgain: "full" | "fill" | null = null;
  /** Threads of the runs this process queued for want of a free slot, oldest first. */
  private readonly slotWaiters: string[] = [];

  constructor(
    private readonly work: {
      full: () => Promise<void>;
      fill: () => Promise<void>;
      /** Starts the thread's next queued run here if it may run now; true when one started. */
      startOnThread: (threadId: string) => Promise<boolean>;
      hasSlot: () => boolean;
    },
    private readonly log: Logger,
    private readonly isStopping: () => boolean,
  ) {}

  /** One housekeeping pass (never two at once; one asked for meanwhile runs right after). */
  tick(): void {
    this.pass("full");
  }

  /** A run of `threadId` was queued here for want of a free slot. */
  queuedForSlot(threadId: string): void {
    this.slotWaiters.push(threadId);
  }

  /**
   * A slot is free: the runs queued here for want of one start first, in order, each claimed on its
   * thread without scanning the table; when none is left, a pass (without the scans for dead
   * processes of a full one) looks for runs queued by other processes.
   */
  fillSlots(): void {
    const threadId = this.slotWaiters.shift();
    if (threadId === undefined) return this.pass("fill");
    void this.work
      .startOnThread(threadId)
      .catch((err) => {
        this.log.warn({ err, threadId }, "cannot start a run queued for a slot; housekeeping retries");
        return false;
      })
      // Its run was cancelled, or started elsewhere: the slot is still free.
      .then((started) => started || this.isStopping() || !this.work.hasSlot() || this.fillSlots());
  }

  private pass(kind: "full" | "fill"): void {
    if (this.passing) {
      if (this.passAgain !== "full") this.passAgain = kind;
      return;
    }
    this.passing = true;
    const work = kind === "full" ? this.work.full() : this.work.fill();
    void work
      .catch((err) => this.log.warn({ err }, "agent run housekeeping failed"))
      .finally(() => {
        this.passing = false;
        const again = this.passAgain;
        this.passAgain = null;
        if (again && !this.isStopping()) this.pass(again);
      });
  }
}
