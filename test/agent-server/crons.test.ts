import assert from "node:assert/strict";
import { until } from "../support/wait.ts";
import fs from "node:fs";
import path from "node:path";
import { describe, test } from "node:test";
import type { Client, Cron } from "@langchain/langgraph-sdk";
import { systemAssistantId } from "../../src/agent-server/index.ts";
import { claimDueCrons } from "../../src/agent-server/index.ts";
import { DIALECTS, tempHome } from "../support/dialects.ts";
import { BASIC_PROJECT, loopbackHooks, startTestAgentServer, webhookSink, type TestAgentServer } from "./support.ts";

const hi = { messages: [{ role: "human", content: "hi" }] };
const PAST = "2000-01-01T00:00:00.000Z";
const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/;
const contents = (v: unknown) =>
  ((v as { messages?: Array<{ content: string }> } | null)?.messages ?? []).map((m) => m.content);

/** Servers started after this see it: a short scheduler tick, so firings are quick to observe. */
const withTick = (ms: number) => {
  process.env.WHARF_CRON_TICK_MS = String(ms);
};

/** Makes a cron due now, as if its time had come, through the server's own database handle. */
async function makeDue(server: TestAgentServer, cronId: string): Promise<void> {
  await server.server.ctx.db
    .updateTable("agent_crons")
    .set({ next_run_date: PAST })
    .where("cron_id", "=", cronId)
    .execute();
}

async function cronRow(server: TestAgentServer, cronId: string) {
  return server.server.ctx.db.selectFrom("agent_crons").selectAll().where("cron_id", "=", cronId).executeTakeFirst();
}

/**
 * A project with crons auth handlers: owners are stamped on create and filter every other action;
 * `mallory` may not create crons. Written at run time (graphs from the basic fixture).
 */
function cronAuthProject(): string {
  const dir = tempHome("wharf-cron-auth-");
  const graphs = path.join(BASIC_PROJECT, "src/graphs.ts");
  fs.writeFileSync(
    path.join(dir, "langgraph.json"),
    JSON.stringify({ graphs: { echo: `${graphs}:echo`, whoami: `${graphs}:whoami` }, auth: { path: "./auth.ts" } }),
  );
  const sdkAuth = import.meta.resolve("@langchain/langgraph-sdk/auth");
  fs.writeFileSync(
    path.join(dir, "auth.ts"),
    `import { Auth, HTTPException } from ${JSON.stringify(sdkAuth)};
export default new Auth()
  .authenticate((request: Request) => {
    const token = request.headers.get("authorization")?.replace(/^Bearer /, "") ?? "";
    if (!token.startsWith("user-")) throw new HTTPException(401, { message: "no token" });
    return { identity: token.slice(5), permissions: [] };
  })
  .on("crons:create", ({ value, user }) => {
    if (user.identity === "mallory") return false;
    value.metadata ??= {};
    value.metadata.owner = user.identity;
  })
  .on("crons", ({ user }) => ({ owner: user.identity }))
  .on("threads:create", ({ value, user }) => {
    value.metadata ??= {};
    value.metadata.owner = user.identity;
  })
  .on("threads", ({ user }) => ({ owner: user.identity }))
  .on("*", () => undefined);
`,
  );
  return dir;
}

for (const dialect of DIALECTS) {
  describe(`crons (${dialect})`, () => {
    test("create on a thread and stateless, search, count, update, delete; a deleted thread takes its crons", async (t) => {
      withTick(60_000);
      const server = await startTestAgentServer(t, { dialect });
      if (!server) return;
      const client = server.client();
      const info = (await (await fetch(`${server.url}/info`)).json()) as { flags: { crons: boolean } };
      assert.equal(info.flags.crons, true);

      const thread = await client.threads.create();
      const before = Date.now();
      const onThread = await client.crons.createForThread(thread.thread_id, "echo", {
        schedule: "0 9 1 1 *",
        input: hi,
        metadata: { k: "v" },
        multitaskStrategy: "enqueue",
      });
      assert.match(onThread.cron_id, UUID);
      assert.equal(onThread.thread_id, thread.thread_id);
      assert.equal(onThread.assistant_id, systemAssistantId("echo"));
      assert.equal(onThread.schedule, "0 9 1 1 *");
      assert.match(onThread.next_run_date, /^\d{4}-01-01T09:00:00\.000Z$/);
      assert.ok(Date.parse(onThread.next_run_date) > before);
      assert.equal(onThread.end_time, null);
      assert.deepEqual(onThread.metadata, { k: "v" });
      assert.deepEqual(onThread.payload.input, hi);
      assert.equal(onThread.payload.multitask_strategy, "enqueue");
      assert.ok(onThread.user_id, "the creator (the API key's user) is recorded");
      assert.equal((onThread as unknown as Cron).enabled, true);

      const stateless = await client.crons.create("echo", {
        schedule: "*/5 * * * *",
        input: hi,
        onRunCompleted: "keep",
      });
      assert.equal(stateless.thread_id, null);
      assert.equal((stateless as unknown as Cron).on_run_completed, "keep");
      assert.ok(Date.parse(stateless.next_run_date) - before <= 5 * 60_000);

      assert.equal((await client.crons.search()).length, 2);
      assert.deepEqual(
        (await client.crons.search({ threadId: thread.thread_id })).map((c) => c.cron_id),
        [onThread.cron_id],
      );
      assert.equal(
        (await client.crons.search({ assistantId: "echo" })).length,
        2,
        "a graph id stands for its default assistant",
      );
      assert.equal((await client.crons.search({ assistantId: systemAssistantId("slow") })).length, 0);
      assert.deepEqual(
        (await client.crons.search({ sortBy: "next_run_date", sortOrder: "asc" })).map((c) => c.cron_id),
        [stateless.cron_id, onThread.cron_id],
      );
      assert.deepEqual(
        (await client.crons.search({ limit: 1, offset: 1, sortBy: "created_at", sortOrder: "asc" })).map(
          (c) => c.cron_id,
        ),
        [stateless.cron_id],
      );
      const selected = await client.crons.search({ select: ["cron_id", "schedule"], threadId: thread.thread_id });
      assert.deepEqual(selected, [{ cron_id: onThread.cron_id, schedule: "0 9 1 1 *" }]);
      assert.equal(await client.crons.count(), 2);
      assert.equal(await client.crons.count({ threadId: thread.thread_id }), 1);

      const updated = await client.crons.update(stateless.cron_id, {
        schedule: "0 0 1 1 *",
        metadata: { x: 1 },
        input: { messages: [] },
      });
      assert.equal(updated.schedule, "0 0 1 1 *");
      assert.match(updated.next_run_date!, /^\d{4}-01-01T00:00:00\.000Z$/);
      assert.deepEqual(updated.metadata, { x: 1 });
      assert.deepEqual(updated.payload.input, { messages: [] });

      await client.crons.delete(stateless.cron_id);
      assert.equal(await client.crons.count(), 1);
      await assert.rejects(client.crons.delete(stateless.cron_id), /HTTP 404/);

      await client.threads.delete(thread.thread_id);
      assert.equal(await client.crons.count(), 0, "the thread's cron went with it");
    });

    test("bad bodies: an invalid schedule is a 422 naming it; unknown assistants and threads are 404s", async (t) => {
      withTick(60_000);
      const server = await startTestAgentServer(t, { dialect });
      if (!server) return;
      const client = server.client();
      const post = (p: string, body: unknown) =>
        fetch(`${server.url}${p}`, {
          method: "POST",
          headers: { "x-api-key": server.apiKey!, "content-type": "application/json" },
          body: JSON.stringify(body),
        });

      for (const schedule of ["not a cron", "61 * * * *", "1 2", "* * * * * * *"]) {
        const res = await post("/runs/crons", { assistant_id: "echo", schedule });
        assert.equal(res.status, 422, schedule);
        const { detail } = (await res.json()) as { detail: Array<{ loc: unknown[]; msg: string; type: string }> };
        assert.deepEqual(detail[0].loc, ["body", "schedule"]);
        assert.match(detail[0].msg, /Invalid cron schedule/);
      }
      const missing = await post("/runs/crons", { assistant_id: "echo" });
      assert.equal(missing.status, 422);
      const badEnd = await post("/runs/crons", { assistant_id: "echo", schedule: "* * * * *", end_time: "tomorrow" });
      assert.equal(badEnd.status, 422);
      await assert.rejects(client.crons.create("echo", { schedule: "every minute" }), /HTTP 422/);
      await assert.rejects(client.crons.create("nope", { schedule: "* * * * *" }), /HTTP 404/);
      await assert.rejects(
        client.crons.createForThread("00000000-0000-4000-8000-000000000000", "echo", { schedule: "* * * * *" }),
        /HTTP 404/,
      );
      const ok = await client.crons.create("echo", { schedule: "@daily" });
      await assert.rejects(client.crons.update(ok.cron_id, { schedule: "99 * * * *" }), /HTTP 422/);
      assert.equal(await client.crons.count(), 1);
    });

    test("due crons fire through the scheduler: on a thread, stateless kept, stateless deleted", async (t) => {
      withTick(100);
      const server = await startTestAgentServer(t, { dialect, webhookGate: loopbackHooks });
      if (!server) return;
      const client = server.client();
      const hook = await webhookSink(t);
      const thread = await client.threads.create();
      const yearly = "0 0 1 1 *";
      const onThread = await client.crons.createForThread(thread.thread_id, "echo", {
        schedule: yearly,
        input: hi,
        webhook: hook.url,
        metadata: { which: "thread" },
      });
      const kept = await client.crons.create("echo", {
        schedule: yearly,
        input: hi,
        webhook: hook.url,
        onRunCompleted: "keep",
        metadata: { which: "kept" },
      });
      const dropped = await client.crons.create("echo", {
        schedule: yearly,
        input: hi,
        webhook: hook.url,
        metadata: { which: "dropped" },
      });
      for (const c of [onThread, kept, dropped]) await makeDue(server, c.cron_id);

      await until("three firings", async () => hook.received.length >= 3);
      const byWhich = Object.fromEntries(hook.received.map((r) => [r.metadata.which, r]));
      for (const which of ["thread", "kept", "dropped"]) {
        assert.equal(byWhich[which]?.status, "success", which);
        assert.deepEqual(contents(byWhich[which].values), ["hi", "echo: hi"]);
      }
      assert.equal(byWhich.thread.thread_id, thread.thread_id);
      const runs = await client.runs.list(thread.thread_id);
      assert.equal(runs.length, 1);
      assert.equal(runs[0].status, "success");
      assert.deepEqual(contents((await client.threads.getState(thread.thread_id)).values), ["hi", "echo: hi"]);
      // "keep": the firing's new thread stays; "delete" (the default): nothing is left.
      const keptThreads = await client.threads.search({ metadata: { which: "kept" } });
      assert.equal(keptThreads.length, 1);
      assert.equal(keptThreads[0].thread_id, byWhich.kept.thread_id);
      assert.equal((await client.threads.search({ metadata: { which: "dropped" } })).length, 0);

      // Each cron moved on to its next due time and does not fire again meanwhile.
      for (const c of await client.crons.search()) assert.match(c.next_run_date!, /^\d{4}-01-01T00:00:00\.000Z$/);
      await new Promise((r) => setTimeout(r, 300));
      assert.equal(hook.received.length, 3);
    });

    test("past end_time and disabled crons never fire", async (t) => {
      withTick(100);
      const server = await startTestAgentServer(t, { dialect, webhookGate: loopbackHooks });
      if (!server) return;
      const client = server.client();
      const hook = await webhookSink(t);
      // The SDK's create sends no end_time; the API takes it (Python clients send it).
      const res = await fetch(`${server.url}/runs/crons`, {
        method: "POST",
        headers: { "x-api-key": server.apiKey!, "content-type": "application/json" },
        body: JSON.stringify({
          assistant_id: "echo",
          schedule: "* * * * * *",
          input: hi,
          webhook: hook.url,
          end_time: "2001-02-03T04:05:06+01:00",
        }),
      });
      assert.equal(res.status, 200);
      const ended = (await res.json()) as Cron;
      assert.equal(ended.end_time, "2001-02-03T03:05:06.000Z");
      assert.equal(ended.next_run_date, null);
      const later = await client.crons.create("echo", { schedule: "* * * * * *", input: hi, webhook: hook.url });
      const endedLater = await client.crons.update(later.cron_id, { endTime: "2002-01-01T00:00:00Z" });
      assert.equal(endedLater.next_run_date, null);
      const disabled = await client.crons.create("echo", {
        schedule: "* * * * * *",
        input: hi,
        webhook: hook.url,
        enabled: false,
      });
      assert.equal((disabled as unknown as Cron).enabled, false);

      for (const c of [ended, later, disabled]) await makeDue(server, c.cron_id);
      assert.equal(await server.server.crons.tick(), 0);
      await new Promise((r) => setTimeout(r, 400));
      assert.equal(hook.received.length, 0);
      assert.equal((await cronRow(server, ended.cron_id))?.next_run_date, null, "an ended cron is retired");
      assert.equal((await cronRow(server, later.cron_id))?.next_run_date, null);
    });

    test("racing schedulers: one firing per due time across processes sharing the database", async (t) => {
      // Timers off: the test drives the passes, all at once.
      withTick(3_600_000);
      const first = await startTestAgentServer(t, { dialect });
      if (!first) return;
      const second = await first.restart({ stopFirst: false });
      const client = first.client();
      const thread = await client.threads.create();
      const cron = await client.crons.createForThread(thread.thread_id, "echo", {
        schedule: "0 0 1 1 *",
        input: hi,
        multitaskStrategy: "enqueue",
      });

      // Bare claims from two connection pools: exactly one wins.
      await makeDue(first, cron.cron_id);
      const claims = await Promise.all(
        [first, second, first, second, first, second].map((s) => claimDueCrons(s.server.ctx, new Date())),
      );
      assert.equal(claims.flat().length, 1);
      assert.equal((await cronRow(first, cron.cron_id))?.next_run_date?.slice(4), "-01-01T00:00:00.000Z");

      // Whole scheduler passes in both servers at once: one run.
      await makeDue(first, cron.cron_id);
      const fired = await Promise.all([first.server.crons.tick(), second.server.crons.tick()]);
      assert.equal(
        fired.reduce((a, b) => a + b, 0),
        1,
      );
      const runs = await until("the run to end", async () => {
        const list = await client.runs.list(thread.thread_id);
        return list.length === 1 && list[0].status === "success" ? list : null;
      });
      assert.equal(runs.length, 1);
      assert.equal(await first.server.crons.tick(), 0, "nothing is due any more");
    });

    test("custom auth: crons handlers stamp, deny and filter; firings run as the creator", async (t) => {
      withTick(60_000);
      const project = cronAuthProject();
      t.after(() => fs.rmSync(project, { recursive: true, force: true }));
      const server = await startTestAgentServer(t, { dialect, project });
      if (!server) return;
      const as = (user: string): Client => server.client({ Authorization: `Bearer user-${user}` });
      const alice = as("alice");
      const bob = as("bob");

      const mine = await alice.crons.create("echo", { schedule: "@hourly", metadata: { note: "n" } });
      assert.deepEqual(mine.metadata, { note: "n", owner: "alice" });
      assert.equal(mine.user_id, "alice");
      await assert.rejects(as("mallory").crons.create("echo", { schedule: "@hourly" }), /HTTP 403/);

      assert.equal((await alice.crons.search()).length, 1);
      assert.equal((await bob.crons.search()).length, 0);
      assert.equal(await bob.crons.count(), 0);
      await assert.rejects(bob.crons.update(mine.cron_id, { schedule: "@daily" }), /HTTP 404/);
      await assert.rejects(bob.crons.delete(mine.cron_id), /HTTP 404/);
      const read = await fetch(`${server.url}/runs/crons/${mine.cron_id}`, {
        headers: { authorization: "Bearer user-bob" },
      });
      assert.equal(read.status, 404);
      const own = await fetch(`${server.url}/runs/crons/${mine.cron_id}`, {
        headers: { authorization: "Bearer user-alice" },
      });
      assert.equal(((await own.json()) as Cron).cron_id, mine.cron_id);
      // An update keeps the owner stamp (metadata merges).
      assert.deepEqual((await alice.crons.update(mine.cron_id, { metadata: { note: "m" } })).metadata, {
        note: "m",
        owner: "alice",
      });

      // A thread cron needs a thread the caller can see.
      const thread = await alice.threads.create();
      await assert.rejects(bob.crons.createForThread(thread.thread_id, "whoami", { schedule: "@hourly" }), /HTTP 404/);
      const onThread = await alice.crons.createForThread(thread.thread_id, "whoami", {
        schedule: "@yearly",
        input: hi,
      });
      await makeDue(server, onThread.cron_id);
      assert.equal(await server.server.crons.tick(), 1);
      const state = await until("the firing's answer", async () => {
        const s = await alice.threads.getState(thread.thread_id);
        return contents(s.values).length === 2 ? s : null;
      });
      assert.equal(JSON.parse(contents(state.values)[1]).id, "alice", "the graph sees the cron's creator");

      await bob.crons.delete(mine.cron_id).catch(() => {});
      await alice.crons.delete(mine.cron_id);
      assert.equal(await alice.crons.count(), 1);
    });
  });
}
