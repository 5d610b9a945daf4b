import type { Kysely } from "kysely";

/**
 * Deployments run confined: each gets its own host uid (unique, allocated on first rollout) and its
 * own agent-server key (what its agent server seals with, instead of the platform's master key).
 */
export async function up(db: Kysely<any>): Promise<void> {
  await db.schema.alterTable("deployments").addColumn("run_uid", "integer").execute();
  await db.schema.alterTable("deployments").addColumn("agent_key_key_id", "text").execute();
  await db.schema.alterTable("deployments").addColumn("agent_key_ciphertext", "text").execute();
  await db.schema.createIndex("deployments_run_uid").on("deployments").column("run_uid").unique().execute();
}

export async function down(db: Kysely<any>): Promise<void> {
  await db.schema.dropIndex("deployments_run_uid").execute();
  for (const c of ["run_uid", "agent_key_key_id", "agent_key_ciphertext"])
    await db.schema.alterTable("deployments").dropColumn(c).execute();
}
