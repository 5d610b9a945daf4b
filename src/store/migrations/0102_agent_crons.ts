import type { Kysely } from "kysely";

// Kysely<any>: migrations describe the schema as it was, not as the current types say.
export async function up(db: Kysely<any>): Promise<void> {
  await db.schema
    .createTable("agent_crons")
    .addColumn("cron_id", "text", (c) => c.primaryKey())
    .addColumn("server_id", "text", (c) => c.notNull())
    .addColumn("assistant_id", "text", (c) => c.notNull())
    // A thread cron goes with its thread, as on the LangGraph server; stateless crons have none.
    .addColumn("thread_id", "text", (c) => c.references("agent_threads.thread_id").onDelete("cascade"))
    .addColumn("user_id", "text")
    .addColumn("schedule", "text", (c) => c.notNull())
    .addColumn("payload", "text", (c) => c.notNull())
    .addColumn("metadata", "text", (c) => c.notNull())
    .addColumn("on_run_completed", "text", (c) => c.notNull())
    .addColumn("enabled", "integer", (c) => c.notNull())
    .addColumn("end_time", "text")
    .addColumn("next_run_date", "text")
    .addColumn("auth_key_id", "text", (c) => c.notNull())
    .addColumn("auth_sealed", "text", (c) => c.notNull())
    .addColumn("created_at", "text", (c) => c.notNull())
    .addColumn("updated_at", "text", (c) => c.notNull())
    .execute();
  await db.schema
    .createIndex("agent_crons_server_next")
    .on("agent_crons")
    .columns(["server_id", "next_run_date"])
    .execute();
  await db.schema.createIndex("agent_crons_thread").on("agent_crons").column("thread_id").execute();
}

export async function down(db: Kysely<any>): Promise<void> {
  await db.schema.dropTable("agent_crons").execute();
}
