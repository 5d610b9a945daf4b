import { sql, type Kysely } from "kysely";
import { nowIso } from "../../store/database.ts";
import type { Database } from "../../store/schema.ts";
import type { AgentServerContext } from "../context.ts";
import type { AuthFilters } from "../auth/custom-auth.ts";
import { AgentError } from "../errors.ts";
import { asJson, parseJson } from "./json-columns.ts";
import { authConds, equalityConds, jsonCondsSql } from "./json-filter.ts";
import type { AgentThreadsTable } from "./tables.ts";
import { searchPage } from "./search-page.ts";
import { toJson } from "../wire.ts";

export type ThreadStatus = "idle" | "busy" | "interrupted" | "error";

export interface Thread {
  thread_id: string;
  created_at: string;
  updated_at: string;
  metadata: Record<string, unknown>;
  status: string;
  config: Record<string, unknown>;
  values?: unknown;
  interrupts?: unknown;
}

/** The thread record as the LangGraph server returns it (`values`/`interrupts` once a run set them). */
export function toThread(row: AgentThreadsTable): Thread {
  const t: Thread = {
    thread_id: row.thread_id,
    created_at: row.created_at,
    updated_at: row.updated_at,
    metadata: parseJson(row.metadata, {}),
    status: row.status,
    config: parseJson(row.config, {}),
  };
  if (row.state_values != null) t.values = parseJson(row.state_values, {});
  if (row.interrupts != null) t.interrupts = parseJson(row.interrupts, {});
  return t;
}

export const threadNotFound = (threadId: string) => new AgentError(404, `Thread with ID ${threadId} not found`);

export async function findThreadRow(
  db: Kysely<Database>,
  ctx: AgentServerContext,
  threadId: string,
  filters: AuthFilters,
): Promise<AgentThreadsTable | undefined> {
  let q = db
    .selectFrom("agent_threads")
    .selectAll()
    .where("thread_id", "=", threadId)
    .where("server_id", "=", ctx.serverId);
  for (const cond of jsonCondsSql(ctx.dialect, "metadata", authConds(filters))) q = q.where(cond);
  return q.executeTakeFirst();
}

export async function getThread(ctx: AgentServerContext, threadId: string, filters: AuthFilters): Promise<Thread> {
  const row = await findThreadRow(ctx.db, ctx, threadId, filters);
  if (!row) throw threadNotFound(threadId);
  return toThread(row);
}

export async function createThread(
  ctx: AgentServerContext,
  input: {
    thread_id?: string | null;
    metadata?: Record<string, unknown> | null;
    if_exists?: "raise" | "do_nothing" | null;
  },
  filters: AuthFilters,
): Promise<Thread> {
  const now = nowIso();
  const row: AgentThreadsTable = {
    thread_id: input.thread_id ?? crypto.randomUUID(),
    server_id: ctx.serverId,
    status: "idle",
    metadata: asJson(input.metadata),
    config: "{}",
    state_values: null,
    interrupts: null,
    created_at: now,
    updated_at: now,
  };
  const r = await ctx.db
    .insertInto("agent_threads")
    .values(row)
    .onConflict((oc) => oc.column("thread_id").doNothing())
    .executeTakeFirst();
  if (Number(r.numInsertedOrUpdatedRows ?? 0) === 0) {
    // Thread ids are unique across servers; another server's thread is just "exists" (no content leak).
    if (input.if_exists === "do_nothing") {
      const existing = await findThreadRow(ctx.db, ctx, row.thread_id, filters);
      if (existing) return toThread(existing);
    }
    throw new AgentError(409, `Thread with ID ${row.thread_id} already exists`);
  }
  return toThread(row);
}

export async function patchThread(
  ctx: AgentServerContext,
  threadId: string,
  metadata: Record<string, unknown> | null | undefined,
  filters: AuthFilters,
): Promise<Thread> {
  return ctx.db.transaction().execute(async (trx) => {
    const row = await findThreadRow(trx, ctx, threadId, filters);
    if (!row) throw threadNotFound(threadId);
    const next = { metadata: asJson({ ...parseJson(row.metadata, {}), ...(metadata ?? {}) }), updated_at: nowIso() };
    await trx.updateTable("agent_threads").set(next).where("thread_id", "=", threadId).execute();
    return toThread({ ...row, ...next });
  });
}

export interface ThreadQuery {
  ids?: string[] | null;
  metadata?: Record<string, unknown> | null;
  values?: Record<string, unknown> | null;
  status?: string | null;
  limit?: number;
  offset?: number;
  sort_by?: string | null;
  sort_order?: string | null;
}

const SORTABLE = new Set(["thread_id", "status", "created_at", "updated_at"]);

function threadQuery(ctx: AgentServerContext, query: ThreadQuery, filters: AuthFilters) {
  let q = ctx.db.selectFrom("agent_threads").where("server_id", "=", ctx.serverId);
  if (query.ids?.length) q = q.where("thread_id", "in", query.ids);
  if (query.status) q = q.where("status", "=", query.status);
  for (const cond of jsonCondsSql(ctx.dialect, "metadata", [...equalityConds(query.metadata), ...authConds(filters)]))
    q = q.where(cond);
  for (const cond of jsonCondsSql(ctx.dialect, "state_values", equalityConds(query.values))) q = q.where(cond);
  return q;
}

export async function searchThreads(
  ctx: AgentServerContext,
  query: ThreadQuery,
  filters: AuthFilters,
): Promise<{ items: Thread[]; total: number }> {
  const page = searchPage(query, SORTABLE);
  const rows = await threadQuery(ctx, query, filters)
    .selectAll()
    .orderBy(page.sortBy, page.order)
    .orderBy("thread_id", page.order)
    .limit(page.limit)
    .offset(page.offset)
    .execute();
  return { items: rows.map(toThread), total: await countThreads(ctx, query, filters) };
}

export async function countThreads(ctx: AgentServerContext, query: ThreadQuery, filters: AuthFilters): Promise<number> {
  const r = await threadQuery(ctx, query, filters)
    .select(sql<number>`count(*)`.as("n"))
    .executeTakeFirst();
  return Number(r?.n ?? 0);
}

/** After a run: the thread's status and the values/interrupts clients read from the thread record. */
export async function setThreadOutcome(
  db: Kysely<Database>,
  threadId: string,
  outcome: { status: ThreadStatus; values?: unknown; interrupts?: unknown },
): Promise<void> {
  const set: Partial<AgentThreadsTable> = { status: outcome.status, updated_at: nowIso() };
  if (outcome.values !== undefined) set.state_values = toJson(outcome.values, false);
  if (outcome.interrupts !== undefined) set.interrupts = toJson(outcome.interrupts, false);
  await db.updateTable("agent_threads").set(set).where("thread_id", "=", threadId).execute();
}
