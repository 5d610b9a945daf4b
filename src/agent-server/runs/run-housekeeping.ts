import { sql } from "kysely";
import { nowIso } from "../../store/database.ts";
import type { Kysely, Transaction } from "kysely";
import type { Database } from "../../store/schema.ts";
import type { AgentServerContext } from "../context.ts";
import { parseJson } from "../storage/json-columns.ts";
import type { AgentRunsTable } from "../storage/tables.ts";
import { setThreadOutcome } from "../storage/threads.ts";
import { toJson } from "../wire.ts";
import { planRecovery } from "./run-recovery.ts";
import type { RunKwargs } from "./runs.ts";
import { isDeadLocalWorker } from "./worker-identity.ts";
import type { DbClock } from "./db-clock.ts";

/** PostgreSQL's error code for a lock not granted within `lock_timeout`. */
const LOCK_NOT_AVAILABLE = "55P03";

/** How long a takeover waits for a run's row or thread: half a renewal period, so renewals stay on time. */
export function takeoverLockTimeoutMs(renewEveryMs: number): number {
  return Math.max(100, Math.floor(renewEveryMs / 2));
}

/** What the housekeeper needs of the run engine. */
export interface HousekeepingHost {
  readonly ctx: AgentServerContext;
  readonly workerId: string;
  activeCount(): number;
  /** Runs this process may still start (`WHARF_RUN_SLOTS` less those executing). */
  freeSlots(): number;
  /** How often this process's leases are renewed. */
  renewEveryMs: number;
  /** Told when this process's leases were renewed (the monotonic time the renewal was sent). */
  leasesRenewed(sentAt: number): void;
  /** Leases are compared on the database's clock. */
  clock: DbClock;
  isStopping(): boolean;
  leaseUntil(): string;
  lockThread(trx: Transaction<Database>, threadId: string): Promise<unknown>;
  claimNext(trx: Kysely<Database>, threadId: string): Promise<AgentRunsTable | null>;
  /** Under the thread's lock: its next queued run, claimed, unless one of its runs is running. */
  claimOnThread(threadId: string): Promise<AgentRunsTable | null>;
  startClaimed(row: AgentRunsTable): void;
}

/**
 * The run engine's periodic work and crash recovery: renews this process's leases, settles runs
 * whose process died (lease expired, dead PID on this machine, or all at an `exclusive` start) and
 * starts queued runs nobody handed on.
 */
export class RunHousekeeper {
  private renewedAt = 0;
  constructor(private readonly host: HousekeepingHost) {}

  /** One full pass; true when queued runs may be left that it did not start. */
  async housekeeping(): Promise<boolean> {
    const ctx = this.host.ctx;
    const now = this.host.clock.iso();
    if (this.host.activeCount() && Date.now() - this.renewedAt >= this.host.renewEveryMs - 50) {
      this.renewedAt = Date.now();
      const sentAt = performance.now();
      await ctx.db
        .updateTable("agent_runs")
        .set({ lease_until: this.host.leaseUntil() })
        .where("worker_id", "=", this.host.workerId)
        .where("status", "=", "running")
        .execute();
      this.host.leasesRenewed(sentAt);
    }
    const expired = await ctx.db
      .selectFrom("agent_runs")
      .select(["run_id", "thread_id", "temporary"])
      .where("server_id", "=", ctx.serverId)
      .where("status", "=", "running")
      .where("lease_until", "<", now)
      .execute();
    for (const r of expired)
      await this.unlessBusy(r.run_id, () => this.endOrphan(r.run_id, r.thread_id, r.temporary === 1, "error"));
    // Runs of a process of this machine that died (kill -9) end now, not when their lease expires.
    const others = await ctx.db
      .selectFrom("agent_runs")
      .select(["run_id", "thread_id", "temporary", "worker_id"])
      .where("server_id", "=", ctx.serverId)
      .where("status", "=", "running")
      .where("worker_id", "!=", this.host.workerId)
      .where("lease_until", ">=", now)
      .execute();
    for (const r of others)
      if (r.worker_id && isDeadLocalWorker(r.worker_id))
        await this.unlessBusy(r.run_id, () =>
          this.endOrphan(r.run_id, r.thread_id, r.temporary === 1, "error", r.worker_id!),
        );
    return this.startQueued(now);
  }

  /**
   * Starts queued runs whose thread has nothing running (their creator died before handing them
   * on, or they wait for a free slot), as many as this process has free slots for. Also run alone
   * when a slot frees: the scans above need not repeat after every run. True when queued runs may
   * be left that it did not start (no free slot, or more than it looked at).
   */
  async startQueued(now = this.host.clock.iso()): Promise<boolean> {
    const ctx = this.host.ctx;
    if (this.host.freeSlots() <= 0) return true;
    const limit = Math.min(20, this.host.freeSlots());
    const orphans = await ctx.db
      .selectFrom("agent_runs as r")
      .select(["r.thread_id"])
      .where("r.server_id", "=", ctx.serverId)
      .where("r.status", "=", "pending")
      .where("r.created_at", "<=", now)
      .where(({ not, exists, selectFrom }) =>
        not(
          exists(
            selectFrom("agent_runs as o")
              .select(sql`1`.as("one"))
              .whereRef("o.thread_id", "=", "r.thread_id")
              .where("o.status", "=", "running"),
          ),
        ),
      )
      .groupBy("r.thread_id")
      .limit(limit)
      .execute();
    for (const o of orphans) {
      if (this.host.isStopping() || this.host.freeSlots() <= 0) return true;
      await this.startOnThread(o.thread_id);
    }
    return orphans.length >= limit;
  }

  /** Starts the thread's next queued run here unless one of its runs is running; true when one started. */
  async startOnThread(threadId: string): Promise<boolean> {
    const next = await this.host.claimOnThread(threadId);
    if (next) this.host.startClaimed(next);
    return !!next;
  }

  /**
   * Runs `settle` unless the run's row stays locked (PostgreSQL `lock_timeout`): a checkpoint
   * transaction of its old owner holds it (checkpoint-fence.ts), perhaps of a frozen process whose
   * session the server ends soon. The next pass tries again; this one goes on, so this process's
   * own lease renewals never wait on another process.
   */
  private async unlessBusy(runId: string, settle: () => Promise<void>): Promise<void> {
    try {
      await settle();
    } catch (err) {
      if ((err as { code?: string }).code !== LOCK_NOT_AVAILABLE) throw err;
      this.host.ctx.log.info(
        { runId },
        "a run to take over is still locked by its previous owner's checkpoint write; trying again at the next pass",
      );
    }
  }

  /**
   * Settles a run nobody executes any more: its lease expired, or (`deadWorker`) the process that
   * held it is known to be gone. A thread run resumes once (`planRecovery`), else it ends as
   * `error` with the reason and the thread's next queued run starts.
   */
  private async endOrphan(
    runId: string,
    threadId: string,
    temporary: boolean,
    _status: "error",
    deadWorker?: string,
  ): Promise<void> {
    const ctx = this.host.ctx;
    const orphaned = (q: any) =>
      deadWorker ? q.where("worker_id", "=", deadWorker) : q.where("lease_until", "<", this.host.clock.iso());
    if (temporary) {
      await orphaned(
        ctx.db.deleteFrom("agent_runs").where("run_id", "=", runId).where("status", "=", "running"),
      ).execute();
      return;
    }
    const head = await ctx.checkpointer.saver
      .getTuple({ configurable: { thread_id: threadId, checkpoint_ns: "" } })
      .catch(() => undefined);
    const headMeta = (head?.metadata ?? {}) as Record<string, unknown>;
    const headRunId = typeof headMeta.run_id === "string" ? headMeta.run_id : null;
    const next = await ctx.db.transaction().execute(async (trx) => {
      if (ctx.dialect === "postgres")
        await sql.raw(`SET LOCAL lock_timeout = ${takeoverLockTimeoutMs(this.host.renewEveryMs)}`).execute(trx);
      await this.host.lockThread(trx, threadId);
      const row = await orphaned(
        trx.selectFrom("agent_runs").selectAll().where("run_id", "=", runId).where("status", "=", "running"),
      ).executeTakeFirst();
      if (!row) return null;
      const plan = planRecovery(parseJson<RunKwargs>(row.kwargs, {} as RunKwargs), {
        temporary: false,
        headRunId,
        runId,
      });
      if (plan.action === "resume") {
        await trx
          .updateTable("agent_runs")
          .set({
            status: "pending",
            worker_id: null,
            lease_until: null,
            kwargs: toJson(plan.kwargs, false),
            updated_at: nowIso(),
          })
          .where("run_id", "=", runId)
          .execute();
        ctx.log.warn(
          { runId, threadId, attempt: plan.kwargs.attempt, fromCheckpoint: plan.fromCheckpoint },
          "the process running a run died; the run resumes",
        );
      } else {
        const reason = plan.action === "error" ? plan.reason : "the process running it died";
        await trx
          .updateTable("agent_runs")
          .set({ status: "error", updated_at: nowIso(), worker_id: null, lease_until: null })
          .where("run_id", "=", runId)
          .execute();
        ctx.log.warn({ runId, threadId, reason }, `run ended as error: ${reason}`);
      }
      const claimed =
        this.host.isStopping() || this.host.freeSlots() <= 0 ? null : await this.host.claimNext(trx, threadId);
      if (!claimed && plan.action !== "resume") await setThreadOutcome(trx, threadId, { status: "error" });
      return claimed;
    });
    if (next) this.host.startClaimed(next);
  }

  /**
   * At start with `exclusive` (no other live process serves this server id, e.g. a deployment's
   * revision restarted after a crash): every run still marked running was abandoned; settle them
   * now instead of when their lease expires.
   */
  async recoverAbandoned(): Promise<number> {
    const rows = await this.host.ctx.db
      .selectFrom("agent_runs")
      .select(["run_id", "thread_id", "temporary", "worker_id"])
      .where("server_id", "=", this.host.ctx.serverId)
      .where("status", "=", "running")
      .where("worker_id", "!=", this.host.workerId)
      .execute();
    for (const r of rows)
      await this.unlessBusy(r.run_id, () =>
        this.endOrphan(r.run_id, r.thread_id, r.temporary === 1, "error", r.worker_id ?? undefined),
      );
    return rows.length;
  }
}
