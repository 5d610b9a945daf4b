import { v5 as uuid5 } from "uuid";
import { sql } from "kysely";
import { nowIso } from "../../store/database.ts";
import type { AgentServerContext } from "../context.ts";
import type { AuthFilters } from "../auth/custom-auth.ts";
import type { GraphConfigs } from "../project/graph-config.ts";
import { AgentError } from "../errors.ts";
import { asJson, parseJson } from "./json-columns.ts";
import { authConds, equalityConds, jsonCondsSql } from "./json-filter.ts";
import type { AgentAssistantsTable } from "./tables.ts";
import { searchPage } from "./search-page.ts";
import { preparedQuery } from "../../store/prepared-query.ts";
import type { Database } from "../../store/schema.ts";
import type { Kysely } from "kysely";

/** The namespace the LangGraph server derives default assistant ids from (`uuid5(graph_id, NS)`). */
const ASSISTANT_NAMESPACE = "6ba7b821-9dad-11d1-80b4-00c04fd430c8";
const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

const systemIds = new Map<string, string>();
/** The default assistant of a graph (UUIDv5 of the graph id; memoised: it is on every run's path). */
export const systemAssistantId = (graphId: string): string => {
  let id = systemIds.get(graphId);
  if (!id) systemIds.set(graphId, (id = uuid5(graphId, ASSISTANT_NAMESPACE)));
  return id;
};
export const isUuid = (s: string) => UUID.test(s);

export interface Assistant {
  assistant_id: string;
  graph_id: string;
  config: Record<string, unknown>;
  context: Record<string, unknown>;
  metadata: Record<string, unknown>;
  name: string;
  description: string | null;
  version: number;
  created_at: string;
  updated_at: string;
}

export function toAssistant(row: AgentAssistantsTable): Assistant {
  return {
    assistant_id: row.assistant_id,
    graph_id: row.graph_id,
    config: parseJson(row.config, {}),
    context: parseJson(row.context, {}),
    metadata: parseJson(row.metadata, {}),
    name: row.name,
    description: row.description,
    version: row.version,
    created_at: row.created_at,
    updated_at: row.updated_at,
  };
}

/** An assistant id, or a graph id standing for that graph's default assistant. */
export function resolveAssistantId(ctx: AgentServerContext, idOrGraph: string): string {
  if (ctx.graphs.has(idOrGraph)) return systemAssistantId(idOrGraph);
  return idOrGraph;
}

/** One default assistant per graph, created once (several processes may race: insert-or-ignore). */
export async function ensureSystemAssistants(ctx: AgentServerContext, defaults: GraphConfigs = {}): Promise<void> {
  const now = nowIso();
  for (const [graphId, g] of ctx.graphs) {
    const row = {
      server_id: ctx.serverId,
      assistant_id: systemAssistantId(graphId),
      graph_id: graphId,
      // A Python graph's default assistant is named after the compiled graph, as on the LangGraph server.
      name: "runtime" in g && g.runtime === "python" ? g.name : graphId,
      description: g.description,
      config: asJson(defaults[graphId]?.config ?? {}),
      context: asJson(defaults[graphId]?.context ?? {}),
      metadata: asJson({ created_by: "system" }),
      version: 1,
      created_at: now,
      updated_at: now,
    };
    await ctx.db
      .insertInto("agent_assistants")
      .values(row)
      .onConflict((oc) => oc.columns(["server_id", "assistant_id"]).doNothing())
      .execute();
    const { updated_at: _u, ...version } = row;
    await ctx.db
      .insertInto("agent_assistant_versions")
      .values(version)
      .onConflict((oc) => oc.columns(["server_id", "assistant_id", "version"]).doNothing())
      .execute();
  }
}

const ASSISTANT_COLUMNS = [
  "server_id",
  "assistant_id",
  "graph_id",
  "name",
  "description",
  "config",
  "context",
  "metadata",
  "version",
  "created_at",
  "updated_at",
] as const;

/** An assistant's row by id (every run reads its assistant: compiled once). */
const assistantRow = preparedQuery((db: Kysely<Database>, p: { serverId: string; assistantId: string }) =>
  db
    .selectFrom("agent_assistants")
    .select(ASSISTANT_COLUMNS)
    .where("server_id", "=", p.serverId)
    .where("assistant_id", "=", p.assistantId),
);

/** The rows `getAssistant` last read without filters, per server, by assistant id. */
const lastRead = new WeakMap<AgentServerContext, Map<string, AgentAssistantsTable>>();

function remember(ctx: AgentServerContext, id: string, row: AgentAssistantsTable | undefined): void {
  let rows = lastRead.get(ctx);
  if (!rows) lastRead.set(ctx, (rows = new Map()));
  if (!row) rows.delete(id);
  else {
    // Many assistants in turn: start over rather than keep every one.
    if (rows.size >= 1000 && !rows.has(id)) rows.clear();
    rows.set(id, row);
  }
}

/**
 * The assistant as last read (maybe changed since: whoever uses it checks its row is still
 * current in the same statement as its write, see run-queue.ts `insertRun`).
 */
export function lastReadAssistant(
  ctx: AgentServerContext,
  idOrGraph: string,
): { assistant: Assistant; row: AgentAssistantsTable } | undefined {
  const row = lastRead.get(ctx)?.get(resolveAssistantId(ctx, idOrGraph));
  if (!row || !ctx.graphs.has(row.graph_id)) return undefined;
  return { assistant: toAssistant(row), row };
}

/** Reads an assistant visible under the filters; hidden and missing both read as 404. */
export async function getAssistant(
  ctx: AgentServerContext,
  assistantId: string,
  filters: AuthFilters,
  missing?: () => AgentError,
): Promise<Assistant> {
  const id = resolveAssistantId(ctx, assistantId);
  const conds = jsonCondsSql(ctx.dialect, "metadata", authConds(filters));
  let row: AgentAssistantsTable | undefined;
  if (conds.length === 0) {
    row = (await assistantRow(ctx.db, { serverId: ctx.serverId, assistantId: id })).rows[0];
    remember(ctx, id, row);
  } else {
    let q = ctx.db
      .selectFrom("agent_assistants")
      .selectAll()
      .where("server_id", "=", ctx.serverId)
      .where("assistant_id", "=", id);
    for (const cond of conds) q = q.where(cond);
    row = await q.executeTakeFirst();
  }
  if (!row) throw missing ? missing() : new AgentError(404, "Assistant not found");
  if (!ctx.graphs.has(row.graph_id) && missing) throw missing();
  return toAssistant(row);
}

export interface AssistantQuery {
  graph_id?: string | null;
  name?: string | null;
  metadata?: Record<string, unknown> | null;
  limit?: number;
  offset?: number;
  sort_by?: string | null;
  sort_order?: string | null;
}

const SORTABLE = new Set(["assistant_id", "graph_id", "name", "created_at", "updated_at"]);

function searchQuery(ctx: AgentServerContext, query: AssistantQuery, filters: AuthFilters) {
  let q = ctx.db.selectFrom("agent_assistants").where("server_id", "=", ctx.serverId);
  if (query.graph_id) q = q.where("graph_id", "=", query.graph_id);
  // Case-insensitive substring, as the LangGraph server's `ILIKE '%name%'` (LIKE wildcards escaped).
  if (query.name)
    q = q.where(
      sql<boolean>`lower(name) like ${`%${query.name.toLowerCase().replace(/[\\%_]/g, (ch) => `\\${ch}`)}%`} escape '\\'`,
    );
  for (const cond of jsonCondsSql(ctx.dialect, "metadata", [...equalityConds(query.metadata), ...authConds(filters)]))
    q = q.where(cond);
  return q;
}

export async function searchAssistants(
  ctx: AgentServerContext,
  query: AssistantQuery,
  filters: AuthFilters,
): Promise<{ items: Assistant[]; total: number }> {
  const page = searchPage(query, SORTABLE);
  const rows = await searchQuery(ctx, query, filters)
    .selectAll()
    .orderBy(page.sortBy, page.order)
    .orderBy("assistant_id", page.order)
    .limit(page.limit)
    .offset(page.offset)
    .execute();
  const total = await countAssistants(ctx, query, filters);
  return { items: rows.map(toAssistant), total };
}

export async function countAssistants(
  ctx: AgentServerContext,
  query: AssistantQuery,
  filters: AuthFilters,
): Promise<number> {
  const r = await searchQuery(ctx, query, filters)
    .select(sql<number>`count(*)`.as("n"))
    .executeTakeFirst();
  return Number(r?.n ?? 0);
}

export interface AssistantWrite {
  graph_id?: string | null;
  config?: Record<string, unknown> | null;
  context?: Record<string, unknown> | null;
  metadata?: Record<string, unknown> | null;
  name?: string | null;
  description?: string | null;
}

export async function createAssistant(
  ctx: AgentServerContext,
  input: AssistantWrite & { graph_id: string; assistant_id?: string | null; if_exists?: "raise" | "do_nothing" | null },
  filters: AuthFilters,
): Promise<Assistant> {
  if (!ctx.graphs.has(input.graph_id)) throw new AgentError(404, `Graph "${input.graph_id}" not found`);
  const id = input.assistant_id ?? crypto.randomUUID();
  const now = nowIso();
  const row: AgentAssistantsTable = {
    server_id: ctx.serverId,
    assistant_id: id,
    graph_id: input.graph_id,
    name: input.name ?? "Untitled",
    description: input.description ?? null,
    config: asJson(input.config),
    context: asJson(input.context),
    metadata: asJson(input.metadata),
    version: 1,
    created_at: now,
    updated_at: now,
  };
  const inserted = await ctx.db.transaction().execute(async (trx) => {
    const r = await trx
      .insertInto("agent_assistants")
      .values(row)
      .onConflict((oc) => oc.columns(["server_id", "assistant_id"]).doNothing())
      .executeTakeFirst();
    if (Number(r.numInsertedOrUpdatedRows ?? 0) === 0) return false;
    const { updated_at: _u, ...version } = row;
    await trx.insertInto("agent_assistant_versions").values(version).execute();
    return true;
  });
  if (!inserted) {
    if (input.if_exists === "do_nothing") return getAssistant(ctx, id, filters);
    throw new AgentError(409, `Assistant "${id}" already exists`);
  }
  return toAssistant(row);
}

/** A patch makes a new version (the latest becomes current); metadata is merged. */
export async function patchAssistant(
  ctx: AgentServerContext,
  assistantId: string,
  patch: AssistantWrite,
  filters: AuthFilters,
): Promise<Assistant> {
  const current = await getAssistant(ctx, assistantId, filters);
  if (patch.graph_id && !ctx.graphs.has(patch.graph_id))
    throw new AgentError(404, `Graph "${patch.graph_id}" not found`);
  const now = nowIso();
  return ctx.db.transaction().execute(async (trx) => {
    const max = await trx
      .selectFrom("agent_assistant_versions")
      .select(sql<number>`max(version)`.as("v"))
      .where("server_id", "=", ctx.serverId)
      .where("assistant_id", "=", current.assistant_id)
      .executeTakeFirst();
    const version = Number(max?.v ?? current.version) + 1;
    const next = {
      graph_id: patch.graph_id ?? current.graph_id,
      config: asJson(patch.config ?? current.config),
      context: asJson(patch.context ?? current.context),
      metadata: asJson({ ...current.metadata, ...(patch.metadata ?? {}) }),
      name: patch.name ?? current.name,
      description: patch.description !== undefined ? patch.description : current.description,
      version,
    };
    await trx
      .insertInto("agent_assistant_versions")
      .values({ server_id: ctx.serverId, assistant_id: current.assistant_id, created_at: now, ...next })
      .execute();
    await trx
      .updateTable("agent_assistants")
      .set({ ...next, updated_at: now })
      .where("server_id", "=", ctx.serverId)
      .where("assistant_id", "=", current.assistant_id)
      .execute();
    return {
      ...current,
      ...next,
      config: JSON.parse(next.config),
      context: JSON.parse(next.context),
      metadata: JSON.parse(next.metadata),
      updated_at: now,
    };
  });
}

export async function setLatestVersion(
  ctx: AgentServerContext,
  assistantId: string,
  version: number,
  filters: AuthFilters,
): Promise<Assistant> {
  const current = await getAssistant(ctx, assistantId, filters);
  const v = await ctx.db
    .selectFrom("agent_assistant_versions")
    .selectAll()
    .where("server_id", "=", ctx.serverId)
    .where("assistant_id", "=", current.assistant_id)
    .where("version", "=", version)
    .executeTakeFirst();
  if (!v) throw new AgentError(404, `Assistant "${assistantId}" has no version ${version}`);
  const now = nowIso();
  const next = {
    graph_id: v.graph_id,
    config: v.config,
    context: v.context,
    metadata: v.metadata,
    name: v.name,
    description: v.description,
    version: v.version,
    updated_at: now,
  };
  await ctx.db
    .updateTable("agent_assistants")
    .set(next)
    .where("server_id", "=", ctx.serverId)
    .where("assistant_id", "=", current.assistant_id)
    .execute();
  return toAssistant({ ...v, server_id: ctx.serverId, created_at: current.created_at, updated_at: now });
}

export async function listVersions(
  ctx: AgentServerContext,
  assistantId: string,
  query: { metadata?: Record<string, unknown> | null; limit?: number; offset?: number },
  filters: AuthFilters,
): Promise<Array<Omit<Assistant, "updated_at">>> {
  const current = await getAssistant(ctx, assistantId, filters);
  let q = ctx.db
    .selectFrom("agent_assistant_versions")
    .selectAll()
    .where("server_id", "=", ctx.serverId)
    .where("assistant_id", "=", current.assistant_id);
  for (const cond of jsonCondsSql(ctx.dialect, "metadata", equalityConds(query.metadata))) q = q.where(cond);
  const rows = await q
    .orderBy("version", "desc")
    .limit(query.limit ?? 10)
    .offset(query.offset ?? 0)
    .execute();
  return rows.map((r) => ({
    assistant_id: r.assistant_id,
    graph_id: r.graph_id,
    config: parseJson(r.config, {}),
    context: parseJson(r.context, {}),
    metadata: parseJson(r.metadata, {}),
    name: r.name,
    description: r.description,
    version: r.version,
    created_at: r.created_at,
  }));
}

export async function deleteAssistant(
  ctx: AgentServerContext,
  assistantId: string,
  filters: AuthFilters,
): Promise<string> {
  const current = await getAssistant(ctx, assistantId, filters);
  await ctx.db.transaction().execute(async (trx) => {
    await trx
      .deleteFrom("agent_assistant_versions")
      .where("server_id", "=", ctx.serverId)
      .where("assistant_id", "=", current.assistant_id)
      .execute();
    await trx
      .deleteFrom("agent_assistants")
      .where("server_id", "=", ctx.serverId)
      .where("assistant_id", "=", current.assistant_id)
      .execute();
  });
  return current.assistant_id;
}
