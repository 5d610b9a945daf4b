import type { Kysely } from "kysely";

// Kysely<any>: migrations describe the schema as it was, not as the current types say.
// Snapshots from OCI images (and what a captured snapshot sits on), and image registries with a
// write-only password sealed with the master key.
export async function up(db: Kysely<any>): Promise<void> {
  for (const column of ["docker_image", "image_digest", "registry_id", "base_snapshot_id"]) {
    await db.schema.alterTable("sandbox_snapshots").addColumn(column, "text").execute();
  }
  await db.schema
    .createTable("sandbox_registries")
    .addColumn("id", "text", (c) => c.primaryKey())
    .addColumn("workspace_id", "text", (c) => c.notNull().references("workspaces.id").onDelete("cascade"))
    .addColumn("name", "text", (c) => c.notNull())
    .addColumn("url", "text", (c) => c.notNull())
    .addColumn("username", "text", (c) => c.notNull())
    .addColumn("password_key_id", "text", (c) => c.notNull())
    .addColumn("password_cipher", "text", (c) => c.notNull())
    .addColumn("created_at", "text", (c) => c.notNull())
    .addColumn("created_by", "text", (c) => c.notNull())
    .addColumn("updated_at", "text", (c) => c.notNull())
    .addColumn("updated_by", "text", (c) => c.notNull())
    .addUniqueConstraint("sandbox_registries_workspace_name", ["workspace_id", "name"])
    .execute();
}

export async function down(db: Kysely<any>): Promise<void> {
  await db.schema.dropTable("sandbox_registries").execute();
  for (const column of ["docker_image", "image_digest", "registry_id", "base_snapshot_id"]) {
    await db.schema.alterTable("sandbox_snapshots").dropColumn(column).execute();
  }
}
