import assert from "node:assert/strict";
import { describe, test } from "node:test";
import { nowIso } from "../../src/store/database.ts";
import { DIALECTS } from "../support/dialects.ts";
import { startTestAgentServer } from "./support.ts";

const say = (content: string) => ({ messages: [{ role: "human", content }] });
const contents = (v: unknown) => (v as { messages: Array<{ content: string }> }).messages.map((m) => m.content);

for (const dialect of DIALECTS) {
  describe(`persistence and restarts (${dialect})`, () => {
    test("a restart keeps threads, state, assistants; a run in flight ends as error", async (t) => {
      const first = await startTestAgentServer(t, { dialect, open: true });
      if (!first) return;
      const client = first.client();
      const th = await client.threads.create({ metadata: { k: "v" } });
      await client.runs.wait(th.thread_id, "echo", { input: say("one") });
      const custom = await client.assistants.create({ graphId: "echo", name: "mine", metadata: { team: "a" } });
      const busy = await client.threads.create();
      const inflight = await client.runs.create(busy.thread_id, "slow", { input: say("sleep 5000") });
      await new Promise((r) => setTimeout(r, 100));

      const second = await first.restart();
      const c2 = second.client();
      assert.deepEqual(contents((await c2.threads.getState(th.thread_id)).values), ["one", "echo: one"]);
      assert.deepEqual(contents(await c2.runs.wait(th.thread_id, "echo", { input: say("two") })), [
        "one",
        "echo: one",
        "two",
        "echo: two",
      ]);
      assert.equal((await c2.assistants.get(custom.assistant_id)).name, "mine");
      assert.equal((await c2.threads.search({ metadata: { k: "v" } })).length, 1);
      assert.equal((await c2.runs.get(busy.thread_id, inflight.run_id)).status, "error");
      assert.equal((await c2.threads.get(busy.thread_id)).status, "error");
      // The thread is usable again.
      assert.deepEqual(contents(await c2.runs.wait(busy.thread_id, "echo", { input: say("again") })).slice(-2), [
        "again",
        "echo: again",
      ]);
    });

    test("a run whose process died (lease expired) ends as error and its queued successor runs", async (t) => {
      const server = await startTestAgentServer(t, { dialect, open: true, leaseMs: 300 });
      if (!server) return;
      const client = server.client();
      const th = await client.threads.create();
      const db = server.server.ctx.db;
      const now = nowIso();
      const past = new Date(Date.now() - 60_000).toISOString();
      const kwargs = JSON.stringify({
        input: say("queued"),
        config: {},
        stream_mode: ["values"],
        temporary: false,
        subgraphs: false,
        resumable: false,
        on_disconnect: "continue",
      });
      const base = {
        server_id: "test-server",
        thread_id: th.thread_id,
        metadata: "{}",
        kwargs,
        multitask_strategy: "enqueue",
        temporary: 0,
        updated_at: now,
      };
      const echoId = (await client.assistants.get("echo")).assistant_id;
      await db
        .insertInto("agent_runs")
        .values({
          ...base,
          assistant_id: echoId,
          run_id: "01900000-0000-7000-8000-000000000001",
          status: "running",
          worker_id: "dead-process",
          lease_until: past,
          created_at: past,
        })
        .execute();
      await db
        .insertInto("agent_runs")
        .values({
          ...base,
          assistant_id: echoId,
          run_id: "01900000-0000-7000-8000-000000000002",
          status: "pending",
          worker_id: null,
          lease_until: null,
          created_at: now,
        })
        .execute();
      await db
        .updateTable("agent_threads")
        .set({ status: "busy", metadata: JSON.stringify({ graph_id: "echo" }) })
        .where("thread_id", "=", th.thread_id)
        .execute();
      const deadline = Date.now() + 5000;
      let statuses: string[] = [];
      while (Date.now() < deadline) {
        statuses = (await client.runs.list(th.thread_id)).map((r) => r.status);
        if (statuses.includes("success")) break;
        await new Promise((r) => setTimeout(r, 100));
      }
      assert.deepEqual(statuses.sort(), ["error", "success"]);
      assert.deepEqual(contents((await client.threads.getState(th.thread_id)).values), ["queued", "echo: queued"]);
    });
  });
}

test("two servers on one PostgreSQL never run the same run twice", async (t) => {
  const a = await startTestAgentServer(t, { dialect: "postgres", open: true });
  if (!a) return;
  const b = await a.restart({ stopFirst: false });
  const ca = a.client();
  const cb = b.client();
  const th = await ca.threads.create();
  const created = [];
  for (let i = 0; i < 8; i++) {
    const client = i % 2 ? cb : ca;
    created.push(await client.runs.create(th.thread_id, "echo", { input: say(`m${i}`), multitaskStrategy: "enqueue" }));
  }
  for (const r of created) await cb.runs.join(th.thread_id, r.run_id);
  const values = contents((await ca.threads.getState(th.thread_id)).values);
  assert.equal(values.length, 16, values.join(","));
  assert.deepEqual(
    values.filter((_, i) => i % 2 === 0),
    created.map((_, i) => `m${i}`),
  );
  assert.deepEqual([...new Set((await ca.runs.list(th.thread_id, { limit: 20 })).map((r) => r.status))], ["success"]);
});

test("a run executing in one server process is cancelled through another (PostgreSQL NOTIFY)", async (t) => {
  const a = await startTestAgentServer(t, { dialect: "postgres", open: true });
  if (!a) return;
  const b = await a.restart({ stopFirst: false });
  const th = await a.client().threads.create();
  const run = await a.client().runs.create(th.thread_id, "slow", { input: say("sleep 5000") });
  await new Promise((r) => setTimeout(r, 150));
  await b.client().runs.cancel(th.thread_id, run.run_id);
  const started = Date.now();
  await b.client().runs.join(th.thread_id, run.run_id);
  assert.ok(Date.now() - started < 3000, "the cancel reached the executing process");
  assert.equal((await b.client().runs.get(th.thread_id, run.run_id)).status, "interrupted");
});
