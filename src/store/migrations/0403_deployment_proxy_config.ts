import type { Kysely } from "kysely";

/**
 * A deployment's `proxy_config` (the egress rules of its agent servers and build steps), in the
 * egress proxy's stored form: JSON whose `opaque` values are ids of sealed rows in
 * `egress_sealed_values` (registered there for key rotation), so this column holds no secret.
 * Null: the default posture (HTTP(S) to any public host, nothing else).
 */
export async function up(db: Kysely<any>): Promise<void> {
  await db.schema.alterTable("deployments").addColumn("proxy_config", "text").execute();
}

export async function down(db: Kysely<any>): Promise<void> {
  await db.schema.alterTable("deployments").dropColumn("proxy_config").execute();
}
