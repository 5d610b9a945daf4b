import type { Kysely } from "kysely";

// Kysely<any>: migrations describe the schema as it was, not as the current types say.
export async function up(db: Kysely<any>): Promise<void> {
  await db.schema
    .createTable("sandboxes")
    .addColumn("id", "text", (c) => c.primaryKey())
    .addColumn("workspace_id", "text", (c) => c.notNull().references("workspaces.id").onDelete("cascade"))
    .addColumn("name", "text", (c) => c.notNull())
    .addColumn("status", "text", (c) => c.notNull())
    .addColumn("status_message", "text")
    .addColumn("status_changed_at", "text", (c) => c.notNull())
    .addColumn("snapshot_id", "text")
    .addColumn("vcpus", "integer", (c) => c.notNull())
    .addColumn("cpu_millicores", "integer", (c) => c.notNull())
    .addColumn("mem_bytes", "bigint", (c) => c.notNull())
    .addColumn("fs_capacity_bytes", "bigint", (c) => c.notNull())
    .addColumn("idle_ttl_seconds", "integer", (c) => c.notNull())
    .addColumn("delete_after_stop_seconds", "integer", (c) => c.notNull())
    .addColumn("labels", "text", (c) => c.notNull())
    .addColumn("env_key_id", "text")
    .addColumn("env_ciphertext", "text")
    .addColumn("proxy_config", "text")
    .addColumn("runtime", "text")
    .addColumn("stopped_at", "text")
    .addColumn("created_at", "text", (c) => c.notNull())
    .addColumn("created_by", "text", (c) => c.notNull())
    .addColumn("updated_at", "text", (c) => c.notNull())
    .addColumn("updated_by", "text", (c) => c.notNull())
    .addUniqueConstraint("sandboxes_workspace_name", ["workspace_id", "name"])
    .execute();
  await db.schema.createIndex("sandboxes_status").on("sandboxes").column("status").execute();
  await db.schema
    .createTable("sandbox_snapshots")
    .addColumn("id", "text", (c) => c.primaryKey())
    .addColumn("workspace_id", "text", (c) => c.notNull().references("workspaces.id").onDelete("cascade"))
    .addColumn("name", "text", (c) => c.notNull())
    .addColumn("tag", "text", (c) => c.notNull())
    .addColumn("status", "text", (c) => c.notNull())
    .addColumn("status_message", "text")
    .addColumn("source_sandbox_id", "text")
    .addColumn("fs_capacity_bytes", "bigint", (c) => c.notNull())
    .addColumn("fs_used_bytes", "bigint")
    .addColumn("size_bytes", "bigint")
    .addColumn("labels", "text", (c) => c.notNull())
    .addColumn("created_by", "text", (c) => c.notNull())
    .addColumn("created_at", "text", (c) => c.notNull())
    .addColumn("updated_at", "text", (c) => c.notNull())
    .addUniqueConstraint("sandbox_snapshots_workspace_name_tag", ["workspace_id", "name", "tag"])
    .execute();
}

export async function down(db: Kysely<any>): Promise<void> {
  await db.schema.dropTable("sandbox_snapshots").execute();
  await db.schema.dropTable("sandboxes").execute();
}
