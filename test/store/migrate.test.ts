import assert from "node:assert/strict";
import crypto from "node:crypto";
import { test } from "node:test";
import pg from "pg";
import { openTestStore } from "../support/dialects.ts";
import { POSTGRES_URL } from "../support/requirements.ts";
import { migrateToLatest } from "../../src/store/migrate.ts";

test("migrations on PostgreSQL survive other schemas of the same database being dropped meanwhile", async (t) => {
  const churn = new pg.Client({ connectionString: POSTGRES_URL });
  let stop = false;
  const prefix = `wharf_churn_${crypto.randomBytes(4).toString("hex")}`;
  // Another tenant (or test) creating and dropping its schema in a tight loop: the window in which
  // a catalog scan sees a schema that is gone by the time it is resolved by name.
  const churning = (async () => {
    await churn.connect();
    for (let i = 0; !stop; i++) {
      const name = `${prefix}_${i % 4}`;
      await churn.query(
        `CREATE SCHEMA IF NOT EXISTS "${name}"; CREATE TABLE IF NOT EXISTS "${name}".t (id serial primary key, a int, b text, c text)`,
      );
      await churn.query(`DROP SCHEMA IF EXISTS "${name}" CASCADE`);
    }
    for (let i = 0; i < 4; i++) await churn.query(`DROP SCHEMA IF EXISTS "${prefix}_${i}" CASCADE`);
    await churn.end();
  })();
  try {
    for (let i = 0; i < 12; i++) {
      const s = await openTestStore(t, "postgres");
      if (!s) return;
      try {
        assert.ok(
          (await migrateToLatest(s.store)).length === 0,
          "openTestStore already migrated; a second run applies nothing",
        );
      } finally {
        await s.cleanup();
      }
    }
  } finally {
    stop = true;
    await churning;
  }
});
