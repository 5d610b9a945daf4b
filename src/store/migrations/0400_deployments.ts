import type { Kysely } from "kysely";

// Kysely<any>: migrations describe the schema as it was, not as the current types say.
// eslint-disable-next-line max-lines-per-function -- a migration creates its part's tables in one place, in order
export async function up(db: Kysely<any>): Promise<void> {
  await db.schema
    .createTable("deployments")
    .addColumn("id", "text", (c) => c.primaryKey())
    .addColumn("workspace_id", "text", (c) => c.notNull().references("workspaces.id").onDelete("cascade"))
    .addColumn("name", "text", (c) => c.notNull())
    .addColumn("source", "text", (c) => c.notNull())
    .addColumn("source_config", "text", (c) => c.notNull())
    .addColumn("source_revision_config", "text", (c) => c.notNull())
    .addColumn("secret_names", "text", (c) => c.notNull())
    .addColumn("secrets_key_id", "text", (c) => c.notNull())
    .addColumn("secrets_ciphertext", "text", (c) => c.notNull())
    .addColumn("api_key_id", "text", (c) => c.notNull())
    .addColumn("api_key_key_id", "text", (c) => c.notNull())
    .addColumn("api_key_ciphertext", "text", (c) => c.notNull())
    .addColumn("status", "text", (c) => c.notNull())
    .addColumn("latest_revision_id", "text")
    .addColumn("active_revision_id", "text")
    .addColumn("rollout_revision_id", "text")
    .addColumn("rollout_owner", "text")
    .addColumn("rollout_lease_until", "text")
    .addColumn("created_at", "text", (c) => c.notNull())
    .addColumn("updated_at", "text", (c) => c.notNull())
    .addUniqueConstraint("deployments_workspace_name", ["workspace_id", "name"])
    .execute();
  await db.schema
    .createTable("deployment_revisions")
    .addColumn("id", "text", (c) => c.primaryKey())
    .addColumn("deployment_id", "text", (c) => c.notNull().references("deployments.id").onDelete("cascade"))
    .addColumn("workspace_id", "text", (c) => c.notNull())
    .addColumn("status", "text", (c) => c.notNull())
    .addColumn("source", "text", (c) => c.notNull())
    .addColumn("source_revision_config", "text", (c) => c.notNull())
    .addColumn("build_config", "text", (c) => c.notNull())
    .addColumn("reuse_build_of", "text")
    .addColumn("artifact_dir", "text")
    .addColumn("project_dir", "text")
    .addColumn("graphs", "text")
    .addColumn("repo_commit_sha", "text")
    .addColumn("owner", "text")
    .addColumn("lease_until", "text")
    .addColumn("phase_deadline", "text")
    .addColumn("attempt", "integer", (c) => c.notNull().defaultTo(1))
    .addColumn("cancel_requested", "integer", (c) => c.notNull().defaultTo(0))
    .addColumn("pid", "integer")
    .addColumn("serving_url", "text")
    .addColumn("status_message", "text")
    .addColumn("created_at", "text", (c) => c.notNull())
    .addColumn("updated_at", "text", (c) => c.notNull())
    .execute();
  await db.schema
    .createIndex("deployment_revisions_deployment")
    .on("deployment_revisions")
    .columns(["deployment_id", "id"])
    .execute();
  await db.schema.createIndex("deployment_revisions_status").on("deployment_revisions").column("status").execute();
  await db.schema
    .createTable("deployment_revision_transitions")
    .addColumn("id", "text", (c) => c.primaryKey())
    .addColumn("revision_id", "text", (c) => c.notNull().references("deployment_revisions.id").onDelete("cascade"))
    .addColumn("from_status", "text")
    .addColumn("to_status", "text", (c) => c.notNull())
    .addColumn("reason", "text")
    .addColumn("at", "text", (c) => c.notNull())
    .execute();
  await db.schema
    .createIndex("deployment_revision_transitions_revision")
    .on("deployment_revision_transitions")
    .columns(["revision_id", "id"])
    .execute();
  await db.schema
    .createTable("deployment_revision_logs")
    .addColumn("id", "text", (c) => c.primaryKey())
    .addColumn("revision_id", "text", (c) => c.notNull().references("deployment_revisions.id").onDelete("cascade"))
    .addColumn("kind", "text", (c) => c.notNull())
    .addColumn("level", "text", (c) => c.notNull())
    .addColumn("message", "text", (c) => c.notNull())
    .addColumn("timestamp", "text", (c) => c.notNull())
    .execute();
  await db.schema
    .createIndex("deployment_revision_logs_revision")
    .on("deployment_revision_logs")
    .columns(["revision_id", "kind", "id"])
    .execute();
}

export async function down(db: Kysely<any>): Promise<void> {
  for (const t of [
    "deployment_revision_logs",
    "deployment_revision_transitions",
    "deployment_revisions",
    "deployments",
  ])
    await db.schema.dropTable(t).execute();
}
