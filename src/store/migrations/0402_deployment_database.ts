import type { Kysely } from "kysely";

/**
 * On PostgreSQL each deployment's agent server has its own role and schema; the role's random
 * password is sealed here (`deployment-db-password:<workspace>:<id>`). Unused on SQLite.
 */
export async function up(db: Kysely<any>): Promise<void> {
  await db.schema.alterTable("deployments").addColumn("db_password_key_id", "text").execute();
  await db.schema.alterTable("deployments").addColumn("db_password_ciphertext", "text").execute();
}

export async function down(db: Kysely<any>): Promise<void> {
  for (const c of ["db_password_key_id", "db_password_ciphertext"])
    await db.schema.alterTable("deployments").dropColumn(c).execute();
}
