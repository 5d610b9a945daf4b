import type { Hono } from "hono";
import { z } from "zod";
import type { AgentEnv, AgentServerContext } from "../context.ts";
import type { RunEngine } from "../runs/run-engine.ts";
import { INFLIGHT, type RunStatus } from "../runs/runs.ts";
import { findThreadRow } from "../storage/threads.ts";
import { authorize, body, noContent, query, type C } from "./route-helpers.ts";
import { cancelQuery } from "./schemas.ts";

/** `POST /runs/cancel` as the LangGraph server takes it: named runs (of a thread), or every run in a status. */
export const cancelManyBody = z
  .object({
    thread_id: z.string().uuid().nullish(),
    run_ids: z.array(z.string().uuid()).nullish(),
    status: z.enum(["pending", "running", "all"]).nullish(),
  })
  .strict()
  .refine((b) => !!b.status !== !!(b.run_ids?.length || b.thread_id), {
    message: "Either status, or thread_id and/or run_ids, must be given (not both)",
  });

export type CancelManyBody = z.infer<typeof cancelManyBody>;

/** The statuses a bulk cancel by status picks (`all` is every run still in flight). */
export function statusesToCancel(status: CancelManyBody["status"]): RunStatus[] {
  if (status === "pending") return ["pending"];
  if (status === "running") return ["running"];
  return INFLIGHT;
}

/** Bulk cancel: each in-flight run the caller may update (its thread passes `threads:update`) is cancelled; 204. */
export function registerRunCancelRoutes(app: Hono<AgentEnv>, ctx: AgentServerContext, engine: RunEngine): void {
  app.post("/runs/cancel", async (c: C) => {
    const b = await body(c, cancelManyBody);
    const { action } = query(c, cancelQuery);
    let q = ctx.db.selectFrom("agent_runs").select(["run_id", "thread_id"]).where("server_id", "=", ctx.serverId);
    q = q.where("status", "in", statusesToCancel(b.status));
    if (b.thread_id) q = q.where("thread_id", "=", b.thread_id);
    if (b.run_ids?.length) q = q.where("run_id", "in", b.run_ids);
    const byThread = new Map<string, string[]>();
    for (const r of await q.execute()) byThread.set(r.thread_id, [...(byThread.get(r.thread_id) ?? []), r.run_id]);
    for (const [threadId, runIds] of byThread) {
      const filters = await authorize(ctx, c, "threads:update", { thread_id: threadId });
      // Another user's thread is skipped as if it had no runs, never revealed.
      if (!(await findThreadRow(ctx.db, ctx, threadId, filters))) continue;
      await engine.cancel(threadId, runIds, action);
    }
    return noContent(204);
  });
}
