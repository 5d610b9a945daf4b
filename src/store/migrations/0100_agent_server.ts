import type { Kysely } from "kysely";

// Kysely<any>: migrations describe the schema as it was, not as the current types say.
export async function up(db: Kysely<any>): Promise<void> {
  await db.schema
    .createTable("agent_assistants")
    .addColumn("server_id", "text", (c) => c.notNull())
    .addColumn("assistant_id", "text", (c) => c.notNull())
    .addColumn("graph_id", "text", (c) => c.notNull())
    .addColumn("name", "text", (c) => c.notNull())
    .addColumn("description", "text")
    .addColumn("config", "text", (c) => c.notNull())
    .addColumn("context", "text", (c) => c.notNull())
    .addColumn("metadata", "text", (c) => c.notNull())
    .addColumn("version", "integer", (c) => c.notNull())
    .addColumn("created_at", "text", (c) => c.notNull())
    .addColumn("updated_at", "text", (c) => c.notNull())
    .addPrimaryKeyConstraint("agent_assistants_pk", ["server_id", "assistant_id"])
    .execute();
  await db.schema
    .createTable("agent_assistant_versions")
    .addColumn("server_id", "text", (c) => c.notNull())
    .addColumn("assistant_id", "text", (c) => c.notNull())
    .addColumn("version", "integer", (c) => c.notNull())
    .addColumn("graph_id", "text", (c) => c.notNull())
    .addColumn("name", "text", (c) => c.notNull())
    .addColumn("description", "text")
    .addColumn("config", "text", (c) => c.notNull())
    .addColumn("context", "text", (c) => c.notNull())
    .addColumn("metadata", "text", (c) => c.notNull())
    .addColumn("created_at", "text", (c) => c.notNull())
    .addPrimaryKeyConstraint("agent_assistant_versions_pk", ["server_id", "assistant_id", "version"])
    .execute();
  await db.schema
    .createTable("agent_threads")
    .addColumn("thread_id", "text", (c) => c.primaryKey())
    .addColumn("server_id", "text", (c) => c.notNull())
    .addColumn("status", "text", (c) => c.notNull())
    .addColumn("metadata", "text", (c) => c.notNull())
    .addColumn("config", "text", (c) => c.notNull())
    .addColumn("state_values", "text")
    .addColumn("interrupts", "text")
    .addColumn("created_at", "text", (c) => c.notNull())
    .addColumn("updated_at", "text", (c) => c.notNull())
    .execute();
  await db.schema
    .createIndex("agent_threads_server_created")
    .on("agent_threads")
    .columns(["server_id", "created_at"])
    .execute();
  await db.schema
    .createTable("agent_runs")
    .addColumn("run_id", "text", (c) => c.primaryKey())
    .addColumn("server_id", "text", (c) => c.notNull())
    .addColumn("thread_id", "text", (c) => c.notNull())
    .addColumn("assistant_id", "text", (c) => c.notNull())
    .addColumn("status", "text", (c) => c.notNull())
    .addColumn("metadata", "text", (c) => c.notNull())
    .addColumn("kwargs", "text", (c) => c.notNull())
    .addColumn("multitask_strategy", "text", (c) => c.notNull())
    .addColumn("temporary", "integer", (c) => c.notNull())
    .addColumn("worker_id", "text")
    .addColumn("lease_until", "text")
    .addColumn("created_at", "text", (c) => c.notNull())
    .addColumn("updated_at", "text", (c) => c.notNull())
    .execute();
  await db.schema
    .createIndex("agent_runs_thread_status")
    .on("agent_runs")
    .columns(["thread_id", "status", "created_at"])
    .execute();
  await db.schema.createIndex("agent_runs_server_status").on("agent_runs").columns(["server_id", "status"]).execute();
}

export async function down(db: Kysely<any>): Promise<void> {
  for (const t of ["agent_runs", "agent_threads", "agent_assistant_versions", "agent_assistants"])
    await db.schema.dropTable(t).execute();
}
