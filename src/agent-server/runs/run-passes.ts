import type { Logger } from "../../log/logger.ts";

/**
 * Periodic housekeeping passes (one timer per process: renew our leases, end runs whose process
 * died), never two at once; one asked for meanwhile runs right after.
 */
export class HousekeepingPasses {
  private passing = false;
  /** The pass asked for while one ran: a full one covers a slot fill. */
  private passAgain: "full" | "fill" | null = null;

  constructor(
    private readonly work: { full: () => Promise<void>; fill: () => Promise<void> },
    private readonly log: Logger,
    private readonly isStopping: () => boolean,
  ) {}

  /** One housekeeping pass (never two at once; one asked for meanwhile runs right after). */
  tick(): void {
    this.pass("full");
  }

  /** A slot is free: queued runs start now, without the scans for dead processes of a full pass. */
  fillSlots(): void {
    this.pass("fill");
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
