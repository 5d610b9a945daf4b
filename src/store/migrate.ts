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
  // Pin Kysely's bookkeeping tables to the connection's own schema so that several Wharf schemas
  // in one database (tests, tenants of one cluster) coexist; the store's introspection looks at
  // that schema alone (own-schema-postgres.ts), so another schema's churn cannot fail a migration.
  let migrationTableSchema: string | undefined;
  if (store.dialect === "postgres") {
    const { rows } = await sql<{ s: string }>`select current_schema() as s`.execute(store.db);
    migrationTableSchema = rows[0]?.s ?? undefined;
  }
  const migrator = new Migrator({
    db: store.db,
    provider: new FolderMigrationProvider(),
    allowUnorderedMigrations: true,
    migrationTableSchema,
  });
  const { error, results } = await migrator.migrateToLatest();
  if (error) {
    const failed = results?.find((r) => r.status === "Error")?.migrationName;
    throw new Error(`database migration ${failed ?? ""} failed: ${(error as Error).message ?? String(error)}`);
  }
  return (results ?? []).filter((r) => r.status === "Success").map((r) => r.migrationName);
}
