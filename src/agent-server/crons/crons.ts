import { sql, type Kysely } from "kysely";
import { nowIso } from "../../store/database.ts";
import type { Database } from "../../store/schema.ts";
import type { AgentServerContext } from "../context.ts";
import { nextRunDate } from "./cron-schedule.ts";
import type { AuthContext, AuthFilters } from "../auth/custom-auth.ts";
import { AgentError } from "../errors.ts";
import { asJson, parseJson } from "../storage/json-columns.ts";
import { authConds, jsonCondsSql } from "../storage/json-filter.ts";
import type { AgentCronsTable } from "../storage/tables.ts";
import { searchPage } from "../storage/search-page.ts";

export type OnRunCompleted = "delete" | "keep";

/** A cron as the LangGraph server returns it. */
export interface Cron {
  cron_id: string;
  assistant_id: string;
  thread_id: string | null;
  user_id: string | null;
  payload: Record<string, unknown>;
  schedule: string;
  next_run_date: string | null;
  end_time: string | null;
  created_at: string;
  updated_at: string;
  metadata: Record<string, unknown>;
  /** Only meaningful for stateless crons (null on thread crons). */
  on_run_completed: OnRunCompleted | null;
  enabled: boolean;
}

const authAad = (serverId: string, cronId: string) => `agent-cron-auth:${serverId}:${cronId}`;

// The creator's user outlives any request, so a master-key rotation must re-seal it.

export const cronNotFound = (cronId: string) => new AgentError(404, `Cron with ID ${cronId} not found`);

export function toCron(row: AgentCronsTable): Cron {
  return {
    cron_id: row.cron_id,
    assistant_id: row.assistant_id,
    thread_id: row.thread_id,
    user_id: row.user_id,
    payload: parseJson(row.payload, {}),
    schedule: row.schedule,
    next_run_date: row.next_run_date,
    end_time: row.end_time,
    created_at: row.created_at,
    updated_at: row.updated_at,
    metadata: parseJson(row.metadata, {}),
    on_run_completed: row.thread_id === null ? (row.on_run_completed as OnRunCompleted) : null,
    enabled: row.enabled === 1,
  };
}

export interface NewCron {
  cronId: string;
  assistantId: string;
  threadId: string | null;
  userId: string | null;
  schedule: string;
  payload: Record<string, unknown>;
  metadata: Record<string, unknown>;
  onRunCompleted: OnRunCompleted;
  enabled: boolean;
  endTime: string | null;
  auth: AuthContext | null;
}

export async function insertCron(ctx: AgentServerContext, input: NewCron): Promise<Cron> {
  const now = nowIso();
  const sealed = ctx.box.seal(JSON.stringify(input.auth), authAad(ctx.serverId, input.cronId));
  const row: AgentCronsTable = {
    cron_id: input.cronId,
    server_id: ctx.serverId,
    assistant_id: input.assistantId,
    thread_id: input.threadId,
    user_id: input.userId,
    schedule: input.schedule,
    payload: asJson(input.payload),
    metadata: asJson(input.metadata),
    on_run_completed: input.onRunCompleted,
    enabled: input.enabled ? 1 : 0,
    end_time: input.endTime,
    next_run_date: nextRunDate(input.schedule, new Date(), input.endTime),
    auth_key_id: sealed.keyId,
    auth_sealed: sealed.blob,
    created_at: now,
    updated_at: now,
  };
  await ctx.db.insertInto("agent_crons").values(row).execute();
  return toCron(row);
}

/** The auth context a firing runs with: the cron creator's (null when the server is open). */
export function cronAuth(ctx: AgentServerContext, row: AgentCronsTable): AuthContext | null {
  return JSON.parse(
    ctx.box.open({ keyId: row.auth_key_id, blob: row.auth_sealed }, authAad(row.server_id, row.cron_id)),
  ) as AuthContext | null;
}

export async function findCronRow(
  db: Kysely<Database>,
  ctx: AgentServerContext,
  cronId: string,
  filters: AuthFilters,
): Promise<AgentCronsTable | undefined> {
  let q = db.selectFrom("agent_crons").selectAll().where("cron_id", "=", cronId).where("server_id", "=", ctx.serverId);
  for (const cond of jsonCondsSql(ctx.dialect, "metadata", authConds(filters))) q = q.where(cond);
  return q.executeTakeFirst();
}

export interface CronQuery {
  assistant_id?: string | null;
  thread_id?: string | null;
  enabled?: boolean | null;
  limit?: number;
  offset?: number;
  sort_by?: string | null;
  sort_order?: string | null;
}

function cronQuery(ctx: AgentServerContext, query: CronQuery, filters: AuthFilters) {
  let q = ctx.db.selectFrom("agent_crons").where("server_id", "=", ctx.serverId);
  if (query.assistant_id) q = q.where("assistant_id", "=", query.assistant_id);
  if (query.thread_id) q = q.where("thread_id", "=", query.thread_id);
  if (query.enabled !== undefined && query.enabled !== null) q = q.where("enabled", "=", query.enabled ? 1 : 0);
  for (const cond of jsonCondsSql(ctx.dialect, "metadata", authConds(filters))) q = q.where(cond);
  return q;
}

const SORTABLE = new Set(["cron_id", "assistant_id", "thread_id", "created_at", "updated_at", "next_run_date"]);

export async function searchCrons(
  ctx: AgentServerContext,
  query: CronQuery,
  filters: AuthFilters,
): Promise<{ items: Cron[]; total: number }> {
  const page = searchPage(query, SORTABLE);
  const rows = await cronQuery(ctx, query, filters)
    .selectAll()
    .orderBy(page.sortBy, page.order)
    .orderBy("cron_id", page.order)
    .limit(page.limit)
    .offset(page.offset)
    .execute();
  return { items: rows.map(toCron), total: await countCrons(ctx, query, filters) };
}

export async function countCrons(ctx: AgentServerContext, query: CronQuery, filters: AuthFilters): Promise<number> {
  const r = await cronQuery(ctx, query, filters)
    .select(sql<number>`count(*)`.as("n"))
    .executeTakeFirst();
  return Number(r?.n ?? 0);
}

export async function deleteCron(ctx: AgentServerContext, cronId: string, filters: AuthFilters): Promise<void> {
  let q = ctx.db.deleteFrom("agent_crons").where("cron_id", "=", cronId).where("server_id", "=", ctx.serverId);
  for (const cond of jsonCondsSql(ctx.dialect, "metadata", authConds(filters))) q = q.where(cond);
  const r = await q.executeTakeFirst();
  if (Number(r.numDeletedRows) === 0) throw cronNotFound(cronId);
}

/** What a PATCH changes: payload fields replace, metadata merges (an owner stamp must survive). */
export interface CronChange {
  schedule?: string;
  end_time?: string | null;
  payload: Record<string, unknown>;
  metadata?: Record<string, unknown> | null;
  on_run_completed?: OnRunCompleted | null;
  enabled?: boolean | null;
}

export async function updateCron(
  ctx: AgentServerContext,
  cronId: string,
  change: CronChange,
  filters: AuthFilters,
): Promise<Cron> {
  return ctx.db.transaction().execute(async (trx) => {
    const row = await findCronRow(trx, ctx, cronId, filters);
    if (!row) throw cronNotFound(cronId);
    const metadata = { ...parseJson<Record<string, unknown>>(row.metadata, {}), ...(change.metadata ?? {}) };
    const payload = { ...parseJson<Record<string, unknown>>(row.payload, {}), ...change.payload, metadata };
    const next: Partial<AgentCronsTable> = {
      payload: asJson(payload),
      metadata: asJson(metadata),
      updated_at: nowIso(),
    };
    if (change.schedule !== undefined) next.schedule = change.schedule;
    if (change.end_time !== undefined) next.end_time = change.end_time;
    if (change.on_run_completed) next.on_run_completed = change.on_run_completed;
    if (change.enabled !== undefined && change.enabled !== null) next.enabled = change.enabled ? 1 : 0;
    if (change.schedule !== undefined || change.end_time !== undefined || next.enabled !== undefined) {
      next.next_run_date = nextRunDate(
        next.schedule ?? row.schedule,
        new Date(),
        next.end_time !== undefined ? next.end_time : row.end_time,
      );
    }
    await trx.updateTable("agent_crons").set(next).where("cron_id", "=", cronId).execute();
    return toCron({ ...row, ...next });
  });
}

/**
 * Claims the crons due at `now`. Each claim is a conditional update moving `next_run_date` from
 * the value read to the next firing after `now` (missed firings are not caught up), so of several
 * processes sharing the database exactly one fires a given due time. A cron past its `end_time`
 * is retired (`next_run_date` null) without firing.
 */
export async function claimDueCrons(ctx: AgentServerContext, now: Date, limit = 50): Promise<AgentCronsTable[]> {
  const at = now.toISOString();
  const due = await ctx.db
    .selectFrom("agent_crons")
    .selectAll()
    .where("server_id", "=", ctx.serverId)
    .where("enabled", "=", 1)
    .where("next_run_date", "<=", at)
    .orderBy("next_run_date")
    .limit(limit)
    .execute();
  const claimed: AgentCronsTable[] = [];
  for (const row of due) {
    const expired = row.end_time !== null && row.end_time <= at;
    const next = expired ? null : nextRunDate(row.schedule, now, row.end_time);
    const r = await ctx.db
      .updateTable("agent_crons")
      .set({ next_run_date: next })
      .where("cron_id", "=", row.cron_id)
      .where("next_run_date", "=", row.next_run_date)
      .executeTakeFirst();
    if (Number(r.numUpdatedRows) === 1 && !expired) claimed.push({ ...row, next_run_date: next });
  }
  return claimed;
}
