import type { Logger } from "../../log/logger.ts";

/**
 * Periodic housekeeping passes (one timer per process: renew our leases, end runs whose process
 * died), never two at once; one asked for meanwhile runs right after.
 */
export class HousekeepingPasses {
  private passing = false;
  /** The pass asked for while one ran: a full one covers a slot fill. */
  private passAgain: "full" | "fill" | null = null;
  /**
   * The runs this process queued for want of a free slot, oldest first: their thread, and for a
   * stateless run the way to claim and start it without a look at its thread (it has none).
   */
  private readonly slotWaiters: Array<{ threadId: string; start?: () => Promise<boolean> }> = [];
  /**
   * Runs this process does not know of may wait for a slot (another process queued one, or the
   * last scan stopped short of them): a freed slot then scans the table, else it need not.
   */
  private othersMayWait = true;
  /** Counts the reasons to scan, so a scan that began before one arrived does not clear it. */
  private waitNews = 0;

  constructor(
    private readonly work: {
      /** Both resolve true when queued runs may be left that this process did not start. */
      full: () => Promise<boolean>;
      fill: () => Promise<boolean>;
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

  /** Another process queued a run for want of a slot (its wake arrived): a freed slot here looks for it. */
  othersQueued(): void {
    this.othersMayWait = true;
    this.waitNews++;
  }

  /** A run of `threadId` was queued here for want of a free slot; `start` claims and starts it, if given. */
  queuedForSlot(threadId: string, start?: () => Promise<boolean>): void {
    this.slotWaiters.push({ threadId, start });
  }

  /**
   * A slot is free: the runs queued here for want of one start first, in order, each claimed on its
   * thread without scanning the table; when none is left, a pass (without the scans for dead
   * processes of a full one) looks for runs queued by other processes, if any may wait (the
   * timer's pass finds those whose wake was lost).
   */
  fillSlots(): void {
    const waiter = this.slotWaiters.shift();
    if (waiter === undefined) {
      if (this.othersMayWait) this.pass("fill");
      return;
    }
    const { threadId, start } = waiter;
    void (start ? start() : this.work.startOnThread(threadId))
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
    const news = this.waitNews;
    const work = kind === "full" ? this.work.full() : this.work.fill();
    void work
      .then((left) => {
        if (!left && news === this.waitNews) this.othersMayWait = false;
      })
      .catch((err) => this.log.warn({ err }, "agent run housekeeping failed"))
      .finally(() => {
        this.passing = false;
        const again = this.passAgain;
        this.passAgain = null;
        if (again && !this.isStopping()) this.pass(again);
      });
  }
}
