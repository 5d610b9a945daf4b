import type { Hono } from "hono";
import type { AgentEnv, AgentServerContext } from "../context.ts";
import { AgentError } from "../errors.ts";
import type { RunOutcome } from "../runs/run-executor.ts";
import type { ActiveRun, RunCreate, RunEngine } from "../runs/run-engine.ts";
import type { RequestHeaderPairs } from "../runs/run-types.ts";
import { getRunRow, INFLIGHT, listRuns, toRun, type Run } from "../runs/runs.ts";
import { authorize, body, json, noContent, query, uuidAt, type C } from "./route-helpers.ts";
import { cancelQuery, runBatch, runCreate, runListQuery } from "./schemas.ts";
import { getThread } from "../storage/threads.ts";
import { guardController, type GuardedController } from "../../http/web-stream.ts";
import { CORS_HEADERS, sseFrame, toJson } from "../wire.ts";
import { HEARTBEAT, HEARTBEAT_MS } from "./sse-follow.ts";

const encoder = new TextEncoder();

/**
 * An SSE response following a run: its events from `after` on (thread-run streams carry `id:`),
 * ending when the run ends. A client that goes away stops the follow, and cancels the run when
 * `cancelOnDisconnect` says so.
 */
function streamResponse(
  c: C,
  engine: RunEngine,
  runId: string,
  location: string,
  opts: { withIds: boolean; after: number; cancelOnDisconnect: boolean; threadId: string; replay?: boolean },
): Response {
  const stop = new AbortController();
  const onClientGone = () => {
    stop.abort();
    if (opts.cancelOnDisconnect) void engine.cancel(opts.threadId, [runId], "interrupt");
  };
  c.req.raw.signal.addEventListener("abort", onClientGone, { once: true });
  let iterator: AsyncGenerator<{ id: number; event: string; json: string }> | null = null;
  let heartbeat: NodeJS.Timeout | null = null;
  const end = () => {
    if (heartbeat) clearInterval(heartbeat);
    c.req.raw.signal.removeEventListener("abort", onClientGone);
  };
  const stream = new ReadableStream<Uint8Array>({
    start(controller) {
      // A comment line now and then: a proxy's idle timeout does not cut a stream that stays
      // quiet through a long model call (a timer, outside the stream's machinery: guarded).
      const g = guardController(controller);
      heartbeat = setInterval(() => g.enqueue(HEARTBEAT), HEARTBEAT_MS);
      heartbeat.unref();
    },
    async pull(controller) {
      if (!iterator) {
        // An ended run replays its kept events only when the client names where it stopped
        // (`Last-Event-ID`, -1 for the start), as the LangGraph server does for resumable runs.
        // On replicas a run executing elsewhere is followed through Redis.
        iterator = await engine.follow(runId, opts.after, stop.signal, !!opts.replay);
        if (!iterator) {
          end();
          controller.close();
          return;
        }
      }
      const { value, done } = await iterator.next();
      if (done) {
        end();
        controller.close();
      } else controller.enqueue(encoder.encode(sseFrame(value.event, value.json, opts.withIds ? value.id : undefined)));
    },
    cancel() {
      end();
      onClientGone();
    },
  });
  return new Response(stream, {
    status: 200,
    headers: {
      ...CORS_HEADERS,
      "cache-control": "no-cache",
      connection: "keep-alive",
      "content-location": location,
      "content-type": "text/event-stream",
    },
  });
}

/**
 * `/runs/wait`: the final state once the run ends. Like the LangGraph server it answers
 * `text/plain` and, for runs that last more than a second, keeps the connection alive with
 * newlines before the JSON (clients tolerate the leading whitespace).
 */
async function waitResponse(
  c: C,
  engine: RunEngine,
  runId: string,
  location: string,
  final: (active: ActiveRun | null) => Promise<unknown>,
  cancelOnDisconnect: { threadId: string } | null,
): Promise<Response> {
  const headers = { ...CORS_HEADERS, "content-location": location, "content-type": "text/plain; charset=UTF-8" };
  const onClientGone = () => {
    if (cancelOnDisconnect) void engine.cancel(cancelOnDisconnect.threadId, [runId], "interrupt");
  };
  c.req.raw.signal.addEventListener("abort", onClientGone, { once: true });
  const result = engine.waitForEnd(runId).then(final);
  result
    .finally(() => c.req.raw.signal.removeEventListener("abort", onClientGone))
    .catch(() => {
      // The run's own failure is answered by the route; this chain only removes the listener.
    });
  const quick = await Promise.race([result, new Promise<typeof SLOW>((r) => setTimeout(() => r(SLOW), 1000).unref())]);
  if (quick !== SLOW) return new Response(toJson(quick), { status: 200, headers });
  let timer: NodeJS.Timeout | null = null;
  // The result and the keep-alive timer arrive outside the stream's machinery, possibly after the
  // client hung up: the guard makes their writes no-ops then instead of uncaught throws.
  let out: GuardedController<Uint8Array> | null = null;
  const stream = new ReadableStream<Uint8Array>({
    start(controller) {
      const g = (out = guardController(controller));
      g.enqueue(encoder.encode("\n"));
      timer = setInterval(() => g.enqueue(encoder.encode("\n")), 1000);
      result.then(
        (v) => {
          clearInterval(timer!);
          g.enqueue(encoder.encode(toJson(v)));
          g.close();
        },
        (err) => {
          clearInterval(timer!);
          g.enqueue(encoder.encode(toJson({ __error__: { error: "Error", message: (err as Error).message } })));
          g.close();
        },
      );
    },
    cancel() {
      out?.cancelled();
      if (timer) clearInterval(timer);
    },
  });
  return new Response(stream, { status: 200, headers });
}
const SLOW = Symbol("slow");

/**
 * What `/runs/wait` and `/join` answer: the run's last `values` chunk, as the LangGraph server
 * does; a JS graph's run that paused on an interrupt ends with the chunk `{__interrupt__: [...]}`
 * alone, a Python graph's with its state beside `__interrupt__` (as the Python server answers).
 */
function asWaitResult(outcome: RunOutcome): unknown {
  const values = outcome.values;
  if (!outcome.stateWithInterrupt && values && typeof values === "object" && "__interrupt__" in values)
    return { __interrupt__: (values as { __interrupt__: unknown }).__interrupt__ };
  return values;
}

/** A background run as its creation answers it: `pending`, as the LangGraph server's queue reports it. */
const asCreated = (run: Run): Run => ({ ...run, status: "pending" });

/** `Last-Event-ID` as an event number (`-1`: from the start; `<run_id>:<n>` as thread streams write it); null when absent. */
function lastEventId(c: C): number | null {
  const raw = c.req.header("last-event-id")?.trim();
  if (!raw) return null;
  const m = /(?:^|:)(-?\d+)$/.exec(raw);
  return m ? Number(m[1]) : null;
}

/**
 * The request's headers, read from Node's raw header list when Node serves the request: iterating a
 * `Headers` builds the whole object (measured at about 0.7 % of the server's CPU per stateless run).
 */
function requestHeaders(c: C): RequestHeaderPairs {
  const raw = (c.env as { incoming?: { rawHeaders?: string[] } } | undefined)?.incoming?.rawHeaders;
  if (!raw) return c.req.raw.headers;
  const merged = new Map<string, string>();
  for (let i = 0; i + 1 < raw.length; i += 2) {
    const name = raw[i].toLowerCase();
    const prev = merged.get(name);
    merged.set(name, prev === undefined ? raw[i + 1] : `${prev}, ${raw[i + 1]}`);
  }
  return [...merged].sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0));
}

const cancelOnDisconnect = (c: C) => ["1", "true"].includes(c.req.query("cancel_on_disconnect") ?? "");

/** What the run routes share: run creation, final values, access checks. */
interface RunRouteKit {
  ctx: AgentServerContext;
  engine: RunEngine;
  create(
    c: C,
    threadId: string | null,
  ): Promise<{ b: RunCreate; run: Run; active: ActiveRun | null; location: string }>;
  finalValues(threadId: string): (active: ActiveRun | null) => Promise<unknown>;
  visibleThread(c: C, threadId: string): Promise<unknown>;
  runOf(c: C): Promise<{ threadId: string; runId: string; row: NonNullable<Awaited<ReturnType<typeof getRunRow>>> }>;
}

function runRouteKit(ctx: AgentServerContext, engine: RunEngine): RunRouteKit {
  const create = async (c: C, threadId: string | null) => {
    const b = (await body(c, runCreate)) as RunCreate;
    // The engine applies the `threads:create_run` filter to the thread (a hidden thread is a 404).
    const { run, active } = await engine.create(threadId, b, c.get("auth"), requestHeaders(c));
    const location = run.kwargs.temporary ? `/runs/${run.run_id}` : `/threads/${run.thread_id}/runs/${run.run_id}`;
    return { b, run, active, location };
  };

  /** The final values of a thread run (for wait and join): from this process, or from the thread. */
  const finalValues = (threadId: string) => async (active: ActiveRun | null) => {
    if (active) {
      const outcome = await active.done;
      if (outcome.values !== undefined) return asWaitResult(outcome);
    }
    const thread = await getThread(ctx, threadId, undefined).catch(() => null);
    return thread?.values ?? {};
  };

  const visibleThread = async (c: C, threadId: string) =>
    getThread(ctx, threadId, await authorize(ctx, c, "threads:read", { thread_id: threadId }));

  const runOf = async (c: C) => {
    const threadId = uuidAt(c, "thread_id");
    const runId = uuidAt(c, "run_id");
    await visibleThread(c, threadId);
    const row = await getRunRow(ctx.db, ctx, runId, threadId);
    if (!row) throw new AgentError(404, "Run not found");
    return { threadId, runId, row };
  };

  return { ctx, engine, create, finalValues, visibleThread, runOf };
}

/** `/runs/*` and `/threads/{id}/runs/*`: stateless and thread runs, streams, waits, joins, cancels. */
export function registerRunRoutes(app: Hono<AgentEnv>, ctx: AgentServerContext, engine: RunEngine): void {
  const kit = runRouteKit(ctx, engine);
  registerStatelessRuns(app, kit);
  registerThreadRuns(app, kit);
  registerThreadRun(app, kit);
}

/** `/runs/*`: stateless runs (and background runs on new threads). */
function registerStatelessRuns(app: Hono<AgentEnv>, { ctx, engine, create, finalValues }: RunRouteKit): void {
  app.post("/runs/stream", async (c) => {
    const { b, run, location } = await create(c, null);
    return streamResponse(c, engine, run.run_id, location, {
      withIds: !!b.stream_resumable,
      after: -1,
      cancelOnDisconnect: run.kwargs.on_disconnect === "cancel",
      threadId: run.thread_id,
    });
  });

  app.post("/runs/wait", async (c) => {
    const { run, location } = await create(c, null);
    const final = run.kwargs.temporary
      ? async (a: ActiveRun | null) => (a ? (asWaitResult(await a.done) ?? {}) : {})
      : finalValues(run.thread_id);
    return waitResponse(
      c,
      engine,
      run.run_id,
      location,
      final,
      run.kwargs.on_disconnect === "cancel" ? { threadId: run.thread_id } : null,
    );
  });

  app.post("/runs", async (c) => {
    const { run, location } = await create(c, null);
    return json(asCreated(run), 200, { "content-location": location });
  });

  app.post("/runs/batch", async (c) => {
    const items = await body(c, runBatch);
    const out = [];
    for (const b of items)
      out.push(asCreated((await engine.create(null, b as RunCreate, c.get("auth"), requestHeaders(c))).run));
    return json(out);
  });

  app.get("/runs/:run_id/stream", async (c) => {
    const runId = uuidAt(c, "run_id");
    const active = engine.get(runId);
    const row = active ? null : await getRunRow(ctx.db, ctx, runId);
    if (!active && !row) throw new AgentError(404, "Run not found");
    const threadId = active?.run.thread_id ?? row!.thread_id;
    const last = lastEventId(c);
    return streamResponse(c, engine, runId, `/runs/${runId}`, {
      withIds: true,
      after: last ?? -1,
      replay: last !== null,
      cancelOnDisconnect: cancelOnDisconnect(c),
      threadId,
    });
  });
}

/** `/threads/{id}/runs`: a thread's runs, listed and created. */
function registerThreadRuns(
  app: Hono<AgentEnv>,
  { ctx, engine, create, finalValues, visibleThread }: RunRouteKit,
): void {
  app.get("/threads/:thread_id/runs", async (c) => {
    const threadId = uuidAt(c, "thread_id");
    const q = query(c, runListQuery);
    await visibleThread(c, threadId);
    return json(await listRuns(ctx, threadId, q));
  });

  app.post("/threads/:thread_id/runs", async (c) => {
    const { run, location } = await create(c, uuidAt(c, "thread_id"));
    return json(asCreated(run), 200, { "content-location": location });
  });

  app.post("/threads/:thread_id/runs/stream", async (c) => {
    const threadId = uuidAt(c, "thread_id");
    const { run, location } = await create(c, threadId);
    return streamResponse(c, engine, run.run_id, location, {
      withIds: true,
      after: -1,
      cancelOnDisconnect: run.kwargs.on_disconnect === "cancel",
      threadId,
    });
  });

  app.post("/threads/:thread_id/runs/wait", async (c) => {
    const threadId = uuidAt(c, "thread_id");
    const { run, location } = await create(c, threadId);
    return waitResponse(
      c,
      engine,
      run.run_id,
      location,
      finalValues(threadId),
      run.kwargs.on_disconnect === "cancel" ? { threadId } : null,
    );
  });
}

/** `/threads/{id}/runs/{run_id}/*`: one thread run, read, removed, joined, followed, cancelled. */
function registerThreadRun(app: Hono<AgentEnv>, { ctx, engine, finalValues, runOf }: RunRouteKit): void {
  app.get("/threads/:thread_id/runs/:run_id", async (c) => json(toRun((await runOf(c)).row)));

  app.delete("/threads/:thread_id/runs/:run_id", async (c) => {
    const { runId, row } = await runOf(c);
    if (INFLIGHT.includes(row.status as never))
      throw new AgentError(409, "Run is still pending or running; cancel it first");
    await ctx.db.deleteFrom("agent_runs").where("run_id", "=", runId).execute();
    return noContent();
  });

  app.get("/threads/:thread_id/runs/:run_id/join", async (c) => {
    const { threadId, runId } = await runOf(c);
    return json(await finalValues(threadId)(await engine.waitForEnd(runId)));
  });

  app.get("/threads/:thread_id/runs/:run_id/stream", async (c) => {
    // As on the LangGraph server, a join checks access inside the stream: a thread or run the
    // caller cannot see (another user's) is an `error` event on a 200 stream, not an HTTP 404.
    let found: Awaited<ReturnType<typeof runOf>>;
    try {
      found = await runOf(c);
    } catch (err) {
      if (!(err instanceof AgentError) || err.status !== 404) throw err;
      // The message starts with the status, as the LangGraph server writes it (`404: Thread not found`).
      const frame = sseFrame("error", toJson({ error: "Error", message: `404: ${err.message}` }));
      return new Response(frame, {
        status: 200,
        headers: { ...CORS_HEADERS, "cache-control": "no-cache", "content-type": "text/event-stream" },
      });
    }
    const { threadId, runId } = found;
    const last = lastEventId(c);
    return streamResponse(c, engine, runId, `/threads/${threadId}/runs/${runId}`, {
      withIds: true,
      after: last ?? -1,
      replay: last !== null,
      cancelOnDisconnect: cancelOnDisconnect(c),
      threadId,
    });
  });

  app.post("/threads/:thread_id/runs/:run_id/cancel", async (c) => {
    const { threadId, runId, row } = await runOf(c);
    const q = query(c, cancelQuery);
    // Cancelling a run that already ended is not an error (the LangGraph server answers it too).
    if (!INFLIGHT.includes(row.status as never)) return noContent(q.wait === "1" || q.wait === "true" ? 204 : 202);
    await engine.cancel(threadId, [runId], q.action);
    const wait = q.wait === "1" || q.wait === "true";
    if (wait) await engine.get(runId)?.done;
    return noContent(wait ? 204 : 202);
  });
}
