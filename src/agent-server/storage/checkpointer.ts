import fs from "node:fs";
import path from "node:path";
import SQLite from "better-sqlite3";
import type { BaseCheckpointSaver } from "@langchain/langgraph";
import { SqliteSaver } from "@langchain/langgraph-checkpoint-sqlite";
import { PostgresSaver } from "@langchain/langgraph-checkpoint-postgres";
import pg from "pg";
import { surviveClientErrors } from "../../store/pg-client-errors.ts";
import { fencingPool, idleInTransactionMs } from "./checkpoint-fence.ts";

export interface Checkpointer {
  saver: BaseCheckpointSaver & { deleteThread(threadId: string): Promise<void> };
  location: string;
  /** Deletes a thread's checkpoints newer than one (ids are time-ordered UUIDv6), for rollbacks. */
  deleteAfter(threadId: string, checkpointId: string): Promise<void>;
  close(): Promise<void>;
}

/** Run-config metadata keys that are LangGraph's per-task bookkeeping, not the run's. */
const NOT_RUN_METADATA = new Set([
  "thread_id",
  "checkpoint_id",
  "checkpoint_ns",
  "checkpoint_map",
  "langgraph_step",
  "langgraph_node",
  "langgraph_triggers",
  "langgraph_path",
  "langgraph_checkpoint_ns",
]);

/**
 * Checkpoint metadata as the LangGraph server writes it: the run's config metadata (`run_id`,
 * `graph_id`, `assistant_id`, the run's own metadata, …) under what LangGraph records (`source`,
 * `step`, `parents`), so history can be filtered by run.
 */
function withRunMetadata<S extends BaseCheckpointSaver>(saver: S): S {
  const put = saver.put.bind(saver);
  saver.put = (config, checkpoint, metadata, newVersions) => {
    const extra: Record<string, unknown> = {};
    for (const [k, v] of Object.entries((config.metadata ?? {}) as Record<string, unknown>))
      if (!k.startsWith("__") && !NOT_RUN_METADATA.has(k) && v !== undefined) extra[k] = v;
    return put(config, checkpoint, { ...extra, ...metadata } as typeof metadata, newVersions);
  };
  return saver;
}

/**
 * `PostgresSaver.setup()` begins with `CREATE SCHEMA IF NOT EXISTS`, which PostgreSQL refuses to a
 * role without CREATE on the database even when the schema exists (the privilege is checked
 * first): a deployment's role owns its schema and nothing more. When the schema exists, setup
 * runs on a connection that answers that one statement itself.
 */
async function setupSaver(
  saver: PostgresSaver,
  pool: pg.Pool,
  schema: string | undefined,
  saverPool: pg.Pool,
): Promise<void> {
  const exists = schema ? (await pool.query("SELECT 1 FROM pg_namespace WHERE nspname = $1", [schema])).rowCount : 0;
  if (!exists) return saver.setup();
  const client = await pool.connect();
  const skipped = /^CREATE SCHEMA IF NOT EXISTS /i;
  const facade = {
    query: (text: string, values?: unknown[]) =>
      skipped.test(text) ? Promise.resolve({ rows: [], rowCount: 0 }) : client.query(text, values),
    release: () => client.release(),
  };
  // setup() is the only user of `pool.connect()` here; every other call goes to the real pool.
  const holder = saver as unknown as { pool: pg.Pool };
  holder.pool = { connect: async () => facade } as unknown as pg.Pool;
  try {
    await saver.setup();
  } finally {
    holder.pool = saverPool;
  }
}

/**
 * Graph checkpoints through the official LangGraph checkpointers: PostgreSQL when the platform
 * database is PostgreSQL (same server, optional schema), otherwise a SQLite file under the home
 * folder, opened in WAL mode so several agent-server processes can share it.
 */
export async function openCheckpointer(options: {
  databaseUrl: string | null;
  home: string;
  pgSchema?: string;
  leaseMs?: number;
}): Promise<Checkpointer> {
  const url = options.databaseUrl;
  if (url && /^postgres(ql)?:\/\//.test(url)) {
    // With run leases, a frozen process's open checkpoint transaction is ended before its run can be
    // taken over (see checkpoint-fence.ts).
    const idle = options.leaseMs
      ? `-c idle_in_transaction_session_timeout=${idleInTransactionMs(options.leaseMs)}`
      : undefined;
    const pool = new pg.Pool({ connectionString: url, max: 10, options: idle });
    // A session the server ended (idle in a transaction past the timeout, while this process was
    // frozen): its next query fails and the saver rolls back; not a crash.
    surviveClientErrors(pool);
    const saverPool = fencingPool(pool, options.pgSchema);
    const saver = withRunMetadata(
      new PostgresSaver(saverPool, undefined, options.pgSchema ? { schema: options.pgSchema } : undefined),
    );
    await setupSaver(saver, pool, options.pgSchema, saverPool);
    const schema = options.pgSchema ? `"${options.pgSchema.replace(/"/g, "")}".` : "";
    return {
      saver,
      location: "postgres",
      deleteAfter: async (threadId, checkpointId) => {
        for (const table of ["checkpoint_writes", "checkpoints"]) {
          await pool.query(`DELETE FROM ${schema}${table} WHERE thread_id = $1 AND checkpoint_id > $2`, [
            threadId,
            checkpointId,
          ]);
        }
      },
      close: () => pool.end(),
    };
  }
  const file = path.join(options.home, "agent-checkpoints.db");
  fs.mkdirSync(path.dirname(file), { recursive: true, mode: 0o700 });
  const db = new SQLite(file);
  db.pragma("journal_mode = WAL");
  db.pragma("synchronous = NORMAL");
  db.pragma("busy_timeout = 5000");
  fs.chmodSync(file, 0o600);
  const saver = withRunMetadata(new SqliteSaver(db));
  await saver.getTuple({ configurable: { thread_id: "" } }); // creates its tables before any delete
  return {
    saver,
    location: file,
    deleteAfter: async (threadId, checkpointId) => {
      for (const table of ["writes", "checkpoints"])
        db.prepare(`DELETE FROM ${table} WHERE thread_id = ? AND checkpoint_id > ?`).run(threadId, checkpointId);
    },
    close: async () => {
      db.close();
    },
  };
}
