import assert from "node:assert/strict";
import { test } from "node:test";
import { sql, type Kysely } from "kysely";
import { DIALECTS, storageSettings } from "../support/dialects.ts";
import { openStore } from "../../src/store/database.ts";
import { migrateToLatest } from "../../src/store/migrate.ts";
import { preparedQuery, statementName } from "../../src/store/prepared-query.ts";
import type { Database } from "../../src/store/schema.ts";

const byServer = preparedQuery((db: Kysely<Database>, p: { serverId: string; status: string }) =>
  db
    .selectFrom("agent_threads")
    .select(["thread_id"])
    .where("server_id", "=", p.serverId)
    .where("status", "=", p.status)
    .orderBy("thread_id")
    .limit(5),
);

for (const dialect of DIALECTS) {
  test(`a prepared query binds each call's values, its constants kept (${dialect})`, async (t) => {
    const s = await storageSettings(t, dialect);
    if (!s) return;
    // One connection: the named statement is on the connection the test then asks.
    const store = await openStore({ databaseUrl: s.databaseUrl, home: s.home, pgSchema: s.pgSchema, poolSize: 1 });
    t.after(async () => {
      await store.close();
      await s.dropSchema();
    });
    await migrateToLatest(store);
    const now = new Date().toISOString();
    const thread = (id: string, server: string, status: string) => ({
      thread_id: id,
      server_id: server,
      status,
      metadata: "{}",
      config: "{}",
      state_values: null,
      interrupts: null,
      created_at: now,
      updated_at: now,
    });
    await store.db
      .insertInto("agent_threads")
      .values([thread("a", "s1", "idle"), thread("b", "s1", "busy"), thread("c", "s2", "idle")])
      .execute();
    const ids = async (serverId: string, status: string) =>
      (await byServer(store.db, { serverId, status })).rows.map((r) => r.thread_id);
    assert.deepEqual(await ids("s1", "idle"), ["a"]);
    assert.deepEqual(await ids("s1", "busy"), ["b"]);
    assert.deepEqual(await ids("s2", "idle"), ["c"]);
    assert.deepEqual(await ids("s2", "busy"), []);
    if (dialect === "postgres") {
      const { rows } = await sql<{ name: string; statement: string }>`
        select name, statement from pg_prepared_statements`.execute(store.db);
      const named = rows.find((r) => r.statement.includes('from "agent_threads"'));
      assert.ok(named, "the prepared query runs as a named statement");
      assert.equal(statementName(named.statement), named.name);
    }
  });
}
