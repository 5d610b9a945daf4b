import { sql, type Kysely, type Transaction } from "kysely";
import { nowIso } from "../../store/database.ts";
import { preparedQuery } from "../../store/prepared-query.ts";
import type { Database } from "../../store/schema.ts";
import type { AgentServerContext } from "../context.ts";
import type { AuthFilters } from "../auth/custom-auth.ts";
import { AgentError } from "../errors.ts";
import { asJson, parseJson } from "../storage/json-columns.ts";
import type { AgentAssistantsTable, AgentRunsTable } from "../storage/tables.ts";
import { findThreadRow, setThreadOutcome, threadNotFound } from "../storage/threads.ts";
import { toJson } from "../wire.ts";
import type { RunOutcome } from "./run-executor.ts";
import type { CancelAction } from "./run-types.ts";
import { INFLIGHT, type MultitaskStrategy, type Run, type RunKwargs } from "./runs.ts";
import { EndedRowRemoval } from "./ended-rows.ts";

const RUN_COLUMNS = [
  "run_id",
  "server_id",
  "thread_id",
  "assistant_id",
  "status",
  "metadata",
  "kwargs",
  "multitask_strategy",
  "temporary",
  "worker_id",
  "lease_until",
  "created_at",
  "updated_at",
] as const satisfies ReadonlyArray<keyof AgentRunsTable>;
/** A column added to the table but not to the list above fails the typecheck here. */
const allRunColumns: [Exclude<keyof AgentRunsTable, (typeof RUN_COLUMNS)[number]>] extends [never] ? true : never =
  true;
void allRunColumns;

/** A run's row inserted, and removed by id: every stateless run does both (compiled once). */
const insertRunRow = preparedQuery((db: Kysely<Database>, p: AgentRunsTable) =>
  db
    .insertInto("agent_runs")
    .values(Object.fromEntries(RUN_COLUMNS.map((c) => [c, p[c]])) as unknown as AgentRunsTable),
);
/** The assistant columns a run is built from, compared by `insertRunIfCurrent`. */
interface AssistantStamp {
  a_graph_id: string;
  a_name: string;
  a_config: string;
  a_context: string;
  a_metadata: string;
  a_version: number;
  a_updated_at: string;
}

/** A run's row inserted only while its assistant's row is still the one the run was built from. */
const insertRunIfCurrent = preparedQuery((db: Kysely<Database>, p: AgentRunsTable & AssistantStamp) =>
  db
    .insertInto("agent_runs")
    .columns(RUN_COLUMNS)
    .expression(
      db
        .selectFrom("agent_assistants")
        // PostgreSQL types a bare parameter in a select list as text.
        .select(RUN_COLUMNS.map((c) => (c === "temporary" ? sql`cast(${p[c]} as integer)` : sql`${p[c]}`).as(c)))
        .where("server_id", "=", p.server_id)
        .where("assistant_id", "=", p.assistant_id)
        .where("graph_id", "=", p.a_graph_id)
        .where("name", "=", p.a_name)
        .where("config", "=", p.a_config)
        .where("context", "=", p.a_context)
        .where("metadata", "=", p.a_metadata)
        .where("version", "=", p.a_version)
        .where("updated_at", "=", p.a_updated_at),
    ),
);
/** A queued run claimed by id: only while it is still `pending` (not cancelled, nor claimed elsewhere). */
const claimRunRow = preparedQuery(
  (db: Kysely<Database>, p: { runId: string; workerId: string; leaseUntil: string; now: string }) =>
    db
      .updateTable("agent_runs")
      .set({ status: "running", worker_id: p.workerId, lease_until: p.leaseUntil, updated_at: p.now })
      .where("run_id", "=", p.runId)
      .where("status", "=", "pending"),
);
const deleteRunRow = preparedQuery((db: Kysely<Database>, p: { runId: string }) =>
  db.deleteFrom("agent_runs").where("run_id", "=", p.runId),
);

/** A thread run to record: its row as started here, and as queued. */
export interface ThreadRunInsert {
  row: AgentRunsTable;
  queued: (r: AgentRunsTable) => AgentRunsTable;
  metadata: Record<string, unknown>;
  threadMetadata: Record<string, unknown>;
  multitask: MultitaskStrategy;
  ifNotExists: "create" | "reject" | null | undefined;
  delayMs: number;
  now: string;
  filters: AuthFilters | undefined;
}

/**
 * The run rows and their threads in the database: a per-thread lock (PostgreSQL `FOR UPDATE`)
 * serialises the multitask decision, a conditional update claims a pending run.
 */
export class RunQueue {
  private readonly endedRows: EndedRowRemoval;

  constructor(
    private readonly ctx: AgentServerContext,
    private readonly workerId: string,
    private readonly leaseUntil: () => string,
  ) {
    this.endedRows = new EndedRowRemoval(ctx.db, (runId) => deleteRunRow(ctx.db, { runId }));
  }

  /**
   * Records a stateless run's row (a thread run's goes through `insertThreadRun`); with `assistant`,
   * only while that row of its assistant is still current. False: it changed (nothing recorded).
   */
  async insertRun(row: AgentRunsTable, assistant: AgentAssistantsTable | null = null): Promise<boolean> {
    if (!assistant) {
      await insertRunRow(this.ctx.db, row);
      return true;
    }
    const r = await insertRunIfCurrent(this.ctx.db, {
      ...row,
      a_graph_id: assistant.graph_id,
      a_name: assistant.name,
      a_config: assistant.config,
      a_context: assistant.context,
      a_metadata: assistant.metadata,
      a_version: assistant.version,
      a_updated_at: assistant.updated_at,
    });
    return Number(r.numAffectedRows ?? 0) === 1;
  }

  /**
   * Claims a queued stateless run by its id (its thread has no other run, nor a row to lock): the
   * time of the claim when this process now holds it, null when it was cancelled or another
   * process claimed it.
   */
  async claimQueued(runId: string): Promise<string | null> {
    const now = nowIso();
    const r = await claimRunRow(this.ctx.db, { runId, workerId: this.workerId, leaseUntil: this.leaseUntil(), now });
    return Number(r.numAffectedRows ?? 0) === 1 ? now : null;
  }

  lockThread(trx: Transaction<Database>, threadId: string) {
    let q = trx
      .selectFrom("agent_threads")
      .selectAll()
      .where("thread_id", "=", threadId)
      .where("server_id", "=", this.ctx.serverId);
    if (this.ctx.dialect === "postgres") q = q.forUpdate();
    return q.executeTakeFirst();
  }

  /**
   * Records a thread run under its thread's lock (creating the thread if asked): started here when
   * the thread is free and `hasSlot()`, else queued. Returns the runs in flight before it.
   */
  async insertThreadRun(
    threadId: string | null,
    r: ThreadRunInsert,
    hasSlot: () => boolean,
  ): Promise<{ inflight: string[]; startNow: boolean }> {
    const ctx = this.ctx;
    const { row, queued, metadata, threadMetadata, multitask, delayMs, now, filters } = r;
    return ctx.db.transaction().execute(async (trx) => {
      let thread = threadId ? await this.lockThread(trx, threadId) : undefined;
      if (thread && filters && !(await findThreadRow(trx, ctx, thread.thread_id, filters))) thread = undefined;
      if (!thread) {
        if (threadId && r.ifNotExists !== "create") throw threadNotFound(threadId);
        const inserted = await trx
          .insertInto("agent_threads")
          .values({
            thread_id: row.thread_id,
            server_id: ctx.serverId,
            status: "busy",
            metadata: asJson({ ...metadata, ...threadMetadata }),
            config: "{}",
            state_values: null,
            interrupts: null,
            created_at: now,
            updated_at: now,
          })
          .onConflict((oc) => oc.column("thread_id").doNothing())
          .executeTakeFirst();
        if (Number(inserted.numInsertedOrUpdatedRows ?? 0) === 0)
          throw new AgentError(409, `Thread with ID ${row.thread_id} already exists`);
        const startHere = delayMs === 0 && hasSlot();
        await trx
          .insertInto("agent_runs")
          .values(startHere ? row : queued(row))
          .execute();
        return { inflight: [] as string[], startNow: startHere };
      }
      const inflightRows = await trx
        .selectFrom("agent_runs")
        .select(["run_id"])
        .where("thread_id", "=", thread.thread_id)
        .where("status", "in", INFLIGHT)
        .execute();
      const inflight = inflightRows.map((r) => r.run_id);
      if (inflight.length && multitask === "reject") {
        throw new AgentError(
          409,
          "Thread is already running a task. Wait for it to finish or choose a different multitask strategy.",
        );
      }
      const startNow = inflight.length === 0 && delayMs === 0 && hasSlot();
      const stored: AgentRunsTable = startNow ? row : queued(row);
      await trx.insertInto("agent_runs").values(stored).execute();
      await trx
        .updateTable("agent_threads")
        .set({
          status: "busy",
          updated_at: now,
          metadata: asJson({ ...parseJson(thread.metadata, {}), ...threadMetadata }),
        })
        .where("thread_id", "=", thread.thread_id)
        .execute();
      return { inflight, startNow };
    });
  }

  /**
   * Records the end of a run and, under the thread's lock, claims the thread's next queued run
   * (returned, for the caller to start) or sets the thread's status from the outcome.
   */
  async recordEnd(
    run: Run,
    outcome: RunOutcome,
    stateful: boolean,
    rollbackTo: string | null | undefined,
  ): Promise<AgentRunsTable | null> {
    const ctx = this.ctx;
    if (!stateful) {
      await this.endedRows.remove(run.run_id);
      return null;
    }
    if (rollbackTo !== undefined) await deleteCheckpointsAfter(ctx, run.thread_id, rollbackTo);
    let threadValues: unknown = undefined;
    if (
      outcome.values !== undefined &&
      !(outcome.values && typeof outcome.values === "object" && "__error__" in outcome.values)
    ) {
      const { __interrupt__: _i, ...rest } = outcome.values as Record<string, unknown>;
      threadValues = rest;
    }
    return ctx.db.transaction().execute(async (trx) => {
      await this.lockThread(trx, run.thread_id);
      if (rollbackTo !== undefined) await trx.deleteFrom("agent_runs").where("run_id", "=", run.run_id).execute();
      else {
        // Only while this process still holds the run: one whose lease another replica took over
        // records nothing, neither the run's status nor its thread's (the new attempt's are).
        const ended = await trx
          .updateTable("agent_runs")
          .set({ status: outcome.status, updated_at: nowIso(), worker_id: null, lease_until: null })
          .where("run_id", "=", run.run_id)
          .where("worker_id", "=", this.workerId)
          .executeTakeFirst();
        if (Number(ended.numUpdatedRows) === 0) {
          ctx.log.warn(
            { runId: run.run_id, status: outcome.status },
            "this process no longer holds the run (another attempt owns it): its end is not recorded",
          );
          return null;
        }
      }
      const claimed = await this.claimNext(trx, run.thread_id);
      if (!claimed) {
        await setThreadOutcome(trx, run.thread_id, {
          status: outcome.threadStatus,
          values: threadValues,
          interrupts: outcome.interrupts ?? (rollbackTo !== undefined ? undefined : {}),
        });
      }
      return claimed;
    });
  }

  /**
   * A run drained at a superstep boundary (SIGTERM) goes back to the queue at once, to resume from
   * its checkpoint as the next attempt on whichever replica claims it, not when its lease expires.
   */
  async handBack(run: Run, kwargs: RunKwargs): Promise<void> {
    // The stored kwargs carry the caller's sealed data (the in-memory ones of a run created here do not).
    const row = await this.ctx.db
      .selectFrom("agent_runs")
      .select("kwargs")
      .where("run_id", "=", run.run_id)
      .executeTakeFirst();
    const stored = row ? parseJson<RunKwargs>(row.kwargs, kwargs) : kwargs;
    const next: RunKwargs = {
      ...stored,
      attempt: (kwargs.attempt ?? 1) + 1,
      handbacks: (stored.handbacks ?? 0) + 1,
      input: null,
      command: null,
    };
    await this.ctx.db
      .updateTable("agent_runs")
      .set({ status: "pending", worker_id: null, lease_until: null, kwargs: toJson(next, false), updated_at: nowIso() })
      .where("run_id", "=", run.run_id)
      .where("worker_id", "=", this.workerId)
      .execute();
    this.ctx.log.info(
      { runId: run.run_id, attempt: next.attempt },
      "run drained at a superstep boundary and handed back",
    );
  }

  /** Claims the oldest queued run of a thread (caller holds the thread lock). */
  async claimNext(trx: Kysely<Database>, threadId: string): Promise<AgentRunsTable | null> {
    let q = trx
      .selectFrom("agent_runs")
      .selectAll()
      .where("thread_id", "=", threadId)
      .where("status", "=", "pending")
      .where("created_at", "<=", nowIso())
      .orderBy("created_at")
      .orderBy("run_id")
      .limit(1);
    if (this.ctx.dialect === "postgres") q = q.forUpdate().skipLocked();
    const next = await q.executeTakeFirst();
    if (!next) return null;
    const claimed = await trx
      .updateTable("agent_runs")
      .set({ status: "running", worker_id: this.workerId, lease_until: this.leaseUntil(), updated_at: nowIso() })
      .where("run_id", "=", next.run_id)
      .where("status", "=", "pending")
      .executeTakeFirst();
    if (Number(claimed.numUpdatedRows) !== 1) return null;
    await trx
      .updateTable("agent_threads")
      .set({ status: "busy", updated_at: nowIso() })
      .where("thread_id", "=", threadId)
      .execute();
    return { ...next, status: "running" };
  }

  /** Under the thread's lock: the thread's next queued run, claimed, when nothing runs on it and `hasSlot()`. */
  async claimDelayed(threadId: string, hasSlot: () => boolean): Promise<AgentRunsTable | null> {
    return this.ctx.db.transaction().execute(async (trx) => {
      await this.lockThread(trx, threadId);
      const running = await trx
        .selectFrom("agent_runs")
        .select("run_id")
        .where("thread_id", "=", threadId)
        .where("status", "=", "running")
        .executeTakeFirst();
      return running || !hasSlot() ? null : this.claimNext(trx, threadId);
    });
  }

  /** A queued run's status and owner (null: no such run). */
  /** The thread's run executing now on any process, if any. */
  async runningOnThread(threadId: string): Promise<string | undefined> {
    const row = await this.ctx.db
      .selectFrom("agent_runs")
      .select("run_id")
      .where("thread_id", "=", threadId)
      .where("status", "=", "running")
      .where("temporary", "=", 0)
      .executeTakeFirst();
    return row?.run_id;
  }

  async owner(runId: string) {
    return this.ctx.db
      .selectFrom("agent_runs")
      .select(["status", "worker_id"])
      .where("run_id", "=", runId)
      .executeTakeFirst();
  }

  /** Ends a queued (not yet started) run: `rollback` removes it, `interrupt` marks it interrupted. */
  async cancelQueued(threadId: string, runId: string, action: CancelAction): Promise<void> {
    const scope = { run: runId, server: this.ctx.serverId, thread: threadId };
    if (action === "rollback") {
      await this.ctx.db
        .deleteFrom("agent_runs")
        .where("run_id", "=", scope.run)
        .where("status", "=", "pending")
        .where("server_id", "=", scope.server)
        .where("thread_id", "=", scope.thread)
        .execute();
    } else {
      await this.ctx.db
        .updateTable("agent_runs")
        .set({ status: "interrupted", updated_at: nowIso() })
        .where("run_id", "=", scope.run)
        .where("status", "=", "pending")
        .where("server_id", "=", scope.server)
        .where("thread_id", "=", scope.thread)
        .execute();
    }
    await this.idleIfNothingLeft(threadId);
  }

  /** A queued run cancelled before it started leaves its thread `idle` when no other run is pending or running on it. */
  private async idleIfNothingLeft(threadId: string): Promise<void> {
    await this.ctx.db.transaction().execute(async (trx) => {
      await this.lockThread(trx, threadId);
      const left = await trx
        .selectFrom("agent_runs")
        .select("run_id")
        .where("thread_id", "=", threadId)
        .where("status", "in", INFLIGHT)
        .executeTakeFirst();
      if (!left)
        await trx
          .updateTable("agent_threads")
          .set({ status: "idle", updated_at: nowIso() })
          .where("thread_id", "=", threadId)
          .where("status", "=", "busy")
          .execute();
    });
  }
}

/** Removes the checkpoints a rolled-back run wrote (everything after the one it started from). */
async function deleteCheckpointsAfter(
  ctx: AgentServerContext,
  threadId: string,
  checkpointId: string | null,
): Promise<void> {
  if (checkpointId === null) {
    await ctx.checkpointer.saver.deleteThread(threadId);
    return;
  }
  await ctx.checkpointer.deleteAfter(threadId, checkpointId);
}
