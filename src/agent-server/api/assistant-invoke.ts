import type { AgentServerContext } from "../context.ts";
import type { AuthContext } from "../auth/custom-auth.ts";
import type { RunEngine } from "../runs/run-engine.ts";
import { searchAssistants, type Assistant } from "../storage/assistants.ts";
import { authorize, type C } from "./route-helpers.ts";
import { toPlain } from "../wire.ts";

/** One event of a run as the protocol adapters (MCP, A2A) see it: the mode and the plain chunk. */
export interface InvokeEvent {
  event: string;
  data: unknown;
}

export interface InvokeResult {
  runId: string;
  /** `interrupted` when the graph paused for input (an interrupt), `error`, or `success`. */
  status: string;
  values: Record<string, unknown>;
  error: { error: string; message: string } | null;
}

export interface InvokeTarget {
  assistantId: string;
  /** A thread to run on (created when missing), or null for a stateless run. */
  threadId: string | null;
  input: unknown;
}

/**
 * Runs an assistant as `POST /runs/wait` (or `/threads/{id}/runs/wait`) would, as the caller
 * (their `threads:create_run` handler applies), handing each `updates` chunk to `onEvent` as it
 * comes. `onStart` hears the run once it is created.
 */
export async function invokeAssistant(
  engine: RunEngine,
  auth: AuthContext | null,
  headers: Headers,
  target: InvokeTarget,
  onEvent: ((e: InvokeEvent) => void | Promise<void>) | null,
  signal?: AbortSignal,
  onStart?: (runId: string, threadId: string) => void | Promise<void>,
): Promise<InvokeResult> {
  const body = {
    assistant_id: target.assistantId,
    input: target.input,
    stream_mode: ["updates", "values"],
    ...(target.threadId ? { if_not_exists: "create" as const } : {}),
  };
  const { run } = await engine.create(target.threadId, body, auth, headers);
  await onStart?.(run.run_id, run.thread_id);
  const active = await engine.whenStarted(run.run_id, signal);
  if (!active)
    return {
      runId: run.run_id,
      status: "error",
      values: {},
      error: { error: "Error", message: "the run did not start" },
    };
  const onAbort = () => void engine.cancel(run.thread_id, [run.run_id], "interrupt");
  signal?.addEventListener("abort", onAbort, { once: true });
  try {
    if (onEvent) {
      for await (const e of active.channel.follow(-1, signal)) {
        if (e.event === "updates") await onEvent({ event: e.event, data: JSON.parse(e.json) });
      }
    }
    const outcome = await active.done;
    const values = toPlain<Record<string, unknown>>(outcome.values ?? {});
    return {
      runId: run.run_id,
      status: "__interrupt__" in values ? "interrupted" : outcome.status,
      values,
      error: outcome.error ?? null,
    };
  } finally {
    signal?.removeEventListener("abort", onAbort);
  }
}

/** The assistants the caller may see (their `assistants:search` filter), up to `limit`. */
export async function visibleAssistants(ctx: AgentServerContext, c: C, limit = 1000): Promise<Assistant[]> {
  const filters = await authorize(ctx, c, "assistants:search", { limit, offset: 0 });
  return (await searchAssistants(ctx, { limit, offset: 0 }, filters)).items;
}

/** The text a chat client shows for a run's output: the last message's content when the state has messages, else the state as JSON. */
export function outputText(values: Record<string, unknown>): string {
  const messages = values.messages;
  if (Array.isArray(messages) && messages.length) {
    const content = (messages.at(-1) as { content?: unknown }).content;
    if (typeof content === "string") return content;
    if (Array.isArray(content))
      return content
        .map((p) =>
          typeof p === "string"
            ? p
            : typeof (p as { text?: unknown }).text === "string"
              ? (p as { text: string }).text
              : "",
        )
        .join("");
  }
  return JSON.stringify(values);
}
