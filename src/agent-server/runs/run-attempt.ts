import type { RunControl } from "@langchain/langgraph";
import type { AgentServerContext } from "../context.ts";
import type { Assistant } from "../storage/assistants.ts";
import { getAssistant } from "../storage/assistants.ts";
import { isPythonGraph, type PythonGraph } from "../python/index.ts";
import { executeGraph, serializeError, type RunOutcome } from "./run-executor.ts";
import type { RunKwargs, RunPrivate } from "./runs.ts";
import { noAssistant, type ActiveRun } from "./run-types.ts";
import { graphRunConfig, runConfigurable } from "./run-config.ts";

/** What executing a run's graph needs of the run engine. */
export interface AttemptHost {
  ctx: AgentServerContext;
  /** Drain controls of the runs executing here: a Python run replaces LangGraph's with its own. */
  controls: Map<string, Pick<RunControl, "requestDrain">>;
  /** The checkpointer as this run writes through it (fenced on replicas). */
  fencedSaver<S extends object>(saver: S, runId: string, onLost: () => void): S;
  apiUrl?: () => string;
}

/** How one execution of a run's graph ended, and what a rollback needs. */
export interface Attempt {
  outcome: RunOutcome;
  /** The thread's checkpoint before the run (a rollback returns to it); undefined: not read. */
  rollbackTo: string | null | undefined;
  python: PythonGraph | null;
}

/** The outcome of a run whose graph stopped because the run was aborted for `reason`. */
function abortedOutcome(reason: string): RunOutcome {
  return reason === "fenced"
    ? { status: "error", threadStatus: "error", fenced: true }
    : reason === "shutdown"
      ? {
          status: "error",
          threadStatus: "error",
          error: { error: "Error", message: "the agent server stopped during the run" },
        }
      : { status: "interrupted", threadStatus: "idle" };
}

/** Executes the run's graph (JS here, or a Python graph in its worker) to its outcome. */
export async function runAttempt(
  host: AttemptHost,
  active: ActiveRun,
  kwargs: RunKwargs,
  priv: RunPrivate,
  knownAssistant: Assistant | null,
  control: RunControl,
): Promise<Attempt> {
  const { run, channel, abort } = active;
  const ctx = host.ctx;
  const stateful = !kwargs.temporary;
  let outcome: RunOutcome;
  let rollbackTo: string | null | undefined = undefined;
  let python: PythonGraph | null = null;
  try {
    const assistant =
      knownAssistant ?? (await getAssistant(ctx, run.assistant_id, undefined, () => noAssistant(run.assistant_id)));
    const loaded = ctx.graphs.get(assistant.graph_id);
    if (!loaded) throw new Error(`graph "${assistant.graph_id}" is not part of this server`);
    const configurable = runConfigurable(run, kwargs, priv, assistant);
    const runConfig = graphRunConfig(run, kwargs, configurable, assistant, ctx.store, host.apiUrl?.());
    if (isPythonGraph(loaded)) {
      // The Python worker executes and checkpoints; its events arrive serialised. It drains
      // through langgraph's Python RunControl.
      python = loaded;
      const graph = loaded;
      host.controls.set(run.run_id, {
        requestDrain: () =>
          void graph
            .drain(run.run_id)
            .catch((err) => ctx.log.warn({ err, runId: run.run_id }, "cannot ask a Python run to drain")),
      });
      outcome = await loaded.execute(kwargs, runConfig, channel, abort.signal, stateful);
    } else {
      const graph = await loaded.get(
        { configurable, context: kwargs.context },
        stateful
          ? host.fencedSaver(ctx.checkpointer.saver, run.run_id, () => abort.signal.aborted || abort.abort("fenced"))
          : null,
      );
      if (stateful) {
        const tuple = await ctx.checkpointer.saver.getTuple({
          configurable: { thread_id: run.thread_id, checkpoint_ns: "" },
        });
        rollbackTo = tuple?.config.configurable?.checkpoint_id ?? null;
      }
      outcome = await executeGraph(graph, kwargs, { ...runConfig, control }, channel, abort.signal, stateful);
    }
  } catch (err) {
    if (abort.signal.aborted) {
      outcome = abortedOutcome(String(abort.signal.reason ?? "interrupt"));
    } else {
      const error = serializeError(err);
      ctx.log.warn({ err, runId: run.run_id }, "run failed before its graph started");
      channel.push("error", error);
      outcome = { status: "error", threadStatus: "error", values: { __error__: error }, error };
    }
  }
  return { outcome, rollbackTo, python };
}
