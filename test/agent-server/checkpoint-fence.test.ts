import assert from "node:assert/strict";
import crypto from "node:crypto";
import { test } from "node:test";
import pg from "pg";
import { PostgresSaver } from "@langchain/langgraph-checkpoint-postgres";
import { emptyCheckpoint } from "@langchain/langgraph";
import {
  checkpointOwner,
  fenceStatement,
  fencingPool,
  idleInTransactionMs,
  LeaseLostError,
} from "../../src/agent-server/storage/checkpoint-fence.ts";
import { takeoverLockTimeoutMs } from "../../src/agent-server/runs/run-housekeeping.ts";
import { POSTGRES_URL, postgresReachable, requireCapability } from "../support/requirements.ts";

test("checkpoint fence: the limits follow the lease", () => {
  const table: Array<[number, number, number]> = [
    // lease, idle in transaction, takeover lock wait (renewals every third of the lease)
    [500, 1000, 100],
    [4000, 2000, 666],
    [10_000, 5000, 1666],
    [60_000, 30_000, 10_000],
  ];
  for (const [lease, idle, lock] of table) {
    assert.equal(idleInTransactionMs(lease), idle, `idle for lease ${lease}`);
    assert.equal(takeoverLockTimeoutMs(Math.floor(lease / 3)), lock, `lock wait for lease ${lease}`);
  }
  assert.match(
    fenceStatement(),
    /FROM agent_runs WHERE run_id = \$1 AND worker_id = \$2 AND status = 'running' FOR SHARE$/,
  );
  assert.match(fenceStatement('we"ird'), /FROM "weird"\.agent_runs /);
});

test("checkpoint fence: a run's checkpoint transaction holds off a takeover and is refused after it", async (t) => {
  if (!requireCapability(t, await postgresReachable(), `PostgreSQL is not reachable at ${POSTGRES_URL}`)) return;
  const schema = `fence_${crypto.randomBytes(4).toString("hex")}`;
  const admin = new pg.Pool({ connectionString: POSTGRES_URL, max: 2 });
  t.after(async () => {
    await admin.query(`DROP SCHEMA IF EXISTS ${schema} CASCADE`);
    await admin.end();
  });
  await admin.query(`CREATE SCHEMA ${schema}`);
  await admin.query(`CREATE TABLE ${schema}.agent_runs (run_id text PRIMARY KEY, worker_id text, status text)`);
  await admin.query(`INSERT INTO ${schema}.agent_runs VALUES ('r1', 'w1', 'running')`);
  const pool = new pg.Pool({ connectionString: POSTGRES_URL, max: 4 });
  t.after(() => pool.end());
  const saver = new PostgresSaver(fencingPool(pool, schema), undefined, { schema });
  await saver.setup();
  const config = { configurable: { thread_id: "th", checkpoint_ns: "" } };
  const put = (owner: { runId: string; workerId: string }) =>
    checkpointOwner.run(owner, () =>
      saver.put(
        config,
        { ...emptyCheckpoint(), id: crypto.randomUUID() },
        { source: "loop", step: 1, parents: {} },
        {},
      ),
    );

  await put({ runId: "r1", workerId: "w1" });
  assert.equal((await saver.list(config).next()).done, false, "the owner's checkpoint is written");

  // The owner's transaction, left open (a frozen process), holds the row: a takeover waits for it.
  const open = await checkpointOwner.run({ runId: "r1", workerId: "w1" }, () => fencingPool(pool, schema).connect());
  await open.query("BEGIN");
  const takeover = await admin.connect();
  try {
    await takeover.query("BEGIN");
    await takeover.query("SET LOCAL lock_timeout = 200");
    await assert.rejects(takeover.query(`UPDATE ${schema}.agent_runs SET worker_id = 'w2' WHERE run_id = 'r1'`), {
      code: "55P03",
    });
    await takeover.query("ROLLBACK");
    await open.query("COMMIT");
    open.release();
    await takeover.query(`UPDATE ${schema}.agent_runs SET worker_id = 'w2' WHERE run_id = 'r1'`);
  } finally {
    takeover.release();
  }

  // Taken over: the old owner's next write is refused and leaves nothing.
  const before = (await admin.query(`SELECT count(*)::int AS n FROM ${schema}.checkpoints`)).rows[0].n;
  await assert.rejects(put({ runId: "r1", workerId: "w1" }), LeaseLostError);
  assert.equal((await admin.query(`SELECT count(*)::int AS n FROM ${schema}.checkpoints`)).rows[0].n, before);
  await put({ runId: "r1", workerId: "w2" });
  // Without an owner (reads, single-process runs) the pool is the plain pool.
  assert.equal((await saver.getTuple(config))?.checkpoint.v, emptyCheckpoint().v);
});
