import assert from "node:assert/strict";
import { test } from "node:test";
import { sql } from "kysely";
import { PresenceLock, presenceOf } from "../../src/cluster/index.ts";
import { createLogger } from "../../src/log/logger.ts";
import { openTestStore } from "../support/dialects.ts";

async function until(what: string, check: () => Promise<boolean> | boolean, ms = 5000): Promise<number> {
  const start = Date.now();
  while (!(await check())) {
    if (Date.now() - start > ms) assert.fail(`${what}: not within ${ms} ms`);
    await new Promise((r) => setTimeout(r, 20));
  }
  return Date.now() - start;
}

test("PostgreSQL presence lock: seen held while its process lives, free once its session ends, taken again after a dropped connection, and not taken twice for one id", async (t) => {
  const a = await openTestStore(t, "postgres");
  if (!a) return;
  t.after(() => a.cleanup());
  const log = createLogger({ level: "error" });
  const lock = new PresenceLock(a.store.db, a.store.dedicatedConnection!, "node-a", log, 50);
  await lock.start();
  t.after(() => lock.stop());
  assert.notEqual(lock.heldForMs(), null);
  const seen = await presenceOf(a.store.db, ["node-a", "node-b"]);
  assert.deepEqual([...seen.held], ["node-a"]);
  assert.ok(seen.dbUpMs > 0);

  // A second process claiming the same id does not get it while the first holds it.
  const twin = new PresenceLock(a.store.db, a.store.dedicatedConnection!, "node-a", log, 50);
  await twin.start();
  assert.equal(twin.heldForMs(), null);
  await twin.stop();

  // The holder's session ends under it (as a dropped connection would): the lock is free, then taken again.
  const { rows } = await sql<{ pid: number }>`
    select l.pid from pg_locks l where l.locktype = 'advisory' and l.objsubid = 2
       and l.objid = (hashtext('node-a'))::oid and l.classid = (hashtext('wharf.presence.' || current_schema()))::oid`.execute(
    a.store.db,
  );
  assert.equal(rows.length, 1);
  await sql`select pg_terminate_backend(${rows[0].pid})`.execute(a.store.db);
  await until(
    "the lock is free once the session ended",
    async () => !(await presenceOf(a.store.db, ["node-a"])).held.has("node-a"),
  );
  const back = await until("taken again", async () => (await presenceOf(a.store.db, ["node-a"])).held.has("node-a"));
  console.log(`presence lock taken again ${back} ms after its connection was found dropped`);
  assert.notEqual(lock.heldForMs(), null);

  // Stopping releases it.
  await lock.stop();
  assert.equal((await presenceOf(a.store.db, ["node-a"])).held.size, 0);
});
