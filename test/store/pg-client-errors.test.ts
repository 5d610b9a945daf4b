import assert from "node:assert/strict";
import { test } from "node:test";
import { sql } from "kysely";
import { openTestStore } from "../support/dialects.ts";

test("PostgreSQL: a checked-out connection whose session the server ends fails its own next query, and the process and pool carry on", async (t) => {
  const s = await openTestStore(t, "postgres");
  if (!s) return;
  t.after(() => s.cleanup());
  const uncaught: Error[] = [];
  const onUncaught = (err: Error) => uncaught.push(err);
  process.on("uncaughtException", onUncaught);
  t.after(() => process.off("uncaughtException", onUncaught));

  // A connection held between statements (as a transaction or an advisory lock holds one).
  await assert.rejects(
    s.store.db.connection().execute(async (conn) => {
      const { rows } = await sql<{ pid: number }>`select pg_backend_pid() as pid`.execute(conn);
      await sql`select pg_terminate_backend(${rows[0].pid})`.execute(s.store.db);
      // The pool client's `error` arrives while it is checked out and idle.
      await new Promise((r) => setTimeout(r, 200));
      await sql`select 1`.execute(conn);
    }),
  );
  assert.deepEqual(uncaught, []);
  const { rows } = await sql<{ one: number }>`select 1 as one`.execute(s.store.db);
  assert.equal(rows[0].one, 1);
});
