import type { Hono } from "hono";
import type { AgentEnv, AgentServerContext } from "../context.ts";
import { AgentError } from "../errors.ts";
import type { ActiveRun, RunEngine } from "../runs/run-engine.ts";
import type { RunEvent } from "../runs/run-channel.ts";
import { authorize, uuidAt } from "./route-helpers.ts";
import { getThread } from "../storage/threads.ts";
import { sseFrame } from "../wire.ts";
import { followSse } from "./sse-follow.ts";

/** `Last-Event-ID` of a thread stream: `<run_id>:<n>` resumes that run after event n. */
function parseLastEventId(header: string | undefined): { runId: string; after: number } | null {
  const m = header ? /^([0-9a-f-]{36}):(-?\d+)$/i.exec(header) : null;
  return m ? { runId: m[1], after: Number(m[2]) } : null;
}

/**
 * The events of every run of a thread, one run after the other: the one running now (from its first
 * event, or after `resume`), then each that starts later, until `signal` aborts. Runs starting here
 * are pushed by the engine; on replicas, runs starting on any replica arrive through Redis.
 */
async function* threadEvents(
  engine: RunEngine,
  threadId: string,
  signal: AbortSignal,
  resume: { runId: string; after: number } | null,
): AsyncGenerator<{ runId: string; ev: RunEvent }> {
  // A run that started here is followed through its own channel even if it ended meanwhile.
  const queue: Array<{ runId: string; local?: ActiveRun }> = [];
  let wake: (() => void) | null = null;
  const push = (runId: string, local?: ActiveRun) => {
    queue.push({ runId, local });
    wake?.();
  };
  const unwatch = engine.watchThread(threadId, (a) => push(a.run.run_id, a));
  const onAbort = () => wake?.();
  signal.addEventListener("abort", onAbort);
  const seen = new Set<string>();
  try {
    await engine.streams.watchThread(threadId, signal, push);
    const here = engine.activeOnThread(threadId);
    const current = here?.run.run_id ?? (await engine.runningOnThread(threadId));
    if (current) queue.unshift({ runId: current, local: here });
    while (!signal.aborted) {
      const item = queue.shift();
      if (!item) {
        await new Promise<void>((resolve) => (wake = resolve));
        wake = null;
        continue;
      }
      const { runId, local } = item;
      if (seen.has(runId)) continue;
      seen.add(runId);
      const after = resume?.runId === runId ? resume.after : -1;
      const events = local?.channel.covers(after)
        ? local.channel.follow(after, signal)
        : await engine.follow(runId, after, signal, true);
      if (events) for await (const ev of events) yield { runId, ev };
    }
  } finally {
    unwatch();
    signal.removeEventListener("abort", onAbort);
  }
}

/**
 * `GET /threads/{id}/stream`: follows the thread rather than one run, staying open until the
 * client leaves (as the LangGraph server does). `stream_mode` `run_modes` (the default) is the only
 * mode served: every run's events, each run starting with its `metadata` event.
 */
export function registerThreadStreamRoute(app: Hono<AgentEnv>, ctx: AgentServerContext, engine: RunEngine): void {
  app.get("/threads/:thread_id/stream", async (c) => {
    const threadId = uuidAt(c, "thread_id");
    const modes = [...(c.req.queries("stream_mode") ?? []), ...(c.req.queries("stream_modes") ?? [])].flatMap((m) =>
      m.split(","),
    );
    const unsupported = modes.filter((m) => m !== "run_modes");
    if (unsupported.length)
      throw new AgentError(
        422,
        `Thread stream mode ${unsupported.join(", ")} is not supported by this server; use run_modes`,
      );
    await getThread(ctx, threadId, await authorize(ctx, c, "threads:read", { thread_id: threadId }));

    const resume = parseLastEventId(c.req.header("last-event-id"));
    return followSse(
      c.req.raw,
      engine.stopSignal,
      (signal) => threadEvents(engine, threadId, signal, resume),
      (v) => sseFrame(v.ev.event, v.ev.json, `${v.runId}:${v.ev.id}`),
    );
  });
}
