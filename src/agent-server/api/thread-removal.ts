import type { AgentServerContext } from "../context.ts";
import type { RunEngine } from "../runs/run-engine.ts";
import { INFLIGHT } from "../runs/runs.ts";

/**
 * Deletes a thread the caller was authorized to delete: interrupts its in-flight runs and waits for
 * them (a run still writing would recreate checkpoints), then drops its runs, row and checkpoints.
 */
export async function removeThread(ctx: AgentServerContext, engine: RunEngine, threadId: string): Promise<void> {
  const inflight = await ctx.db
    .selectFrom("agent_runs")
    .select("run_id")
    .where("thread_id", "=", threadId)
    .where("status", "in", INFLIGHT)
    .execute();
  await engine.cancel(
    threadId,
    inflight.map((r) => r.run_id),
    "interrupt",
  );
  await Promise.all(inflight.map((r) => engine.get(r.run_id)?.done));
  await ctx.db.transaction().execute(async (trx) => {
    await trx
      .deleteFrom("agent_runs")
      .where("thread_id", "=", threadId)
      .where("server_id", "=", ctx.serverId)
      .execute();
    await trx
      .deleteFrom("agent_threads")
      .where("thread_id", "=", threadId)
      .where("server_id", "=", ctx.serverId)
      .execute();
  });
  await ctx.checkpointer.saver.deleteThread(threadId);
  await ctx.python?.call("checkpoints.delete_thread", { thread_id: threadId });
}
