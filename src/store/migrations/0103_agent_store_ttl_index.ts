import type { Kysely } from "kysely";

// Kysely<any>: migrations describe the schema as it was, not as the current types say.
export async function up(db: Kysely<any>): Promise<void> {
  // `store.ttl`: when an item expires (ISO time, null = never) and its TTL to refresh on read.
  await db.schema.alterTable("agent_store_items").addColumn("expires_at", "text").execute();
  await db.schema.alterTable("agent_store_items").addColumn("ttl_minutes", "real").execute();
  // `store.index`: one embedding per indexed field of an item, as a JSON array of numbers (a plain
  // scan ranks them; the rows stay portable between SQLite and PostgreSQL).
  await db.schema
    .createTable("agent_store_vectors")
    .addColumn("server_id", "text", (c) => c.notNull())
    .addColumn("namespace", "text", (c) => c.notNull())
    .addColumn("key", "text", (c) => c.notNull())
    .addColumn("field", "text", (c) => c.notNull())
    .addColumn("embedding", "text", (c) => c.notNull())
    .addPrimaryKeyConstraint("agent_store_vectors_pk", ["server_id", "namespace", "key", "field"])
    .execute();
  await db.schema
    .createIndex("agent_store_items_expires")
    .on("agent_store_items")
    .columns(["server_id", "expires_at"])
    .execute();
}

export async function down(db: Kysely<any>): Promise<void> {
  await db.schema.dropTable("agent_store_vectors").execute();
  await db.schema.dropIndex("agent_store_items_expires").execute();
  await db.schema.alterTable("agent_store_items").dropColumn("ttl_minutes").execute();
  await db.schema.alterTable("agent_store_items").dropColumn("expires_at").execute();
}
