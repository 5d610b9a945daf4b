import crypto from "node:crypto";
import path from "node:path";
import { readSetting } from "../config/index.ts";
import type { AgentServerContext } from "./context.ts";
import type { AgentProject } from "./project/project.ts";
import { pythonStoreBatch, type PythonRuntime, type PythonStoreOp } from "./python/index.ts";
import type { AgentServerOptions } from "./server.ts";
import type { ProjectCode } from "./server-graphs.ts";
import { openCheckpointer, type Checkpointer } from "./storage/checkpointer.ts";
import { parseJson } from "./storage/json-columns.ts";
import { AgentStore } from "./storage/store.ts";

export function defaultServerId(project: AgentProject): string {
  const hash = crypto.createHash("sha256").update(project.configFile).digest("hex").slice(0, 12);
  return `project:${path.basename(project.dir)}:${hash}`;
}

export interface OpenedContext {
  ctx: AgentServerContext;
  checkpointer: Checkpointer;
  leaseMs: number;
  tickMs: number;
}

/** Opens the checkpointer and the store and gathers what every route and run of this server uses. */
export async function openServerContext(
  project: AgentProject,
  options: AgentServerOptions,
  code: ProjectCode,
): Promise<OpenedContext> {
  const { graphs, failures, customAuth, userApp, ui, schemas, python, index } = code;
  const leaseMs = options.leaseMs ?? readSetting("WHARF_RUN_LEASE_MS");
  const checkpointer: Checkpointer = await openCheckpointer({
    databaseUrl: options.databaseUrl,
    home: options.home,
    pgSchema: options.pgSchema,
    leaseMs,
  });
  const serverId = options.serverId ?? defaultServerId(project);
  const tickMs = options.cronTickMs ?? readSetting("WHARF_CRON_TICK_MS");
  const ctx: AgentServerContext = {
    serverId,
    db: options.store.db,
    dialect: options.store.dialect,
    graphs,
    python: python?.worker ?? null,
    graphFailures: failures,
    checkpointer,
    store: new AgentStore(options.store.db, options.store.dialect, serverId, { index, ttl: project.store.ttl }),
    customAuth,
    box: options.box,
    authenticate: options.authenticate,
    open: options.open ?? false,
    log: options.log,
    http: project.http,
    userApp,
    pythonApp: python?.http ?? null,
    ui,
    schemas,
  };
  connectPython(ctx, python);
  return { ctx, checkpointer, leaseMs, tickMs };
}

function connectPython(ctx: AgentServerContext, python: PythonRuntime | null): void {
  // Python graphs read and write the same store as the API and the JS graphs.
  python?.worker.serve("store.batch", (ops) => pythonStoreBatch(ctx.store, ops as PythonStoreOp[]));
  // A Python graph's checkpoints carry its thread's metadata, as on the Python server.
  const threadMetadata = async (threadId: string) => {
    const row = await ctx.db
      .selectFrom("agent_threads")
      .select("metadata")
      .where("thread_id", "=", threadId)
      .where("server_id", "=", ctx.serverId)
      .executeTakeFirst();
    return parseJson<Record<string, unknown>>(row?.metadata, {});
  };
  for (const g of python?.graphs.values() ?? []) g.threadMetadata = threadMetadata;
}
