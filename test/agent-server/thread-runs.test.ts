import assert from "node:assert/strict";
import { describe, test } from "node:test";
import { DIALECTS } from "../support/dialects.ts";
import { collect, startTestAgentServer } from "./support.ts";

const say = (content: string) => ({ messages: [{ role: "human", content }] });
type Msgs = { messages: Array<{ type: string; content: string }> };
const contents = (v: unknown) => (v as Msgs).messages.map((m) => m.content);

for (const dialect of DIALECTS) {
  describe(`thread runs (${dialect})`, () => {
    test("background runs, join, enqueue, reject, interrupt, rollback, cancel", async (t) => {
      const server = await startTestAgentServer(t, { dialect, open: true });
      if (!server) return;
      const client = server.client();

      // Background run + join.
      const th = await client.threads.create();
      const run = await client.runs.create(th.thread_id, "slow", { input: say("sleep 100") });
      assert.ok(["pending", "running"].includes(run.status));
      assert.equal(run.thread_id, th.thread_id);
      assert.deepEqual(contents(await client.runs.join(th.thread_id, run.run_id)), ["sleep 100", "done: sleep 100"]);
      assert.equal((await client.runs.get(th.thread_id, run.run_id)).status, "success");
      assert.equal((await client.threads.get(th.thread_id)).status, "idle");

      // Enqueue: the second run waits for the first, then sees its state.
      const a = await client.runs.create(th.thread_id, "slow", { input: say("sleep 300") });
      const b = await client.runs.create(th.thread_id, "slow", { input: say("sleep 1"), multitaskStrategy: "enqueue" });
      assert.equal(b.status, "pending");
      assert.equal((await client.threads.get(th.thread_id)).status, "busy");
      // Reject: a third run on the busy thread is refused.
      await assert.rejects(
        client.runs.create(th.thread_id, "slow", { input: say("x"), multitaskStrategy: "reject" }),
        /HTTP 409: Thread is already running a task/,
      );
      assert.deepEqual(contents(await client.runs.join(th.thread_id, b.run_id)).slice(-4), [
        "sleep 300",
        "done: sleep 300",
        "sleep 1",
        "done: sleep 1",
      ]);
      assert.equal((await client.runs.get(th.thread_id, a.run_id)).status, "success");

      // Interrupt: the running run is stopped (keeps its checkpoints), the new one runs.
      const t2 = await client.threads.create();
      const long = await client.runs.create(t2.thread_id, "slow", { input: say("sleep 5000") });
      await new Promise((r) => setTimeout(r, 100));
      const next = await client.runs.create(t2.thread_id, "slow", {
        input: say("sleep 1"),
        multitaskStrategy: "interrupt",
      });
      const after = contents(await client.runs.join(t2.thread_id, next.run_id));
      assert.deepEqual(after.slice(-2), ["sleep 1", "done: sleep 1"]);
      assert.ok(after.includes("sleep 5000"));
      assert.equal((await client.runs.get(t2.thread_id, long.run_id)).status, "interrupted");

      // Rollback: the running run is removed with everything it wrote.
      const t3 = await client.threads.create();
      const gone = await client.runs.create(t3.thread_id, "slow", { input: say("sleep 5000") });
      await new Promise((r) => setTimeout(r, 100));
      const fresh = await client.runs.create(t3.thread_id, "slow", {
        input: say("sleep 1"),
        multitaskStrategy: "rollback",
      });
      assert.deepEqual(contents(await client.runs.join(t3.thread_id, fresh.run_id)), ["sleep 1", "done: sleep 1"]);
      await assert.rejects(client.runs.get(t3.thread_id, gone.run_id), /HTTP 404/);

      // Cancel (wait): the run ends interrupted, the thread is idle again.
      const t4 = await client.threads.create();
      const c = await client.runs.create(t4.thread_id, "slow", { input: say("sleep 5000") });
      await new Promise((r) => setTimeout(r, 50));
      await client.runs.cancel(t4.thread_id, c.run_id, true);
      assert.equal((await client.runs.get(t4.thread_id, c.run_id)).status, "interrupted");
      assert.equal((await client.threads.get(t4.thread_id)).status, "idle");
      assert.deepEqual(
        (await client.runs.list(t4.thread_id)).map((r) => r.status),
        ["interrupted"],
      );
    });

    test("interrupts and resume with a command; join stream; stateless background runs", async (t) => {
      const server = await startTestAgentServer(t, { dialect, open: true });
      if (!server) return;
      const client = server.client();
      const th = await client.threads.create();
      const paused = (await client.runs.wait(th.thread_id, "ask", { input: say("deploy") })) as Record<string, unknown>;
      // As the LangGraph server: the last values chunk, which for a pause is the interrupt alone.
      assert.deepEqual(Object.keys(paused), ["__interrupt__"]);
      const interrupts = paused.__interrupt__ as Array<{ value: { question: string }; id: string }>;
      assert.equal(interrupts[0].value.question, 'approve "deploy"?');
      assert.equal(typeof interrupts[0].id, "string");
      const thread = await client.threads.get(th.thread_id);
      assert.equal(thread.status, "interrupted");
      assert.equal(Object.values(thread.interrupts ?? {}).flat().length, 1);
      const state = await client.threads.getState(th.thread_id);
      assert.deepEqual(state.next, ["ask"]);
      assert.equal(state.tasks[0].interrupts.length, 1);
      const resumed = await client.runs.wait(th.thread_id, "ask", { command: { resume: "yes" } });
      assert.deepEqual(contents(resumed), ["deploy", "approved: yes"]);
      assert.equal((await client.threads.get(th.thread_id)).status, "idle");
      const history = await client.threads.getHistory(th.thread_id, { limit: 50 });
      assert.ok(history.length >= 3);

      // interrupt_before pauses the thread before the node.
      const t2 = await client.threads.create();
      await client.runs.wait(t2.thread_id, "echo", { input: say("x"), interruptBefore: ["echo"] });
      assert.equal((await client.threads.get(t2.thread_id)).status, "interrupted");
      assert.deepEqual((await client.threads.getState(t2.thread_id)).next, ["echo"]);
      assert.deepEqual(contents(await client.runs.wait(t2.thread_id, "echo", { input: null })), ["x", "echo: x"]);

      // joinStream follows a background run from its start.
      const bg = await client.runs.create(th.thread_id, "slow", { input: say("sleep 150"), streamMode: ["updates"] });
      const events = await collect(client.runs.joinStream(th.thread_id, bg.run_id));
      assert.deepEqual(
        events.map((e) => e.event),
        ["metadata", "updates"],
      );

      // Stateless background run: created, then streamed by id; its temporary thread goes away.
      const res = await fetch(`${server.url}/runs`, {
        method: "POST",
        headers: { "content-type": "application/json" },
        body: JSON.stringify({ assistant_id: "slow", input: say("sleep 100"), stream_mode: "values" }),
      });
      const created = (await res.json()) as { run_id: string; thread_id: string; status: string };
      assert.equal(created.status, "pending"); // as the LangGraph server answers a new background run
      const streamed = await (await fetch(`${server.url}/runs/${created.run_id}/stream`)).text();
      assert.match(streamed, /^event: metadata\n/);
      assert.match(streamed, /done: sleep 100/);
      await assert.rejects(client.threads.get(created.thread_id), /HTTP 404/);

      // A factory graph gets the run's config.
      const f = await client.runs.wait(null, "factory", {
        input: say("q"),
        config: { configurable: { prefix: "custom" } },
      });
      assert.deepEqual(contents(f), ["q", "custom: q"]);
      // on_completion keep: the thread of a stateless run stays and can be read.
      const keptRes = await fetch(`${server.url}/runs/wait`, {
        method: "POST",
        headers: { "content-type": "application/json" },
        body: JSON.stringify({ assistant_id: "echo", input: say("k"), on_completion: "keep" }),
      });
      const kept = { thread_id: keptRes.headers.get("content-location")!.split("/")[2] };
      assert.match(keptRes.headers.get("content-location")!, /^\/threads\/[0-9a-f-]{36}\/runs\//);
      await keptRes.text();
      assert.deepEqual(contents((await client.threads.get(kept.thread_id)).values), ["k", "echo: k"]);
    });

    test("a client that disconnects mid-stream cancels the run only with on_disconnect cancel (the default is continue)", async (t) => {
      const server = await startTestAgentServer(t, { dialect, open: true });
      if (!server) return;
      const client = server.client();
      for (const onDisconnect of ["cancel", "continue", undefined] as const) {
        const th = await client.threads.create();
        const ac = new AbortController();
        const res: Response = await fetch(`${server.url}/threads/${th.thread_id}/runs/stream`, {
          method: "POST",
          headers: { "content-type": "application/json" },
          body: JSON.stringify({ assistant_id: "slow", input: say("sleep 600"), on_disconnect: onDisconnect }),
          signal: ac.signal,
        });
        const runId: string = res.headers.get("content-location")!.split("/").pop()!;
        const reader = res.body!.getReader();
        await reader.read(); // the metadata event
        ac.abort();
        await new Promise((r) => setTimeout(r, 900));
        assert.equal(
          (await client.runs.get(th.thread_id, runId)).status,
          onDisconnect === "cancel" ? "interrupted" : "success",
          String(onDisconnect),
        );
      }
    });
  });
}
