import type { Kysely } from "kysely";

// Kysely<any>: migrations describe the schema as it was, not as the current types say.
export async function up(db: Kysely<any>): Promise<void> {
  await db.schema
    .createTable("replicas")
    .addColumn("id", "text", (c) => c.primaryKey())
    .addColumn("url", "text", (c) => c.notNull())
    .addColumn("started_at", "text", (c) => c.notNull())
    // Epoch milliseconds from the database's clock (never a replica's own): leases compare alike on every machine.
    .addColumn("lease_until_ms", "bigint", (c) => c.notNull())
    .execute();
  // The replica that runs a sandbox (null in one-process mode): data-plane requests are forwarded there.
  await db.schema.alterTable("sandboxes").addColumn("owner_replica", "text").execute();
  await db.schema.createIndex("sandboxes_owner_replica").on("sandboxes").columns(["owner_replica", "status"]).execute();
}

export async function down(db: Kysely<any>): Promise<void> {
  await db.schema.dropIndex("sandboxes_owner_replica").execute();
  await db.schema.alterTable("sandboxes").dropColumn("owner_replica").execute();
  await db.schema.dropTable("replicas").execute();
}
