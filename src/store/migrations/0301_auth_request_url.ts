import type { Kysely } from "kysely";

// The authorization URL of a pending flow, sealed (it carries the state), so that a repeated
// `authenticate` for the same request returns the same link instead of starting another flow.
export async function up(db: Kysely<any>): Promise<void> {
  await db.schema.alterTable("oauth_auth_requests").addColumn("url_key_id", "text").execute();
  await db.schema.alterTable("oauth_auth_requests").addColumn("url_cipher", "text").execute();
}

export async function down(db: Kysely<any>): Promise<void> {
  await db.schema.alterTable("oauth_auth_requests").dropColumn("url_cipher").execute();
  await db.schema.alterTable("oauth_auth_requests").dropColumn("url_key_id").execute();
}
