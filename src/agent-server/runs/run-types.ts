import type { AuthContext } from "../auth/custom-auth.ts";
import { AgentError } from "../errors.ts";
import type { Assistant } from "../storage/assistants.ts";
import type { RunChannel } from "./run-channel.ts";
import type { RunOutcome } from "./run-executor.ts";
import type { MultitaskStrategy, Run, RunKwargs } from "./runs.ts";

/** The body of every run-creating endpoint, after validation. */
export interface RunCreate {
  assistant_id: string;
  input?: unknown;
  command?: RunKwargs["command"];
  config?: RunKwargs["config"] | null;
  context?: Record<string, unknown> | null;
  metadata?: Record<string, unknown> | null;
  stream_mode?: string | string[] | null;
  stream_subgraphs?: boolean | null;
  stream_resumable?: boolean | null;
  feedback_keys?: string[] | null;
  interrupt_before?: string[] | "*" | null;
  interrupt_after?: string[] | "*" | null;
  webhook?: string | null;
  multitask_strategy?: MultitaskStrategy | null;
  if_not_exists?: "create" | "reject" | null;
  on_completion?: "delete" | "keep" | null;
  on_disconnect?: "cancel" | "continue" | null;
  checkpoint_id?: string | null;
  checkpoint?: Record<string, unknown> | null;
  after_seconds?: number | null;
  durability?: string | null;
}

/** A run executing in this process. */
export interface ActiveRun {
  run: Run;
  channel: RunChannel;
  abort: AbortController;
  /** Resolves when the run has ended and its row and thread are updated. */
  done: Promise<RunOutcome>;
}

/** A run that ended in this process: its status and how long it executed. */
export interface RunEnded {
  runId: string;
  status: string;
  seconds: number;
}

export type CancelAction = "interrupt" | "rollback";

const REQUEST_HEADERS_SKIPPED = new Set(["x-api-key", "x-tenant-id", "x-service-key", "x-request-id"]);
export const LANGGRAPH_VERSION = "1.7.3";

export const noAssistant = (id: string) =>
  new AgentError(
    404,
    `No assistant found for "${id}". Make sure the assistant ID is for a valid assistant or a valid graph ID.`,
  );

/** What the graph reads about the caller: the interface's key and the ones LangGraph graphs read. */
/** A request's headers as `Headers` iterates them: lower-case names in order, repeated ones joined by ", ". */
export type RequestHeaderPairs = Iterable<readonly [string, string]>;

export function privateConfigurable(
  auth: AuthContext | null,
  headers: RequestHeaderPairs | null,
): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  if (headers) {
    for (const [rawKey, value] of headers) {
      const key = rawKey.toLowerCase();
      if ((key.startsWith("x-") && !REQUEST_HEADERS_SKIPPED.has(key)) || key === "user-agent") out[key] = value;
    }
  }
  if (auth) {
    out.service_auth_user = auth.user;
    out.langgraph_auth_user = auth.user;
    out.langgraph_auth_user_id = auth.user.identity;
    out.langgraph_auth_permissions = auth.scopes;
  }
  return out;
}

export function mergeConfig(
  assistant: Assistant,
  requested: RunKwargs["config"] | null | undefined,
): RunKwargs["config"] {
  const a = assistant.config as RunKwargs["config"];
  const r = requested ?? {};
  const config: RunKwargs["config"] = {
    ...a,
    ...r,
    configurable: { ...(a.configurable ?? {}), ...(r.configurable ?? {}) },
  };
  const tags = [...(a.tags ?? []), ...(r.tags ?? [])];
  if (tags.length) config.tags = [...new Set(tags)];
  return config;
}
