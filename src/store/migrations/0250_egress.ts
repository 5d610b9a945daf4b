import type { Kysely } from "kysely";

// Kysely<any>: migrations describe the schema as it was, not as the current types say.
export async function up(db: Kysely<any>): Promise<void> {
  await db.schema
    .createTable("egress_sealed_values")
    .addColumn("id", "text", (c) => c.primaryKey())
    .addColumn("workspace_id", "text", (c) => c.notNull().references("workspaces.id").onDelete("cascade"))
    .addColumn("key_id", "text", (c) => c.notNull())
    .addColumn("ciphertext", "text", (c) => c.notNull())
    .addColumn("created_at", "text", (c) => c.notNull())
    .execute();
  await db.schema
    .createTable("egress_cas")
    .addColumn("workspace_id", "text", (c) => c.primaryKey().references("workspaces.id").onDelete("cascade"))
    .addColumn("cert_pem", "text", (c) => c.notNull())
    .addColumn("key_id", "text", (c) => c.notNull())
    .addColumn("key_ciphertext", "text", (c) => c.notNull())
    .addColumn("not_after", "text", (c) => c.notNull())
    .addColumn("created_at", "text", (c) => c.notNull())
    .execute();
  await db.schema
    .createTable("egress_audit_log")
    .addColumn("id", "text", (c) => c.primaryKey())
    .addColumn("workspace_id", "text", (c) => c.notNull())
    .addColumn("sandbox_id", "text", (c) => c.notNull())
    .addColumn("at", "text", (c) => c.notNull())
    .addColumn("last_at", "text", (c) => c.notNull())
    .addColumn("count", "integer", (c) => c.notNull())
    .addColumn("kind", "text", (c) => c.notNull())
    .addColumn("decision", "text", (c) => c.notNull())
    .addColumn("rule", "text")
    .addColumn("host", "text", (c) => c.notNull())
    .addColumn("port", "integer", (c) => c.notNull())
    .addColumn("method", "text")
    .addColumn("path", "text")
    .addColumn("status", "integer")
    .addColumn("reason", "text")
    .execute();
  await db.schema
    .createIndex("egress_audit_log_sandbox")
    .on("egress_audit_log")
    .columns(["workspace_id", "sandbox_id", "id"])
    .execute();
}

export async function down(db: Kysely<any>): Promise<void> {
  for (const t of ["egress_audit_log", "egress_cas", "egress_sealed_values"]) await db.schema.dropTable(t).execute();
}
