import { nowIso } from "../../store/database.ts";
import { newId } from "../../store/ids.ts";
import type { AuthContext, AuthFilters } from "../auth/custom-auth.ts";
import type { AgentServerContext } from "../context.ts";
import { getAssistant, lastReadAssistant, type Assistant } from "../storage/assistants.ts";
import { asJson } from "../storage/json-columns.ts";
import type { AgentAssistantsTable, AgentRunsTable } from "../storage/tables.ts";
import { toJson } from "../wire.ts";
import { mergeConfig, noAssistant, privateConfigurable, type RequestHeaderPairs, type RunCreate } from "./run-types.ts";
import type { MultitaskStrategy, RunKwargs, RunPrivate } from "./runs.ts";

/** A validated, authorised run, ready to record: its row as started here, and as queued. */
export interface PreparedRun {
  assistant: Assistant;
  runId: string;
  kwargs: RunKwargs;
  priv: RunPrivate;
  row: AgentRunsTable;
  queued: (r: AgentRunsTable) => AgentRunsTable;
  metadata: Record<string, unknown>;
  multitask: MultitaskStrategy;
  temporary: boolean;
  delayMs: number;
  now: string;
  filters: AuthFilters | undefined;
  /** The assistant's row as last read, when the run was built from it: its insert checks it is still current. */
  assistantRow: AgentAssistantsTable | null;
}

/** What preparing a run needs of the run engine. */
export interface PrepareHost {
  readonly workerId: string;
  leaseUntil(): string;
  seal(runId: string, priv: RunPrivate): NonNullable<RunKwargs["sealed_private"]>;
}

/** The run's arguments, as its row keeps them: the request merged over its assistant's defaults. */
function runKwargs(body: RunCreate, assistant: Assistant, temporary: boolean, opts: { protocol?: boolean }): RunKwargs {
  const streamMode = Array.isArray(body.stream_mode)
    ? [...body.stream_mode]
    : body.stream_mode
      ? [body.stream_mode]
      : [];
  if (streamMode.length === 0) streamMode.push("values");
  const config = mergeConfig(assistant, body.config);
  if (body.checkpoint_id) config.configurable = { ...config.configurable, checkpoint_id: body.checkpoint_id };
  if (body.checkpoint) config.configurable = { ...config.configurable, ...body.checkpoint };
  return {
    input: body.input,
    command: body.command ?? null,
    config,
    context: { ...assistant.context, ...(body.context ?? {}) },
    stream_mode: streamMode,
    interrupt_before: body.interrupt_before ?? null,
    interrupt_after: body.interrupt_after ?? null,
    webhook: body.webhook ?? null,
    feedback_keys: body.feedback_keys ?? null,
    temporary,
    subgraphs: body.stream_subgraphs ?? false,
    resumable: body.stream_resumable ?? false,
    // The LangGraph server's default: a client that leaves does not stop the run.
    on_disconnect: body.on_disconnect ?? "continue",
    durability: body.durability ?? null,
    ...(opts.protocol ? { protocol: true } : {}),
    after_seconds: body.after_seconds ?? null,
  };
}

/** Validates a run request against its assistant, lets custom auth see it, and builds its row. */
export async function prepareRun(
  ctx: AgentServerContext,
  host: PrepareHost,
  threadId: string | null,
  body: RunCreate,
  auth: AuthContext | null,
  headers: RequestHeaderPairs | null,
  opts: { protocol?: boolean },
): Promise<PreparedRun> {
  const temporary = threadId === null && (body.on_completion ?? "delete") === "delete";
  // A stateless run starts from the assistant as last read; its row's insert checks that it is
  // still current (else the run is rebuilt from a fresh read): one round trip fewer per run.
  const known = temporary ? lastReadAssistant(ctx, body.assistant_id) : undefined;
  const assistant =
    known?.assistant ?? (await getAssistant(ctx, body.assistant_id, undefined, () => noAssistant(body.assistant_id)));
  const multitask: MultitaskStrategy = threadId === null ? "reject" : (body.multitask_strategy ?? "reject");
  const runId = newId();
  const kwargs = runKwargs(body, assistant, temporary, opts);
  // The auth handler sees (and may change) the run; metadata it adds lands on the run and thread.
  const value = {
    thread_id: threadId ?? undefined,
    assistant_id: assistant.assistant_id,
    run_id: runId,
    status: "pending",
    metadata: { ...(body.metadata ?? {}) },
    prevent_insert_if_inflight: multitask === "reject",
    multitask_strategy: multitask,
    if_not_exists: body.if_not_exists ?? "reject",
    after_seconds: body.after_seconds ?? null,
    kwargs,
  };
  const { filters } = ctx.customAuth
    ? await ctx.customAuth.authorize(auth, "threads:create_run", value)
    : { filters: undefined };
  const metadata = value.metadata ?? {};
  const priv: RunPrivate = { configurable: privateConfigurable(auth, headers) };
  const now = nowIso();
  // `after_seconds`: the run waits `pending` until then; as on the LangGraph server its
  // `created_at` is the time it may start, which is also what orders and gates its claim.
  const delayMs = Math.round((body.after_seconds ?? 0) * 1000);
  const startAt = delayMs > 0 ? new Date(Date.now() + delayMs).toISOString() : now;
  // Thread runs keep the caller's data sealed in their row, so a run whose process dies can be
  // resumed as them by another process (stateless runs die with their caller's connection).
  const sealed = temporary ? null : host.seal(runId, priv);
  const row: AgentRunsTable = {
    run_id: runId,
    server_id: ctx.serverId,
    thread_id: threadId ?? newId(),
    assistant_id: assistant.assistant_id,
    status: "running",
    metadata: asJson(metadata),
    kwargs: toJson(sealed ? { ...kwargs, sealed_private: sealed } : kwargs, false),
    multitask_strategy: multitask,
    temporary: temporary ? 1 : 0,
    worker_id: host.workerId,
    lease_until: host.leaseUntil(),
    created_at: startAt,
    updated_at: now,
  };
  const queued = (r: AgentRunsTable): AgentRunsTable => ({
    ...r,
    status: "pending",
    worker_id: null,
    lease_until: null,
    kwargs: toJson({ ...kwargs, sealed_private: sealed ?? host.seal(runId, priv) }, false),
  });
  const assistantRow = known?.row ?? null;
  return {
    assistant,
    runId,
    kwargs,
    priv,
    row,
    queued,
    metadata,
    multitask,
    temporary,
    delayMs,
    now,
    filters,
    assistantRow,
  };
}

/**
 * A stateless run whose assistant changed since it was last read, rebuilt from a fresh read (the
 * caller's authorisation stands: it is about the run, which keeps its id and metadata).
 */
export async function withCurrentAssistant(
  ctx: AgentServerContext,
  host: PrepareHost,
  prepared: PreparedRun,
  body: RunCreate,
  opts: { protocol?: boolean },
): Promise<PreparedRun> {
  const assistant = await getAssistant(ctx, body.assistant_id, undefined, () => noAssistant(body.assistant_id));
  const kwargs = runKwargs(body, assistant, true, opts);
  const { runId, priv } = prepared;
  const row: AgentRunsTable = { ...prepared.row, assistant_id: assistant.assistant_id, kwargs: toJson(kwargs, false) };
  const queued = (r: AgentRunsTable): AgentRunsTable => ({
    ...r,
    status: "pending",
    worker_id: null,
    lease_until: null,
    kwargs: toJson({ ...kwargs, sealed_private: host.seal(runId, priv) }, false),
  });
  return {
    ...prepared,
    assistant,
    kwargs,
    row,
    queued,
    assistantRow: lastReadAssistant(ctx, body.assistant_id)?.row ?? null,
  };
}
