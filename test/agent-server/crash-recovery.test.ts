import assert from "node:assert/strict";
import fs from "node:fs";
import { test } from "node:test";
import { Client } from "@langchain/langgraph-sdk";
import { startAgentServer } from "../../src/agent-server/index.ts";
import { isDeadLocalWorker, newWorkerId } from "../../src/agent-server/runs/worker-identity.ts";
import { createLogger } from "../../src/log/logger.ts";
import { tempHome } from "../support/dialects.ts";
import { freePort, runWharf, waitForOk } from "../support/process.ts";
import { BASIC_PROJECT } from "./support.ts";

test("worker ids: a dead process of this machine is recognised, anything else is left to the lease", () => {
  const mine = newWorkerId();
  const [place] = mine.split(".");
  assert.equal(isDeadLocalWorker(mine), false);
  assert.equal(isDeadLocalWorker(`${place}.${process.ppid}.x`), false); // alive
  assert.equal(isDeadLocalWorker(`${place}.2147483646.x`), true); // no such process
  assert.equal(isDeadLocalWorker(`elsewhere.2147483646.x`), false);
  assert.equal(isDeadLocalWorker("0190aaaa-0000-7000-8000-000000000000"), false); // an older id format
});

test("kill -9 during a run: the restarted server ends it as error at once and the thread runs again", async (t) => {
  const home = tempHome();
  t.after(() => fs.rmSync(home, { recursive: true, force: true }));
  const port = await freePort();
  const env = { WHARF_HOME: home };
  const first = runWharf(["agent-server", "--project", BASIC_PROJECT, "--port", String(port), "--open", "--server-id", "crash"], { env });
  t.after(() => first.child.kill("SIGKILL"));
  await waitForOk(`http://127.0.0.1:${port}/ok`, 20_000);
  const client = new Client({ apiUrl: `http://127.0.0.1:${port}`, apiKey: null, callerOptions: { maxRetries: 0 } });
  const thread = await client.threads.create({ graphId: "slow" });
  const run = await client.runs.create(thread.thread_id, "slow", { input: { messages: [{ role: "human", content: "sleep 60000" }] } });
  for (let i = 0; i < 100 && (await client.runs.get(thread.thread_id, run.run_id)).status !== "running"; i++) await new Promise((r) => setTimeout(r, 50));
  first.child.kill("SIGKILL");
  await first.exited;

  // The lease (30 s) has not expired: the new process recognises the dead one and ends its run.
  const started = Date.now();
  const second = await startAgentServer({ projectDir: BASIC_PROJECT, host: "127.0.0.1", port: 0, databaseUrl: null, home, open: true, serverId: "crash", log: createLogger({ level: "silent" }) });
  t.after(() => second.stop());
  const c2 = new Client({ apiUrl: second.url, apiKey: null, callerOptions: { maxRetries: 0 } });
  let status = "";
  while (Date.now() - started < 10_000) {
    status = (await c2.runs.get(thread.thread_id, run.run_id)).status;
    if (status !== "running") break;
    await new Promise((r) => setTimeout(r, 50));
  }
  assert.equal(status, "error");
  assert.ok(Date.now() - started < 10_000);
  assert.equal((await c2.threads.get(thread.thread_id)).status, "error");
  const again = (await c2.runs.wait(thread.thread_id, "slow", { input: { messages: [{ role: "human", content: "sleep 1" }] } })) as { messages: Array<{ content: string }> };
  assert.equal(again.messages.at(-1)!.content, "done: sleep 1");
});
