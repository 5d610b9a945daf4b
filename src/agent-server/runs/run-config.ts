import type { Assistant } from "../storage/assistants.ts";
import { LANGGRAPH_VERSION } from "./run-types.ts";
import type { Run, RunKwargs, RunPrivate } from "./runs.ts";

/** The configurable a run's graph sees: the request's, the caller's, then the run's identity. */
export function runConfigurable(
  run: Run,
  kwargs: RunKwargs,
  priv: RunPrivate,
  assistant: Assistant,
): Record<string, unknown> {
  return {
    ...kwargs.config.configurable,
    ...priv.configurable,
    run_id: run.run_id,
    thread_id: run.thread_id,
    graph_id: assistant.graph_id,
    assistant_id: assistant.assistant_id,
  };
}

/** The LangGraph config a run's graph is invoked with. */
export function graphRunConfig(
  run: Run,
  kwargs: RunKwargs,
  configurable: Record<string, unknown>,
  assistant: Assistant,
  store: unknown,
  apiUrl: string | undefined,
): Record<string, unknown> {
  const { configurable: _c, tags, recursion_limit, ...restConfig } = kwargs.config;
  return {
    ...restConfig,
    configurable,
    tags,
    recursionLimit: recursion_limit,
    context: kwargs.context,
    runId: run.run_id,
    // The LangGraph store, read by nodes as `config.store` or `getStore()`.
    store,
    metadata: {
      ...assistant.metadata,
      ...run.metadata,
      // Also written into each checkpoint's metadata (history filters by run).
      run_id: run.run_id,
      graph_id: assistant.graph_id,
      assistant_id: assistant.assistant_id,
      run_attempt: kwargs.attempt ?? 1,
      langgraph_version: LANGGRAPH_VERSION,
      langgraph_plan: "developer",
      langgraph_host: "self-hosted",
      langgraph_api_url: apiUrl,
    },
  };
}
