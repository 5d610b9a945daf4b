import fs from "node:fs";
import path from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";
import { Migrator, sql, type Migration, type MigrationProvider } from "kysely";
import type { Store } from "./database.ts";

const migrationsDir = path.join(path.dirname(fileURLToPath(import.meta.url)), "migrations");

/**
 * Every file in `migrations/` is one migration, applied in name order. Features own number ranges
 * (0001 identity, 0100 agent server, 0200 sandboxes, 0300 connections, 0400 deployments) so their
 * migrations never collide; unordered application is allowed because ranges are interleaved in time.
 */
class FolderMigrationProvider implements MigrationProvider {
  async getMigrations(): Promise<Record<string, Migration>> {
    const out: Record<string, Migration> = {};
    for (const file of fs.readdirSync(migrationsDir).sort()) {
      if (!/^\d{4}_[\w-]+\.ts$/.test(file)) continue;
      const mod = (await import(pathToFileURL(path.join(migrationsDir, file)).href)) as Migration;
      out[file.replace(/\.ts$/, "")] = mod;
    }
    return out;
  }
}

export async function migrateToLatest(store: Store): Promise<string[]> {
  // Kysely looks its bookkeeping tables up across all schemas; pin them to the connection's own
  // schema so that several Wharf schemas in one database (tests, tenants of one cluster) coexist.
  let migrationTableSchema: string | undefined;
  if (store.dialect === "postgres") {
    const { rows } = await sql<{ s: string }>`select current_schema() as s`.execute(store.db);
    migrationTableSchema = rows[0]?.s ?? undefined;
  }
  const migrator = new Migrator({ db: store.db, provider: new FolderMigrationProvider(), allowUnorderedMigrations: true, migrationTableSchema });
  let { error, results } = await migrator.migrateToLatest();
  // Kysely's PostgreSQL introspection resolves every table of every schema by name
  // (pg_get_serial_sequence), so another schema dropped at that moment fails our migration with
  // invalid_schema_name although our schema is fine. Migrations run in a transaction: retry.
  for (let attempt = 1; error && isOtherSchemaDropped(error, migrationTableSchema) && attempt <= 10; attempt++) {
    await new Promise((resolve) => setTimeout(resolve, 20 * attempt));
    ({ error, results } = await migrator.migrateToLatest());
  }
  if (error) {
    const failed = results?.find((r) => r.status === "Error")?.migrationName;
    throw new Error(`database migration ${failed ?? ""} failed: ${(error as Error).message ?? String(error)}`);
  }
  return (results ?? []).filter((r) => r.status === "Success").map((r) => r.migrationName);
}

/**
 * The same catalog scan, racing another schema's creation or drop, can also leave Kysely believing a
 * relation exists (its bookkeeping table) or naming a column of another schema's table of the same
 * name: undefined_table and undefined_column. A real fault in a migration fails the same way every
 * time, so after the retries it is still reported.
 */
const CATALOG_RACE_CODES = new Set(["42P01", "42703"]);

function isOtherSchemaDropped(error: unknown, ownSchema: string | undefined): boolean {
  const e = error as { code?: string; message?: string };
  if (ownSchema === undefined) return false;
  if (CATALOG_RACE_CODES.has(e?.code ?? "")) return true;
  return e?.code === "3F000" && !String(e.message ?? "").includes(`"${ownSchema}"`);
}
