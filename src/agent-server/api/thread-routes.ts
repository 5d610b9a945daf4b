import type { Hono } from "hono";
import { BaseLangGraphError } from "@langchain/langgraph";
import type { RunnableGraph } from "../project/graphs.ts";
import { toCommand } from "../runs/run-executor.ts";
import { nowIso } from "../../store/database.ts";
import type { AgentEnv, AgentServerContext } from "../context.ts";
import { AgentError } from "../errors.ts";
import { asJson } from "../storage/json-columns.ts";
import type { RunEngine } from "../runs/run-engine.ts";
import { removeThread } from "./thread-removal.ts";
import { authorize, body, json, noContent, query, uuidAt, type C } from "./route-helpers.ts";
import {
  history,
  stateAtCheckpoint,
  statePatch,
  stateUpdate,
  threadCount,
  threadCreate,
  threadListQuery,
  threadPatch,
  threadSearch,
} from "./schemas.ts";
import { isPythonGraph } from "../python/index.ts";
import { copyCheckpoints, emptyState, graphForThread, toThreadState } from "../storage/thread-state.ts";
import { toJson } from "../wire.ts";
import { countThreads, createThread, getThread, patchThread, searchThreads, type Thread } from "../storage/threads.ts";

/** `/threads/*`: threads, their state (through the checkpointer), history and copies. */
/** LangGraph's own errors about an update (unknown node, ambiguous update, bad values) are the caller's: a 400. */
async function asBadInput<T>(fn: () => Promise<T>): Promise<T> {
  try {
    return await fn();
  } catch (err) {
    if (err instanceof BaseLangGraphError || (err as Error)?.name === "InvalidUpdateError")
      throw new AgentError(400, `${(err as Error).name}: ${(err as Error).message}`, {}, { cause: err });
    throw err;
  }
}

export function registerThreadRoutes(app: Hono<AgentEnv>, ctx: AgentServerContext, engine: RunEngine): void {
  registerThreadCreate(app, ctx);
  registerThreadCrud(app, ctx, engine);
  registerThreadCopy(app, ctx);
  registerThreadStateReads(app, ctx);
  registerThreadStateWrites(app, ctx);
  registerThreadHistory(app, ctx);
}

/** The thread, if the caller may read it. */
async function readable(ctx: AgentServerContext, c: C, threadId: string): Promise<Thread> {
  return getThread(ctx, threadId, await authorize(ctx, c, "threads:read", { thread_id: threadId }));
}

/** The thread row's copy of its latest state (what GET /threads and search return). */
async function recordState(ctx: AgentServerContext, threadId: string, graph: RunnableGraph): Promise<void> {
  await recordValues(ctx, threadId, await graph.getState({ configurable: { thread_id: threadId } }));
}

async function recordValues(
  ctx: AgentServerContext,
  threadId: string,
  state: { values?: unknown; next?: unknown[] },
): Promise<void> {
  await ctx.db
    .updateTable("agent_threads")
    .set({
      state_values: toJson(state.values ?? {}, false),
      updated_at: nowIso(),
      status: (state.next?.length ?? 0) > 0 ? "interrupted" : "idle",
    })
    .where("thread_id", "=", threadId)
    .execute();
}

function registerThreadCreate(app: Hono<AgentEnv>, ctx: AgentServerContext): void {
  app.post("/threads", async (c) => {
    const b = await body(c, threadCreate, {});
    const value = { ...b, metadata: { ...(b.metadata ?? {}) } };
    const filters = await authorize(ctx, c, "threads:create", value);
    const thread = await createThread(ctx, value, filters);
    if (!b.supersteps) return json(thread);
    // Supersteps are written through the thread's graph, as `bulkUpdateState` (one checkpoint each).
    const graph = await graphForThread(ctx, thread);
    if (!graph)
      throw new AgentError(
        422,
        "supersteps need the thread's graph: pass graph_id in its metadata (threads.create({graphId}))",
      );
    if (isPythonGraph(graph)) {
      await recordValues(ctx, thread.thread_id, await graph.bulkUpdate(thread.thread_id, b.supersteps as never));
      return json(await getThread(ctx, thread.thread_id, undefined));
    }
    await asBadInput(() =>
      graph.bulkUpdateState!(
        { configurable: { thread_id: thread.thread_id } },
        b.supersteps!.map((s) => ({
          updates: s.updates.map((u) => ({
            values: u.command ? toCommand(u.command as never) : u.values,
            asNode: u.as_node,
          })),
        })),
      ),
    );
    await recordState(ctx, thread.thread_id, graph);
    return json(await getThread(ctx, thread.thread_id, undefined));
  });
}

function registerThreadCrud(app: Hono<AgentEnv>, ctx: AgentServerContext, engine: RunEngine): void {
  const search = async (c: C, q: Parameters<typeof searchThreads>[1]) => {
    const filters = await authorize(ctx, c, "threads:search", q);
    const { items, total } = await searchThreads(ctx, q, filters);
    return json(items, 200, { "x-pagination-total": String(total) });
  };
  app.post("/threads/search", async (c) => search(c, await body(c, threadSearch, {})));
  // The custom-auth flow of the interface lists a user's threads with GET /threads.
  app.get("/threads", async (c) => search(c, query(c, threadListQuery)));

  app.post("/threads/count", async (c) => {
    const b = await body(c, threadCount, {});
    const filters = await authorize(ctx, c, "threads:search", b);
    return json(await countThreads(ctx, b, filters));
  });

  app.get("/threads/:thread_id", async (c) => json(await readable(ctx, c, uuidAt(c, "thread_id"))));

  app.patch("/threads/:thread_id", async (c) => {
    const threadId = uuidAt(c, "thread_id");
    const b = await body(c, threadPatch, {});
    const value = { thread_id: threadId, metadata: { ...(b.metadata ?? {}) } };
    const filters = await authorize(ctx, c, "threads:update", value);
    return json(await patchThread(ctx, threadId, value.metadata, filters));
  });

  app.delete("/threads/:thread_id", async (c) => {
    const threadId = uuidAt(c, "thread_id");
    const filters = await authorize(ctx, c, "threads:delete", { thread_id: threadId });
    await getThread(ctx, threadId, filters);
    await removeThread(ctx, engine, threadId);
    return noContent();
  });
}

function registerThreadCopy(app: Hono<AgentEnv>, ctx: AgentServerContext): void {
  app.post("/threads/:thread_id/copy", async (c) => {
    const threadId = uuidAt(c, "thread_id");
    // A source that is missing or not the caller's is a 409 (the same for both, so existence does
    // not leak), as the LangGraph server answers a copy.
    const source = await readable(ctx, c, threadId).catch((err: unknown) => {
      throw err instanceof AgentError && err.status === 404
        ? new AgentError(409, `Thread with ID ${threadId} not found`, {}, { cause: err })
        : err;
    });
    const value = { thread_id: undefined as string | undefined, metadata: { ...source.metadata } };
    await authorize(ctx, c, "threads:create", value);
    const copy = await createThread(ctx, { metadata: value.metadata }, undefined);
    // On PostgreSQL both runtimes' savers share the checkpoint tables, and neither reads the other's
    // serialisation: a thread's checkpoints are copied by the runtime of its graph.
    const pyThread = ctx.python ? isPythonGraph(ctx.graphs.get(String(source.metadata.graph_id))) : false;
    if (!pyThread) await copyCheckpoints(ctx, threadId, copy.thread_id);
    if (ctx.python && (pyThread || ctx.dialect !== "postgres"))
      await ctx.python.call("checkpoints.copy_thread", { from: threadId, to: copy.thread_id });
    const set = {
      status: source.status === "busy" ? "idle" : source.status,
      state_values: source.values !== undefined ? asJson(source.values) : null,
      interrupts: source.interrupts !== undefined ? asJson(source.interrupts) : null,
      updated_at: nowIso(),
    };
    await ctx.db.updateTable("agent_threads").set(set).where("thread_id", "=", copy.thread_id).execute();
    return json(await getThread(ctx, copy.thread_id, undefined));
  });
}

function registerThreadStateReads(app: Hono<AgentEnv>, ctx: AgentServerContext): void {
  const stateAt = async (c: C, threadId: string, checkpoint: Record<string, unknown>, subgraphs: boolean) => {
    const thread = await readable(ctx, c, threadId);
    const graph = await graphForThread(ctx, thread);
    if (!graph) return json(emptyState(threadId));
    if (isPythonGraph(graph)) return json((await graph.state(threadId, checkpoint, subgraphs)) ?? emptyState(threadId));
    const snapshot = await graph.getState({ configurable: { ...checkpoint, thread_id: threadId } }, { subgraphs });
    return json(snapshot?.config ? toThreadState(snapshot) : emptyState(threadId));
  };
  const truthy = (v: string | undefined) => v === "true" || v === "1";

  app.get("/threads/:thread_id/state", async (c) =>
    stateAt(c, uuidAt(c, "thread_id"), {}, truthy(c.req.query("subgraphs"))),
  );
  app.post("/threads/:thread_id/state/checkpoint", async (c) => {
    const b = await body(c, stateAtCheckpoint);
    return stateAt(c, uuidAt(c, "thread_id"), b.checkpoint, b.subgraphs ?? false);
  });
  app.get("/threads/:thread_id/state/:checkpoint_id", async (c) =>
    stateAt(
      c,
      uuidAt(c, "thread_id"),
      { checkpoint_id: c.req.param("checkpoint_id") },
      truthy(c.req.query("subgraphs")),
    ),
  );
}

function registerThreadStateWrites(app: Hono<AgentEnv>, ctx: AgentServerContext): void {
  app.post("/threads/:thread_id/state", async (c) => {
    const threadId = uuidAt(c, "thread_id");
    const b = await body(c, stateUpdate);
    const value = { thread_id: threadId, metadata: {} as Record<string, unknown> };
    const filters = await authorize(ctx, c, "threads:update", value);
    const thread = await getThread(ctx, threadId, filters);
    if (thread.status === "busy")
      throw new AgentError(409, "Thread is busy with a run; update its state when the run has ended");
    const graph = await graphForThread(ctx, thread);
    if (!graph)
      throw new AgentError(400, "Thread has no graph_id in its metadata; create it with a graph id or run it once");
    if (isPythonGraph(graph)) {
      const updated = await graph.update(
        threadId,
        { ...(b.checkpoint ?? {}), ...(b.checkpoint_id ? { checkpoint_id: b.checkpoint_id } : {}) },
        b.values,
        b.as_node ?? null,
      );
      await recordValues(ctx, threadId, updated);
      return json({
        checkpoint: updated.checkpoint,
        configurable: updated.checkpoint,
        checkpoint_id: updated.checkpoint.checkpoint_id ?? null,
      });
    }
    const config = await asBadInput(() =>
      graph.updateState(
        {
          configurable: {
            ...(b.checkpoint ?? {}),
            ...(b.checkpoint_id ? { checkpoint_id: b.checkpoint_id } : {}),
            thread_id: threadId,
          },
        },
        b.values,
        b.as_node ?? undefined,
      ),
    );
    await recordState(ctx, threadId, graph);
    return json({ checkpoint: config.configurable });
  });

  app.patch("/threads/:thread_id/state", async (c) => {
    const threadId = uuidAt(c, "thread_id");
    const b = await body(c, statePatch);
    const filters = await authorize(ctx, c, "threads:update", { thread_id: threadId, metadata: b.metadata });
    await getThread(ctx, threadId, filters);
    // Checkpoint metadata is immutable in the official checkpointers; the thread's metadata is patched.
    await patchThread(ctx, threadId, b.metadata, filters);
    return noContent(200);
  });
}

function registerThreadHistory(app: Hono<AgentEnv>, ctx: AgentServerContext): void {
  const historyOf = async (
    c: C,
    threadId: string,
    h: {
      limit: number;
      before?: unknown;
      metadata?: Record<string, unknown> | null;
      checkpoint?: Record<string, unknown> | null;
    },
  ) => {
    const thread = await readable(ctx, c, threadId);
    const graph = await graphForThread(ctx, thread);
    if (!graph) return json([]);
    if (isPythonGraph(graph))
      return json(
        await graph.history(threadId, {
          checkpoint: h.checkpoint,
          limit: h.limit,
          before: h.before,
          filter: h.metadata,
        }),
      );
    const before =
      typeof h.before === "string"
        ? { configurable: { checkpoint_id: h.before } }
        : h.before
          ? { configurable: h.before }
          : undefined;
    const out: unknown[] = [];
    for await (const s of graph.getStateHistory(
      { configurable: { ...(h.checkpoint ?? {}), thread_id: threadId } },
      { limit: h.limit, before, filter: h.metadata ?? undefined },
    )) {
      out.push(toThreadState(s));
    }
    return json(out);
  };
  app.post("/threads/:thread_id/history", async (c) =>
    historyOf(c, uuidAt(c, "thread_id"), await body(c, history, {})),
  );
  app.get("/threads/:thread_id/history", async (c) => {
    const limit = Number(c.req.query("limit") ?? 10);
    return historyOf(c, uuidAt(c, "thread_id"), {
      limit: Number.isInteger(limit) && limit > 0 ? Math.min(limit, 1000) : 10,
      before: c.req.query("before"),
    });
  });
}
