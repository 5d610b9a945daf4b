import crypto from "node:crypto";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import type { TestContext } from "node:test";
import pg from "pg";
import { openStore, type Dialect, type Store } from "../../src/store/database.ts";
import { migrateToLatest } from "../../src/store/migrate.ts";
import { POSTGRES_URL, postgresReachable, requireCapability } from "./requirements.ts";

export const DIALECTS: Dialect[] = ["sqlite", "postgres"];

export function tempHome(prefix = "wharf-test-"): string {
  return fs.mkdtempSync(path.join(os.tmpdir(), prefix));
}

/** A fresh, migrated store of the given dialect; PostgreSQL gets its own schema, dropped afterwards. */
export interface TestStorage {
  store: Store;
  home: string;
  databaseUrl: string | null;
  pgSchema?: string;
  cleanup(): Promise<void>;
}

export async function storageSettings(
  t: TestContext,
  dialect: Dialect,
): Promise<{ home: string; databaseUrl: string | null; pgSchema?: string; dropSchema(): Promise<void> } | null> {
  const home = tempHome();
  if (dialect === "sqlite")
    return { home, databaseUrl: null, dropSchema: async () => fs.rmSync(home, { recursive: true, force: true }) };
  if (!requireCapability(t, await postgresReachable(), `PostgreSQL is not reachable at ${POSTGRES_URL}`)) return null;
  const pgSchema = `wharf_t_${crypto.randomBytes(6).toString("hex")}`;
  return {
    home,
    databaseUrl: POSTGRES_URL,
    pgSchema,
    dropSchema: async () => {
      const client = new pg.Client({ connectionString: POSTGRES_URL });
      await client.connect();
      await client.query(`DROP SCHEMA IF EXISTS "${pgSchema}" CASCADE`);
      await client.end();
      fs.rmSync(home, { recursive: true, force: true });
    },
  };
}

export async function openTestStore(t: TestContext, dialect: Dialect): Promise<TestStorage | null> {
  const s = await storageSettings(t, dialect);
  if (!s) return null;
  const store = await openStore({ databaseUrl: s.databaseUrl, home: s.home, pgSchema: s.pgSchema });
  await migrateToLatest(store);
  return {
    store,
    home: s.home,
    databaseUrl: s.databaseUrl,
    pgSchema: s.pgSchema,
    cleanup: async () => {
      await store.close();
      await s.dropSchema();
    },
  };
}
