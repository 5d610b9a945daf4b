import type { AgentServerContext } from "../context.ts";
import { claimDueCrons, cronAuth } from "./crons.ts";
import { AgentError } from "../errors.ts";
import { parseJson } from "../storage/json-columns.ts";
import type { RunCreate, RunEngine } from "../runs/run-engine.ts";
import type { AgentCronsTable } from "../storage/tables.ts";

/**
 * The run a firing starts, as `POST /threads/{id}/runs` (thread cron) or `POST /runs` (stateless:
 * a new thread per firing, kept or not per `on_run_completed`) would with the cron's payload.
 */
export function cronRun(row: AgentCronsTable): { threadId: string | null; body: RunCreate } {
  const payload = parseJson<Record<string, unknown>>(row.payload, {});
  const body = { ...payload, assistant_id: row.assistant_id } as RunCreate;
  if (row.thread_id === null) body.on_completion = row.on_run_completed as RunCreate["on_completion"];
  return { threadId: row.thread_id, body };
}

/**
 * Fires due crons from a timer in the agent server process. Claims are conditional updates (see
 * `claimDueCrons`), so any number of processes may run a scheduler on one database; a firing
 * that the run engine refuses (busy thread with `reject`, deleted assistant) is logged and skipped.
 */
export class CronScheduler {
  private timer: NodeJS.Timeout | null = null;
  private ticking: Promise<number> | null = null;
  private stopped = false;

  constructor(
    private readonly ctx: AgentServerContext,
    private readonly engine: RunEngine,
    readonly tickMs: number,
  ) {}

  start(): void {
    this.timer = setInterval(() => void this.tick(), this.tickMs);
    this.timer.unref();
  }

  /** One pass (never two at once in a process): claims and fires what is due; returns how many fired. */
  tick(now: Date = new Date()): Promise<number> {
    if (this.stopped) return Promise.resolve(0);
    this.ticking ??= this.fireDue(now)
      .catch((err) => {
        this.ctx.log.warn({ err }, "cron scheduler pass failed");
        return 0;
      })
      .finally(() => {
        this.ticking = null;
      });
    return this.ticking;
  }

  private async fireDue(now: Date): Promise<number> {
    let fired = 0;
    // A claimed firing is started even while stopping: its due time has already been moved on.
    for (const row of await claimDueCrons(this.ctx, now)) {
      if (await this.fire(row)) fired++;
    }
    return fired;
  }

  private async fire(row: AgentCronsTable): Promise<boolean> {
    const { threadId, body } = cronRun(row);
    try {
      const { run } = await this.engine.create(threadId, body, cronAuth(this.ctx, row), null);
      this.ctx.log.info({ cronId: row.cron_id, runId: run.run_id, threadId: run.thread_id }, "cron fired");
      return true;
    } catch (err) {
      const reason = err instanceof AgentError ? `${err.status} ${err.message}` : (err as Error).message;
      this.ctx.log.warn({ err, cronId: row.cron_id, threadId, reason }, "cron firing skipped: the run could not start");
      return false;
    }
  }

  /** Stops the timer and waits for a pass in progress, so no firing starts after the engine stops. */
  async stop(): Promise<void> {
    this.stopped = true;
    if (this.timer) clearInterval(this.timer);
    this.timer = null;
    await this.ticking;
  }
}
