import type { Kysely } from "kysely";

// Kysely<any>: migrations describe the schema as it was, not as the current types say.
export async function up(db: Kysely<any>): Promise<void> {
  await db.schema
    .createTable("console_sessions")
    // SHA-256 of the cookie value: a database read never yields a usable session.
    .addColumn("id_hash", "text", (c) => c.primaryKey())
    .addColumn("user_id", "text", (c) => c.notNull())
    .addColumn("workspace_id", "text", (c) => c.notNull().references("workspaces.id").onDelete("cascade"))
    .addColumn("api_key_id", "text")
    .addColumn("signed_in_with", "text", (c) => c.notNull())
    .addColumn("created_at", "text", (c) => c.notNull())
    .addColumn("expires_at", "text", (c) => c.notNull())
    .execute();
  await db.schema.createIndex("console_sessions_expires").on("console_sessions").column("expires_at").execute();
}

export async function down(db: Kysely<any>): Promise<void> {
  await db.schema.dropTable("console_sessions").execute();
}
