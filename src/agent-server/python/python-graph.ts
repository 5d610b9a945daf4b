import type { RunChannel } from "../runs/run-channel.ts";
import type { RunOutcome } from "../runs/run-executor.ts";
import type { RunKwargs } from "../runs/runs.ts";
import { AgentError } from "../errors.ts";
import type { PythonWorkers } from "./worker-pool.ts";
import { WorkerCrashed, WorkerRequestError } from "./worker.ts";

type Json = Record<string, unknown>;

/**
 * The config a Python graph receives (snake_case keys of `RunnableConfig`; no JS objects such as the
 * store). Its `configurable` also has what the LangGraph server adds for Python graphs: the caller's
 * identity as `user_id` ("" without custom auth) and the run's `__after_seconds__` (both reach
 * checkpoints and stream chunks).
 */
export function pythonRunConfig(runConfig: Json, afterSeconds: number | null = null): Json {
  const out: Json = {};
  for (const k of ["metadata", "tags"]) if (runConfig[k] !== undefined) out[k] = runConfig[k];
  const configurable = (runConfig.configurable as Json | undefined) ?? {};
  out.configurable = { user_id: typeof configurable.langgraph_auth_user_id === "string" ? configurable.langgraph_auth_user_id : "", __after_seconds__: afterSeconds ?? 0, ...configurable };
  if (runConfig.recursionLimit !== undefined) out.recursion_limit = runConfig.recursionLimit;
  return out;
}

/** A worker failure as the API answers it: a refused request keeps its status; anything else is the graph's error. */
function apiError(err: unknown): never {
  if (err instanceof WorkerRequestError && err.status) throw new AgentError(err.status, err.message);
  if (err instanceof WorkerCrashed) throw new AgentError(503, `the Python worker is not available: ${err.message}`);
  throw err;
}

/**
 * A graph of the project served by the Python worker. The run's events arrive as JSON Python
 * serialised (messages from `model_dump()`, interrupts with `response_schema`) and go to the run's
 * channel unparsed.
 */
export class PythonGraph {
  readonly runtime = "python";
  /** A thread's metadata, merged under a thread run's own metadata (so into its checkpoints), as the Python server does. */
  threadMetadata: ((threadId: string) => Promise<Json>) | null = null;

  constructor(
    readonly graphId: string,
    readonly description: string | null,
    private readonly worker: PythonWorkers,
  ) {}

  /** The compiled graph's name (`compile(name=…)`), the default assistant's name as on the LangGraph server. */
  get name(): string {
    return this.worker.hello?.graphs[this.graphId]?.name ?? this.graphId;
  }

  async execute(kwargs: RunKwargs, runConfig: Json, channel: RunChannel, signal: AbortSignal, stateful: boolean): Promise<RunOutcome> {
    const runId = String(runConfig.runId);
    const payload = {
      run_id: runId,
      graph_id: this.graphId,
      temporary: !stateful,
      stream_mode: kwargs.stream_mode,
      subgraphs: kwargs.subgraphs,
      input: kwargs.input ?? null,
      command: kwargs.command ?? null,
      context: kwargs.context ?? null,
      interrupt_before: kwargs.interrupt_before ?? null,
      interrupt_after: kwargs.interrupt_after ?? null,
      durability: kwargs.durability ?? null,
      // Started by the event-based protocol: the worker streams langgraph's protocol events (v3),
      // published under the same channel event name as a JavaScript graph's.
      protocol: kwargs.protocol ?? false,
      config: pythonRunConfig(runConfig, kwargs.after_seconds ?? null),
    };
    const threadId = (runConfig.configurable as Json | undefined)?.thread_id;
    if (stateful && this.threadMetadata && typeof threadId === "string") {
      const config = payload.config;
      config.metadata = { ...(await this.threadMetadata(threadId)), ...((config.metadata as Json | undefined) ?? {}) };
    }
    const onAbort = () =>
      void this.worker.request("run.cancel", { run_id: runId }).catch(() => {
        // A worker that is gone has no run left to cancel.
      });
    signal.addEventListener("abort", onAbort, { once: true });
    const onEvent = (event: string, body: Buffer) => channel.pushJson(event, body.toString("utf8"));
    try {
      let end;
      try {
        end = await this.worker.request("run.start", payload, onEvent);
      } catch (err) {
        // A thread run resumes once from its last checkpoint when the worker comes back, as runs of
        // a crashed server do; a stateless run has nothing to resume from.
        if (!(err instanceof WorkerCrashed) || !stateful || signal.aborted || (kwargs.attempt ?? 1) > 1) throw err;
        await this.worker.ready();
        channel.push("metadata", { run_id: runId, attempt: 2 });
        // Checkpoints are written in the background by default (durability "async"): a worker that
        // died early may have saved none of this run's, and resuming then would run nothing (or
        // fail on an empty input), so the run starts over from its own input.
        const resume = await this.checkpointedByRun(String((runConfig.configurable as Json | undefined)?.thread_id ?? ""), runId);
        end = await this.worker.request("run.start", resume ? { ...payload, input: null, command: null } : payload, onEvent);
      }
      // Stopped at a superstep boundary on request (`drain`), its checkpoint saved: handed back, not ended.
      if (end.header.status === "drained") return { status: "interrupted", threadStatus: "busy", drained: true };
      const body = JSON.parse(end.body.toString("utf8")) as Json;
      if (end.header.status === "error") {
        const error = body as { error: string; message: string };
        return { status: "error", threadStatus: "error", values: { __error__: error }, error };
      }
      const threadStatus = end.header.thread_status === "interrupted" ? "interrupted" : "idle";
      return { status: "success", threadStatus, values: body.values, stateWithInterrupt: true, interrupts: stateful ? ((body.interrupts as Record<string, unknown[]>) ?? {}) : undefined };
    } catch (err) {
      if (signal.aborted) throw err;
      if (err instanceof WorkerCrashed) {
        const error = { error: "WorkerCrashed", message: err.message };
        channel.push("error", error);
        return { status: "error", threadStatus: "error", values: { __error__: error }, error };
      }
      throw err;
    } finally {
      signal.removeEventListener("abort", onAbort);
    }
  }

  /**
   * Asks a run to stop at its next superstep boundary with its checkpoint saved (langgraph's
   * `RunControl.request_drain`); `execute` then answers `drained`. False when the worker cannot
   * (the project's langgraph predates run control, or the run is not a thread's).
   */
  async drain(runId: string): Promise<boolean> {
    const f = await this.worker.request("run.drain", { run_id: runId });
    return (JSON.parse(f.body.toString("utf8")) as { draining?: boolean }).draining === true;
  }

  /** Whether the thread's latest checkpoint was written by this run (each checkpoint's metadata names its run). */
  private async checkpointedByRun(threadId: string, runId: string): Promise<boolean> {
    if (!threadId) return false;
    const latest = await this.state(threadId, {}, false);
    return (latest?.metadata as Json | undefined)?.run_id === runId;
  }

  /** The thread's `ThreadState` at a checkpoint (the latest when none), or null when it has none. */
  state(threadId: string, checkpoint: Json, subgraphs: boolean): Promise<Json | null> {
    return this.worker.call<Json | null>("state.get", { graph_id: this.graphId, thread_id: threadId, checkpoint, subgraphs }).catch(apiError);
  }

  history(threadId: string, h: { checkpoint?: Json | null; limit: number; before?: unknown; filter?: Json | null }): Promise<Json[]> {
    return this.worker.call<Json[]>("state.history", { graph_id: this.graphId, thread_id: threadId, checkpoint: h.checkpoint ?? null, limit: h.limit, before: h.before ?? null, filter: h.filter ?? null }).catch(apiError);
  }

  /** Writes values as a node would; returns the new checkpoint and the thread's values after it. */
  update(threadId: string, checkpoint: Json | null, values: unknown, asNode: string | null): Promise<{ checkpoint: Json; values: unknown; next: string[] }> {
    return this.worker.call<{ checkpoint: Json; values: unknown; next: string[] }>("state.update", { graph_id: this.graphId, thread_id: threadId, checkpoint, values, as_node: asNode }).catch(apiError);
  }

  bulkUpdate(threadId: string, supersteps: Array<{ updates: Array<{ values?: unknown; command?: unknown; as_node?: string | null }> }>): Promise<{ values: unknown; next: string[] }> {
    return this.worker.call<{ values: unknown; next: string[] }>("state.bulk_update", { graph_id: this.graphId, thread_id: threadId, supersteps }).catch(apiError);
  }

  /** Rollback: removes the checkpoints (and their writes) a run wrote on a thread. */
  async deleteRunCheckpoints(threadId: string, runId: string): Promise<void> {
    await this.worker.call("checkpoints.delete_for_run", { thread_id: threadId, run_id: runId });
  }

  draw(config: Json, xray: boolean | number | undefined): Promise<unknown> {
    return this.worker.call("graph.draw", { graph_id: this.graphId, config, xray: xray ?? false }).catch(apiError);
  }

  schemas(config: Json): Promise<Json> {
    return this.worker.call<Json>("graph.schemas", { graph_id: this.graphId, config }).catch(apiError);
  }

  subgraphs(config: Json, namespace: string | undefined, recurse: boolean): Promise<Json> {
    return this.worker.call<Json>("graph.subgraphs", { graph_id: this.graphId, config, namespace: namespace ?? null, recurse }).catch(apiError);
  }
}

export const isPythonGraph = (g: unknown): g is PythonGraph => g instanceof PythonGraph;
