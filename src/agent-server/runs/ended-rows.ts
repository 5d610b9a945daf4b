import type { Kysely } from "kysely";
import type { Database } from "../../store/schema.ts";

/**
 * The rows of ended stateless runs, removed together: each run's row only marked it executing, and
 * nobody waits for its removal (a dead process's are removed by housekeeping), so the runs that end
 * while one removal is under way, or in the same turn of the event loop, share the next statement
 * (one round trip to PostgreSQL for several runs under load instead of one each).
 */
export class EndedRowRemoval {
  private waiting: string[] = [];
  private next: Promise<void> | null = null;
  private running: Promise<void> = Promise.resolve();

  constructor(
    private readonly db: Kysely<Database>,
    /** Removes one row (a compiled statement: the common case when runs are few). */
    private readonly removeOne: (runId: string) => Promise<unknown>,
  ) {}

  /** Removes the run's row with the others ending about now; resolves (or fails) with that statement. */
  remove(runId: string): Promise<void> {
    this.waiting.push(runId);
    if (!this.next) {
      const turn = new Promise<void>((resolve) => setImmediate(resolve));
      this.next = Promise.all([turn, this.running.catch(() => undefined)]).then(() => this.flush());
    }
    return this.next;
  }

  private flush(): Promise<void> {
    const ids = this.waiting;
    this.waiting = [];
    this.next = null;
    const done = (
      ids.length === 1 ? this.removeOne(ids[0]) : this.db.deleteFrom("agent_runs").where("run_id", "in", ids).execute()
    ).then(() => undefined);
    this.running = done;
    return done;
  }
}
