import type { AgentServerContext } from "../context.ts";
import type { AuthContext } from "../auth/custom-auth.ts";
import { AgentError } from "../errors.ts";
import { isPythonGraph } from "../python/index.ts";
import type { RunCreate, RunEngine } from "../runs/run-engine.ts";
import type { MultitaskStrategy } from "../runs/runs.ts";
import { graphForThread } from "../storage/thread-state.ts";
import type { Thread } from "../storage/threads.ts";
import { checkThreadAccess } from "./access.ts";
import { protocolError, type ErrorCode, type ProtocolResponse } from "./events.ts";
import { protocolState } from "./normalize.ts";
import { announceRun, pumpHere, pumpRun } from "./run-pump.ts";
import type { ThreadLog, ThreadLogs } from "./thread-log.ts";

const isRecord = (v: unknown): v is Record<string, unknown> => typeof v === "object" && v !== null && !Array.isArray(v);
const MULTITASK = new Set(["reject", "rollback", "interrupt", "enqueue"]);

/** Who sends a command: the caller's auth and headers, as on the REST routes. */
export interface Caller {
  auth: AuthContext | null;
  headers: Headers | null;
}

/** An `AgentError` (a refusal of the engine or the auth handler) as a protocol error code. */
function codeOf(err: AgentError): ErrorCode {
  if (err.status === 401 || err.status === 403) return "permission_denied";
  return "invalid_argument";
}

/**
 * The commands of the event-based protocol on one thread (`run.start`, `input.respond`,
 * `state.get`, `agent.getTree`), and the pumps that turn each run's events into the thread's log.
 * Subscriptions are the transports' business (SSE filters per connection, WebSocket per socket).
 */
export class ProtocolService {
  constructor(
    private readonly ctx: AgentServerContext,
    private readonly engine: RunEngine,
    readonly logs: ThreadLogs,
  ) {
    // Replicas: the replica that executes a protocol run pumps its events, fenced by its attempt.
    const store = engine.streams.threadEvents;
    if (!store) return;
    const host = { ctx, engine, logs, store, graphName: (id: string) => this.graphName(id) };
    engine.onRunStarted((active, kwargs) => {
      if (!kwargs.protocol || kwargs.temporary) return;
      void pumpHere(host, active, kwargs.attempt ?? 1).catch((err) =>
        ctx.log.warn({ err, runId: active.run.run_id }, "protocol: pumping a run's events failed"),
      );
    });
  }

  private success(id: number, threadId: string, log: ThreadLog, result: Record<string, unknown>): ProtocolResponse {
    return { type: "success", id, result, meta: { thread_id: threadId, applied_through_seq: log.lastSeq } };
  }

  /** Answers one command (already checked to have an integer `id` and a string `method`). */
  async handle(
    threadId: string,
    command: { id: number; method: string; params?: unknown },
    caller: Caller,
  ): Promise<ProtocolResponse> {
    const params = isRecord(command.params) ? command.params : {};
    try {
      const thread = await checkThreadAccess(this.ctx, caller.auth, threadId);
      const log = await this.logs.open(threadId);
      switch (command.method) {
        case "run.start":
          return await this.runStart(threadId, log, command.id, params, caller);
        case "input.respond":
          return await this.inputRespond(
            threadId,
            log,
            command.id,
            params,
            caller,
            await this.settledInterrupts(threadId, log, caller, thread),
          );
        case "state.get":
          return await this.stateGet(threadId, log, command.id, params, thread);
        case "agent.getTree":
          return this.success(command.id, threadId, log, { tree: log.tree([]) });
        case "subscription.reconnect":
          // Over SSE each stream is its own subscription: reopening it with `since` is the reconnect.
          return protocolError(
            command.id,
            "not_supported",
            "subscription.reconnect is a WebSocket command; over SSE reopen the event stream with `since`.",
          );
        default:
          return protocolError(command.id, "unknown_command", `Unknown protocol command: ${command.method}`);
      }
    } catch (err) {
      if (err instanceof AgentError) return protocolError(command.id, codeOf(err), err.message);
      this.ctx.log.warn({ err, threadId, method: command.method }, "protocol command failed");
      return protocolError(command.id, "unknown_error", err instanceof Error ? err.message : String(err));
    }
  }

  private async runStart(
    threadId: string,
    log: ThreadLog,
    id: number,
    params: Record<string, unknown>,
    caller: Caller,
  ): Promise<ProtocolResponse> {
    const assistantId = typeof params.assistant_id === "string" ? params.assistant_id : "";
    if (!assistantId) return protocolError(id, "invalid_argument", "run.start requires an assistant_id.");
    if (log.assistantId !== null && log.assistantId !== assistantId) {
      return protocolError(
        id,
        "invalid_argument",
        `Thread ${threadId} is bound to assistant ${log.assistantId}; cannot run ${assistantId}.`,
      );
    }
    const thread = await checkThreadAccess(this.ctx, caller.auth, threadId);
    // Input given to a thread paused on an interrupt answers it, as on the reference server.
    const resume = params.input != null && hasInterrupts(thread?.interrupts);
    const runId = await this.start(
      threadId,
      log,
      {
        assistant_id: assistantId,
        ...(resume ? { command: { resume: params.input } } : { input: params.input }),
        config: isRecord(params.config) ? (params.config as RunCreate["config"]) : undefined,
        metadata: isRecord(params.metadata) ? params.metadata : undefined,
        multitask_strategy:
          typeof params.multitaskStrategy === "string" && MULTITASK.has(params.multitaskStrategy)
            ? (params.multitaskStrategy as MultitaskStrategy)
            : "enqueue",
      },
      caller,
    );
    log.assistantId = assistantId;
    return this.success(id, threadId, log, { run_id: runId });
  }

  private async inputRespond(
    threadId: string,
    log: ThreadLog,
    id: number,
    params: Record<string, unknown>,
    caller: Caller,
    interrupts: unknown,
  ): Promise<ProtocolResponse> {
    const resume: Record<string, unknown> = {};
    if (Array.isArray(params.responses)) {
      for (const r of params.responses) {
        if (!isRecord(r) || typeof r.interrupt_id !== "string")
          return protocolError(id, "invalid_argument", "input.respond responses entries require an interrupt_id.");
        resume[r.interrupt_id] = r.response;
      }
      if (!Object.keys(resume).length)
        return protocolError(id, "invalid_argument", "input.respond requires at least one response.");
    } else if (typeof params.interrupt_id === "string") resume[params.interrupt_id] = params.response;
    else return protocolError(id, "invalid_argument", "input.respond requires an interrupt_id.");
    const assistantId = log.assistantId ?? (await this.threadAssistant(threadId));
    if (!assistantId) return protocolError(id, "no_such_run", "Thread has no active assistant; call run.start first.");
    if (!hasInterrupts(interrupts))
      return protocolError(id, "no_such_interrupt", "The thread has no pending interrupt to answer.");
    const known = new Set(
      Object.values(interrupts as Record<string, Array<{ id?: string }>>)
        .flat()
        .map((i) => i?.id),
    );
    const unknown = Object.keys(resume).filter((k) => !known.has(k));
    if (unknown.length) return protocolError(id, "no_such_interrupt", `Unknown interrupt: ${unknown.join(", ")}`);
    await this.start(
      threadId,
      log,
      {
        assistant_id: assistantId,
        command: {
          resume,
          ...(isRecord(params.update) || Array.isArray(params.update) ? { update: params.update } : {}),
          ...(params.goto != null ? { goto: params.goto } : {}),
        },
        config: isRecord(params.config) ? (params.config as RunCreate["config"]) : undefined,
        metadata: isRecord(params.metadata) ? params.metadata : undefined,
        multitask_strategy: "enqueue",
      },
      caller,
    );
    log.assistantId = assistantId;
    return this.success(id, threadId, log, {});
  }

  /**
   * The thread's pending interrupts. A client may answer `input.requested` as soon as it arrives,
   * while the run that asked still ends (it records the interrupts on the thread as it does): that
   * run's end is awaited first (a few seconds at most).
   */
  private async settledInterrupts(
    threadId: string,
    log: ThreadLog,
    caller: Caller,
    thread: Thread | null,
  ): Promise<unknown> {
    if (hasInterrupts(thread?.interrupts) || !log.currentRunId) return thread?.interrupts;
    const ended = this.engine.waitForEnd(log.currentRunId).then(
      () => true,
      () => false,
    );
    if (!(await Promise.race([ended, new Promise<boolean>((r) => setTimeout(() => r(false), 5000).unref())])))
      return thread?.interrupts;
    return (await checkThreadAccess(this.ctx, caller.auth, threadId))?.interrupts;
  }

  private async threadAssistant(threadId: string): Promise<string | null> {
    const row = await this.ctx.db
      .selectFrom("agent_threads")
      .select("metadata")
      .where("thread_id", "=", threadId)
      .where("server_id", "=", this.ctx.serverId)
      .executeTakeFirst();
    const meta = row ? (JSON.parse(String(row.metadata ?? "{}")) as Record<string, unknown>) : {};
    return typeof meta.assistant_id === "string" ? meta.assistant_id : null;
  }

  /** The thread's latest checkpoint id and namespace: a Python graph's are in its worker's saver. */
  private async latestCheckpoint(thread: Thread | null): Promise<Record<string, unknown> | undefined> {
    const threadId = thread?.thread_id;
    if (!threadId) return undefined;
    const graph = await graphForThread(this.ctx, thread).catch(() => null);
    if (isPythonGraph(graph))
      return (
        ((await graph.state(threadId, {}, false).catch(() => null))?.checkpoint as
          Record<string, unknown> | undefined) ?? undefined
      );
    const tuple = await this.ctx.checkpointer.saver
      .getTuple({ configurable: { thread_id: threadId, checkpoint_ns: "" } })
      .catch(() => undefined);
    return tuple?.config.configurable;
  }

  private async stateGet(
    threadId: string,
    log: ThreadLog,
    id: number,
    params: Record<string, unknown>,
    thread: Thread | null,
  ): Promise<ProtocolResponse> {
    const cfg = await this.latestCheckpoint(thread);
    const state = (protocolState(thread?.values ?? {}) ?? {}) as Record<string, unknown>;
    const keys =
      Array.isArray(params.keys) && params.keys.every((k) => typeof k === "string") ? (params.keys as string[]) : null;
    const picked = keys ? Object.fromEntries(Object.entries(state).filter(([k]) => keys.includes(k))) : state;
    return this.success(id, threadId, log, {
      values: picked,
      ...(typeof cfg?.checkpoint_id === "string"
        ? { checkpoint: { id: cfg.checkpoint_id, ns: typeof cfg.checkpoint_ns === "string" ? cfg.checkpoint_ns : "" } }
        : {}),
    });
  }

  /** Creates the run (a thread created on the way) and queues its pump into the thread's log. */
  private async start(
    threadId: string,
    log: ThreadLog,
    body: Omit<RunCreate, "stream_mode">,
    caller: Caller,
  ): Promise<string> {
    const { run } = await this.engine.create(
      threadId,
      // A Python graph ignores `protocol` and streams these modes; they are converted instead.
      {
        ...body,
        stream_mode: ["values", "updates", "custom"],
        stream_subgraphs: true,
        stream_resumable: true,
        if_not_exists: "create",
      },
      caller.auth,
      caller.headers,
      { protocol: true },
    );
    log.currentRunId = run.run_id;
    log.noteRun(run.run_id, log.lastSeq);
    const graphName = await this.graphName(run.assistant_id);
    const origin = { runId: run.run_id, assistantId: body.assistant_id };
    // Replicas: this replica announces the run; the one executing it pumps its events (pumpHere).
    log.pumping = log.pumping
      .then(() =>
        log.sink
          ? announceRun(this.engine, log, origin, graphName)
          : pumpRun(this.ctx, this.engine, log, origin, graphName),
      )
      .catch((err) => this.ctx.log.warn({ err, runId: run.run_id }, "protocol: following a run failed"));
    return run.run_id;
  }

  private async graphName(assistantId: string): Promise<string> {
    const row = await this.ctx.db
      .selectFrom("agent_assistants")
      .select("graph_id")
      .where("assistant_id", "=", assistantId)
      .executeTakeFirst()
      .catch(() => undefined);
    return row?.graph_id ?? assistantId;
  }
}

function hasInterrupts(interrupts: unknown): boolean {
  return isRecord(interrupts) && Object.values(interrupts).some((v) => Array.isArray(v) && v.length > 0);
}
