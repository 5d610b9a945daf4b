import assert from "node:assert/strict";
import fs from "node:fs";
import path from "node:path";
import { test, type TestContext } from "node:test";
import SQLite from "better-sqlite3";
import { Client } from "@langchain/langgraph-sdk";
import { startAgentServer } from "../../src/agent-server/index.ts";
import { isDeadLocalWorker, newWorkerId } from "../../src/agent-server/runs/worker-identity.ts";
import { MAX_ATTEMPTS, planRecovery } from "../../src/agent-server/runs/run-recovery.ts";
import { createLogger } from "../../src/log/logger.ts";
import { tempHome } from "../support/dialects.ts";
import { freePort, runWharf, waitForOk } from "../support/process.ts";
import { BASIC_PROJECT } from "./support.ts";

test("planRecovery: stateless runs go, thread runs resume once (from their checkpoint when they wrote it)", () => {
  const sealed = { keyId: "k", blob: "b" };
  const base = {
    input: { x: 1 },
    command: null,
    config: {},
    stream_mode: ["values"],
    temporary: false,
    subgraphs: false,
    resumable: false,
    on_disconnect: "continue" as const,
  };
  assert.deepEqual(planRecovery(base, { temporary: true, headRunId: null, runId: "r" }), { action: "delete" });
  assert.equal(planRecovery(base, { temporary: false, headRunId: null, runId: "r" }).action, "error"); // nothing sealed
  const fresh = planRecovery({ ...base, sealed_private: sealed }, { temporary: false, headRunId: "other", runId: "r" });
  assert.ok(
    fresh.action === "resume" &&
      !fresh.fromCheckpoint &&
      fresh.kwargs.attempt === 2 &&
      (fresh.kwargs.input as { x: number }).x === 1,
  );
  const cont = planRecovery({ ...base, sealed_private: sealed }, { temporary: false, headRunId: "r", runId: "r" });
  assert.ok(cont.action === "resume" && cont.fromCheckpoint && cont.kwargs.input === null);
  const again = planRecovery(
    { ...base, sealed_private: sealed, attempt: MAX_ATTEMPTS },
    { temporary: false, headRunId: "r", runId: "r" },
  );
  assert.equal(again.action, "error");
});

test("worker ids: a dead process of this machine is recognised, anything else is left to the lease", () => {
  const mine = newWorkerId();
  const [place] = mine.split(".");
  assert.equal(isDeadLocalWorker(mine), false);
  assert.equal(isDeadLocalWorker(`${place}.${process.ppid}.x`), false); // alive
  assert.equal(isDeadLocalWorker(`${place}.2147483646.x`), true); // no such process
  assert.equal(isDeadLocalWorker(`elsewhere.2147483646.x`), false);
  assert.equal(isDeadLocalWorker("0190aaaa-0000-7000-8000-000000000000"), false); // an older id format
});

/** Starts `wharf agent-server` as a child on a home, with a thread run of `slow` executing in it. */
async function crashDuringRun(t: TestContext, home: string, sleepMs: number) {
  const port = await freePort();
  const child = runWharf(
    ["agent-server", "--project", BASIC_PROJECT, "--port", String(port), "--open", "--server-id", "crash"],
    { env: { WHARF_HOME: home } },
  );
  t.after(() => child.child.kill("SIGKILL"));
  await waitForOk(`http://127.0.0.1:${port}/ok`, 60_000);
  const client = new Client({ apiUrl: `http://127.0.0.1:${port}`, apiKey: null, callerOptions: { maxRetries: 0 } });
  const thread = await client.threads.create({ graphId: "slow" });
  const run = await client.runs.create(thread.thread_id, "slow", {
    input: { messages: [{ role: "human", content: `sleep ${sleepMs}` }] },
  });
  for (let i = 0; i < 100 && (await client.runs.get(thread.thread_id, run.run_id)).status !== "running"; i++)
    await new Promise((r) => setTimeout(r, 50));
  child.child.kill("SIGKILL");
  await child.exited;
  return { threadId: thread.thread_id, runId: run.run_id };
}

async function restart(t: TestContext, home: string, exclusive = false) {
  const server = await startAgentServer({
    projectDir: BASIC_PROJECT,
    host: "127.0.0.1",
    port: 0,
    databaseUrl: null,
    home,
    open: true,
    serverId: "crash",
    exclusive,
    log: createLogger({ level: "silent" }),
  });
  t.after(() => server.stop());
  return { server, client: new Client({ apiUrl: server.url, apiKey: null, callerOptions: { maxRetries: 0 } }) };
}

test("kill -9 during a run: the restarted server resumes it at once from its checkpoint (input not replayed)", async (t) => {
  const home = tempHome();
  t.after(() => fs.rmSync(home, { recursive: true, force: true }));
  const { threadId, runId } = await crashDuringRun(t, home, 1500);
  // The lease (30 s) has not expired: the new process recognises the dead one and resumes its run.
  const started = Date.now();
  const { client } = await restart(t, home);
  await client.runs.join(threadId, runId);
  assert.ok(Date.now() - started < 10_000);
  assert.equal((await client.runs.get(threadId, runId)).status, "success");
  const state = await client.threads.getState<{ messages: Array<{ type: string; content: string }> }>(threadId);
  assert.deepEqual(
    state.values.messages.map((m) => `${m.type}:${m.content}`),
    ["human:sleep 1500", "ai:done: sleep 1500"],
  );
  assert.equal((await client.threads.get(threadId)).status, "idle");
});

test("--exclusive: runs of a process the PID check cannot see are settled at start", async (t) => {
  const home = tempHome();
  t.after(() => fs.rmSync(home, { recursive: true, force: true }));
  const { threadId, runId } = await crashDuringRun(t, home, 400);
  // As if the dead process ran in another PID namespace (a confined deployment revision).
  const db = new SQLite(path.join(home, "wharf.db"));
  db.prepare("UPDATE agent_runs SET worker_id = 'elsewhere~1.77.x' WHERE run_id = ?").run(runId);
  db.close();
  const started = Date.now();
  const { client } = await restart(t, home, true);
  await client.runs.join(threadId, runId);
  assert.ok(Date.now() - started < 10_000, "settled at start, not at lease expiry");
  assert.equal((await client.runs.get(threadId, runId)).status, "success");
});
