import type { Hono } from "hono";
import type { AgentEnv, AgentServerContext } from "../context.ts";
import { AgentError } from "../errors.ts";
import type { ActiveRun, RunEngine } from "../runs/run-engine.ts";
import type { RunEvent } from "../runs/run-channel.ts";
import { authorize, uuidAt } from "./route-helpers.ts";
import { getThread } from "../storage/threads.ts";
import { guardController } from "../../http/web-stream.ts";
import { CORS_HEADERS, sseFrame } from "../wire.ts";

const encoder = new TextEncoder();
/** A comment line without the blank line that would end an event: clients and proxies see traffic, parsers see nothing. */
const HEARTBEAT = encoder.encode(":\n");
const HEARTBEAT_MS = 15_000;

/** `Last-Event-ID` of a thread stream: `<run_id>:<n>` resumes that run after event n. */
function parseLastEventId(header: string | undefined): { runId: string; after: number } | null {
  const m = header ? /^([0-9a-f-]{36}):(-?\d+)$/i.exec(header) : null;
  return m ? { runId: m[1], after: Number(m[2]) } : null;
}

/**
 * The events of every run of a thread executing in this process, one run after the other: the one
 * running now (from its first event, or after `resume`), then each that starts later, until
 * `signal` aborts. Pushed by the engine when a run starts; nothing polls.
 */
async function* threadEvents(engine: RunEngine, threadId: string, signal: AbortSignal, resume: { runId: string; after: number } | null): AsyncGenerator<{ run: ActiveRun; ev: RunEvent }> {
  const queue: ActiveRun[] = [];
  let wake: (() => void) | null = null;
  const unwatch = engine.watchThread(threadId, (a) => {
    queue.push(a);
    wake?.();
  });
  const onAbort = () => wake?.();
  signal.addEventListener("abort", onAbort);
  const seen = new Set<string>();
  try {
    const current = engine.activeOnThread(threadId);
    if (current) queue.unshift(current);
    while (!signal.aborted) {
      const run = queue.shift();
      if (!run) {
        await new Promise<void>((resolve) => (wake = resolve));
        wake = null;
        continue;
      }
      if (seen.has(run.run.run_id)) continue;
      seen.add(run.run.run_id);
      const after = resume?.runId === run.run.run_id ? resume.after : -1;
      for await (const ev of run.channel.follow(after, signal)) yield { run, ev };
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
    const modes = [...c.req.queries("stream_mode") ?? [], ...(c.req.queries("stream_modes") ?? [])].flatMap((m) => m.split(","));
    const unsupported = modes.filter((m) => m !== "run_modes");
    if (unsupported.length) throw new AgentError(422, `Thread stream mode ${unsupported.join(", ")} is not supported by this server; use run_modes`);
    await getThread(ctx, threadId, await authorize(ctx, c, "threads:read", { thread_id: threadId }));

    const stop = new AbortController();
    const onClientGone = () => stop.abort();
    c.req.raw.signal.addEventListener("abort", onClientGone, { once: true });
    engine.stopSignal.addEventListener("abort", onClientGone, { once: true });
    if (engine.stopSignal.aborted) stop.abort();
    const events = threadEvents(engine, threadId, stop.signal, parseLastEventId(c.req.header("last-event-id")));
    let heartbeat: NodeJS.Timeout | null = null;
    const end = () => {
      if (heartbeat) clearInterval(heartbeat);
      c.req.raw.signal.removeEventListener("abort", onClientGone);
      engine.stopSignal.removeEventListener("abort", onClientGone);
      stop.abort();
    };
    const stream = new ReadableStream<Uint8Array>({
      start(controller) {
        // A timer, outside the stream's machinery: a write after the end must not throw.
        const g = guardController(controller);
        heartbeat = setInterval(() => g.enqueue(HEARTBEAT), HEARTBEAT_MS);
        heartbeat.unref();
      },
      async pull(controller) {
        const { value, done } = await events.next();
        if (done) {
          end();
          controller.close();
        } else controller.enqueue(encoder.encode(sseFrame(value.ev.event, value.ev.json, `${value.run.run.run_id}:${value.ev.id}`)));
      },
      cancel() {
        end();
        void events.return(undefined);
      },
    });
    return new Response(stream, { status: 200, headers: { ...CORS_HEADERS, "cache-control": "no-cache", connection: "keep-alive", "content-type": "text/event-stream" } });
  });
}
