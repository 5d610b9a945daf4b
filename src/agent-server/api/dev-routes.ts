import type { Hono } from "hono";
import { z } from "zod";
import type { AgentEnv, AgentServerContext } from "../context.ts";
import type { RunEngine } from "../runs/run-engine.ts";
import { INFLIGHT } from "../runs/runs.ts";
import { systemAssistantId } from "../storage/assistants.ts";
import { body, json } from "./route-helpers.ts";
import { removeThread } from "./thread-removal.ts";

const truncateBody = z.looseObject({
  runs: z.boolean().optional(),
  threads: z.boolean().optional(),
  assistants: z.boolean().optional(),
  checkpointer: z.boolean().optional(),
  store: z.boolean().optional(),
});

/**
 * `POST /internal/truncate` of the LangGraph dev server (its test suites reset the server with it
 * between tests): empties runs, threads, user-made assistants, checkpoints and the store. Only
 * registered on an open server (`wharf dev`, loopback only), where any caller may delete all of
 * it through the API anyway.
 */
export function registerDevRoutes(app: Hono<AgentEnv>, ctx: AgentServerContext, engine: RunEngine): void {
  app.post("/internal/truncate", async (c) => {
    const flags = await body(c, truncateBody, {});
    const server = ctx.serverId;
    const threadIds = (
      await ctx.db.selectFrom("agent_threads").select("thread_id").where("server_id", "=", server).execute()
    ).map((r) => r.thread_id);
    if (flags.threads) for (const id of threadIds) await removeThread(ctx, engine, id);
    else if (flags.checkpointer) for (const id of threadIds) await ctx.checkpointer.saver.deleteThread(id);
    if (flags.runs)
      await ctx.db
        .deleteFrom("agent_runs")
        .where("server_id", "=", server)
        .where("status", "not in", INFLIGHT)
        .execute();
    if (flags.assistants) {
      // The graphs' own assistants stay (`not in` of no ids would be invalid SQL: a sentinel id).
      const system = [...ctx.graphs.keys()].map(systemAssistantId).concat("-");
      await ctx.db.transaction().execute(async (trx) => {
        await trx
          .deleteFrom("agent_crons")
          .where("server_id", "=", server)
          .where("assistant_id", "not in", system)
          .execute();
        await trx
          .deleteFrom("agent_assistant_versions")
          .where("server_id", "=", server)
          .where("assistant_id", "not in", system)
          .execute();
        await trx
          .deleteFrom("agent_assistants")
          .where("server_id", "=", server)
          .where("assistant_id", "not in", system)
          .execute();
      });
    }
    if (flags.store) {
      await ctx.db.deleteFrom("agent_store_vectors").where("server_id", "=", server).execute();
      await ctx.db.deleteFrom("agent_store_items").where("server_id", "=", server).execute();
    }
    return json({ ok: true });
  });
}
