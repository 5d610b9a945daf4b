import type { Kysely } from "kysely";
import type { Database } from "../../store/schema.ts";
import type { AgentServerContext } from "../context.ts";
import { parseJson } from "../storage/json-columns.ts";
import type { AgentRunsTable } from "../storage/tables.ts";

export type RunStatus = "pending" | "running" | "error" | "success" | "timeout" | "interrupted";
export type MultitaskStrategy = "reject" | "interrupt" | "rollback" | "enqueue";

/** What a run was asked to do (persisted; without the caller's credentials, see `RunPrivate`). */
export interface RunKwargs {
  input?: unknown;
  command?: { update?: unknown; resume?: unknown; goto?: unknown } | null;
  config: { tags?: string[]; recursion_limit?: number; configurable?: Record<string, unknown>; [k: string]: unknown };
  context?: unknown;
  stream_mode: string[];
  interrupt_before?: string[] | "*" | null;
  interrupt_after?: string[] | "*" | null;
  webhook?: string | null;
  feedback_keys?: string[] | null;
  temporary: boolean;
  subgraphs: boolean;
  resumable: boolean;
  on_disconnect: "cancel" | "continue";
  durability?: string | null;
  /** The delay the run was created with (graphs of Python projects see it as `__after_seconds__`). */
  after_seconds?: number | null;
  /** The caller's user and `x-*` headers, sealed (queued runs, and thread runs so a crash can resume them). */
  sealed_private?: { keyId: string; blob: string } | null;
  /** Started by the event-based protocol: streams LangGraph's protocol events (`streamEvents` v3). */
  protocol?: boolean;
  /** Which start this is (1, then one more after each resume following a crash or a drain). */
  attempt?: number;
  /** How many of the earlier attempts were drained and handed back (SIGTERM), not lost in a crash. */
  handbacks?: number;
}

/** Per-run values that must not be stored in clear: the authenticated user and forwarded headers. */
export interface RunPrivate {
  configurable: Record<string, unknown>;
}

export interface Run {
  run_id: string;
  thread_id: string;
  assistant_id: string;
  created_at: string;
  updated_at: string;
  status: RunStatus;
  metadata: Record<string, unknown>;
  kwargs: Omit<RunKwargs, "sealed_private">;
  multitask_strategy: MultitaskStrategy;
}

/** The run as the API shows it, from its row; `parsed` gives the row's JSON parts when they are in hand. */
export function toRun(
  row: AgentRunsTable,
  parsed?: { metadata: Record<string, unknown>; kwargs: Run["kwargs"]; multitask: MultitaskStrategy },
): Run {
  return {
    run_id: row.run_id,
    thread_id: row.thread_id,
    assistant_id: row.assistant_id,
    created_at: row.created_at,
    updated_at: row.updated_at,
    status: row.status as RunStatus,
    metadata: parsed ? parsed.metadata : parseJson(row.metadata, {}),
    kwargs: parsed ? { ...parsed.kwargs } : kwargsOf(row),
    multitask_strategy: parsed ? parsed.multitask : (row.multitask_strategy as MultitaskStrategy),
  };
}

function kwargsOf(row: AgentRunsTable): Run["kwargs"] {
  const { sealed_private: _s, ...kwargs } = parseJson<RunKwargs>(row.kwargs, {
    config: {},
    stream_mode: ["values"],
    temporary: false,
    subgraphs: false,
    resumable: false,
    on_disconnect: "cancel",
  });
  return kwargs;
}

export async function getRunRow(
  db: Kysely<Database>,
  ctx: AgentServerContext,
  runId: string,
  threadId?: string,
): Promise<AgentRunsTable | undefined> {
  let q = db.selectFrom("agent_runs").selectAll().where("run_id", "=", runId).where("server_id", "=", ctx.serverId);
  if (threadId) q = q.where("thread_id", "=", threadId);
  return q.executeTakeFirst();
}

export async function listRuns(
  ctx: AgentServerContext,
  threadId: string,
  query: { limit?: number; offset?: number; status?: string | null },
): Promise<Run[]> {
  let q = ctx.db
    .selectFrom("agent_runs")
    .selectAll()
    .where("server_id", "=", ctx.serverId)
    .where("thread_id", "=", threadId);
  if (query.status) q = q.where("status", "=", query.status);
  const rows = await q
    .orderBy("created_at", "desc")
    .orderBy("run_id", "desc")
    .limit(query.limit ?? 10)
    .offset(query.offset ?? 0)
    .execute();
  return rows.map((row) => toRun(row));
}

export const INFLIGHT: RunStatus[] = ["pending", "running"];
