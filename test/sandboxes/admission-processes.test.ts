import assert from "node:assert/strict";
import os from "node:os";
import path from "node:path";
import { test } from "node:test";
import { Admissions } from "../../src/sandboxes/lifecycle/capacity.ts";
import { newId } from "../../src/store/ids.ts";
import { startTestPlatform } from "../support/platform.ts";

const GiB = 1024 ** 3;

/**
 * Two platform processes on one PostgreSQL database admit sandboxes against the same host: each
 * has its own queue, so only the database can keep them from both taking the last room. Two
 * `Admissions` over the store's pool stand for the two processes (their own queues, their own
 * sessions); each commit takes a while, as a real create's does, so both decide while the other
 * has not written yet.
 */
test("admissions from two processes on one PostgreSQL database cannot both take the host's last room", async (t) => {
  const p = await startTestPlatform(t, { dialect: "postgres" });
  if (!p) return;
  const ws = await p.ctx.db.selectFrom("workspaces").select("id").executeTakeFirstOrThrow();
  // Room for 1.5 GiB of running sandboxes on this host, whatever its size: one 1 GiB box fits.
  const limits = {
    memoryOvercommit: (1.5 * GiB) / os.totalmem(),
    diskOvercommit: 1,
    workspaceMaxSandboxes: 100,
    workspaceMaxMemBytes: 100 * GiB,
    workspaceMaxDiskBytes: 100 * GiB,
  };
  const stateDir = path.join(p.home, "sandboxes");
  const processes = [
    new Admissions(p.ctx.db, stateDir, limits, "postgres"),
    new Admissions(p.ctx.db, stateDir, limits, "postgres"),
  ];
  const now = new Date().toISOString();
  const create = (a: Admissions, name: string) =>
    a.admitThen(ws.id, { memBytes: GiB, fsCapacityBytes: 1024 ** 2, creates: true }, async () => {
      await new Promise((r) => setTimeout(r, 300));
      const row = {
        id: newId(),
        workspace_id: ws.id,
        name,
        status: "provisioning",
        status_message: null,
        status_changed_at: now,
        snapshot_id: null,
        vcpus: 1,
        cpu_millicores: 1000,
        mem_bytes: GiB,
        fs_capacity_bytes: 1024 ** 2,
        idle_ttl_seconds: 0,
        delete_after_stop_seconds: 0,
        labels: "{}",
        env_key_id: null,
        env_ciphertext: null,
        proxy_config: null,
        runtime: null,
        stopped_at: null,
        created_at: now,
        created_by: "test",
        updated_at: now,
        updated_by: "test",
      };
      await p.ctx.db.insertInto("sandboxes").values(row).execute();
      return name;
    });
  const outcomes = await Promise.allSettled([create(processes[0], "from-a"), create(processes[1], "from-b")]);
  const admitted = outcomes.filter((o) => o.status === "fulfilled");
  const refused = outcomes.filter((o): o is PromiseRejectedResult => o.status === "rejected");
  assert.equal(
    admitted.length,
    1,
    `both processes admitted a 1 GiB box into 1.5 GiB: ${JSON.stringify(outcomes.map((o) => o.status))}`,
  );
  assert.equal(refused.length, 1);
  assert.match(String(refused[0].reason?.body?.message ?? refused[0].reason), /Unschedulable|memory is committed/);
  const rows = await p.ctx.db.selectFrom("sandboxes").select("name").where("workspace_id", "=", ws.id).execute();
  assert.equal(rows.length, 1);
});
