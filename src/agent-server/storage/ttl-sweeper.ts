import type { AgentServerContext } from "../context.ts";
import { isPythonGraph } from "../python/index.ts";
import { parseJson } from "./json-columns.ts";

export interface SweepPlan {
  /** `store.ttl.sweep_interval_minutes` (null: the store has no TTL). */
  storeMinutes: number | null;
  /**
   * `checkpointer.ttl`: every `sweepMinutes`, threads idle longer than `ttlMinutes` are deleted
   * (`delete`) or keep only their latest checkpoint (`keep_latest`).
   */
  threads: { strategy?: "delete" | "keep_latest"; ttlMinutes: number; sweepMinutes: number } | null;
}

/** How many idle threads one sweep query reads. */
const BATCH = 500;

/**
 * The TTL sweeps of `langgraph.json`: expired store items, and threads (with their runs and
 * checkpoints) not updated within `checkpointer.ttl.default_ttl`, as the LangGraph server's
 * `delete` strategy does. A busy thread is never swept; a failing sweep is logged and retried.
 */
export class TtlSweeper {
  private timers: NodeJS.Timeout[] = [];
  private running: Promise<unknown> = Promise.resolve();

  constructor(
    private readonly ctx: AgentServerContext,
    private readonly plan: SweepPlan,
  ) {}

  start(): void {
    const every = (minutes: number, fn: () => Promise<unknown>) => {
      const t = setInterval(
        () =>
          void (this.running = fn().catch((err) =>
            this.ctx.log.warn({ err }, "TTL sweep failed; retried at the next interval"),
          )),
        minutes * 60_000,
      );
      t.unref();
      this.timers.push(t);
    };
    if (this.plan.storeMinutes) every(this.plan.storeMinutes, () => this.ctx.store.sweepExpired());
    if (this.plan.threads)
      every(this.plan.threads.sweepMinutes, () =>
        this.plan.threads?.strategy === "keep_latest" ? this.pruneThreads() : this.sweepThreads(),
      );
  }

  async stop(): Promise<void> {
    for (const t of this.timers) clearInterval(t);
    this.timers = [];
    await this.running;
  }

  /**
   * `keep_latest`: the idle threads keep their row, runs and latest state; older checkpoints of
   * their Python graphs go (the worker's saver prunes them). Threads of JavaScript graphs are left
   * as they are (the JavaScript savers cannot prune). Returns how many threads were pruned.
   */
  async pruneThreads(now = Date.now()): Promise<number> {
    const ctx = this.ctx;
    if (!this.plan.threads || !ctx.python) return 0;
    const cutoff = new Date(now - this.plan.threads.ttlMinutes * 60_000).toISOString();
    let after = "";
    let n = 0;
    // Every idle thread, a batch at a time (pruned threads stay idle, so an offset-free cursor).
    for (;;) {
      const rows = await ctx.db
        .selectFrom("agent_threads")
        .select(["thread_id", "metadata"])
        .where("server_id", "=", ctx.serverId)
        .where("status", "!=", "busy")
        .where("updated_at", "<", cutoff)
        .where("thread_id", ">", after)
        .orderBy("thread_id")
        .limit(BATCH)
        .execute();
      if (!rows.length) break;
      after = rows[rows.length - 1].thread_id;
      const python = rows
        .filter((r) =>
          isPythonGraph(ctx.graphs.get(String(parseJson<Record<string, unknown>>(r.metadata, {}).graph_id))),
        )
        .map((r) => r.thread_id);
      if (python.length)
        n += (await ctx.python.call<{ pruned: number }>("checkpoints.prune", { thread_ids: python })).pruned;
      if (rows.length < BATCH) break;
    }
    if (n) ctx.log.info({ threads: n }, "checkpointer.ttl: pruned idle threads to their latest checkpoint");
    return n;
  }

  /** Deletes idle threads older than the TTL; returns how many. */
  async sweepThreads(now = Date.now()): Promise<number> {
    if (!this.plan.threads) return 0;
    const ctx = this.ctx;
    const cutoff = new Date(now - this.plan.threads.ttlMinutes * 60_000).toISOString();
    const rows = await ctx.db
      .selectFrom("agent_threads")
      .select("thread_id")
      .where("server_id", "=", ctx.serverId)
      .where("status", "!=", "busy")
      .where("updated_at", "<", cutoff)
      .limit(500)
      .execute();
    let n = 0;
    for (const { thread_id } of rows) {
      const deleted = await ctx.db.transaction().execute(async (trx) => {
        const inflight = await trx
          .selectFrom("agent_runs")
          .select("run_id")
          .where("thread_id", "=", thread_id)
          .where("status", "in", ["pending", "running"])
          .executeTakeFirst();
        if (inflight) return false;
        await trx
          .deleteFrom("agent_runs")
          .where("thread_id", "=", thread_id)
          .where("server_id", "=", ctx.serverId)
          .execute();
        const r = await trx
          .deleteFrom("agent_threads")
          .where("thread_id", "=", thread_id)
          .where("server_id", "=", ctx.serverId)
          .where("updated_at", "<", cutoff)
          .executeTakeFirst();
        return Number(r.numDeletedRows) > 0;
      });
      if (!deleted) continue;
      await ctx.checkpointer.saver.deleteThread(thread_id);
      await ctx.python?.call("checkpoints.delete_thread", { thread_id });
      n++;
    }
    if (n) ctx.log.info({ threads: n }, "checkpointer.ttl: deleted idle threads");
    return n;
  }
}
