import assert from "node:assert/strict";
import { describe, test } from "node:test";
import { collect, startTestAgentServer } from "./support.ts";

// What clients of the LangGraph server depend on, each checked through the official SDK (or raw
// HTTP where the SDK hides the status): assistant search and 404s, run timing (after_seconds,
// pending), replay of an ended run, cancel of an ended run, state updates during a run, supersteps,
// checkpoint metadata, bad input as 4xx.
const say = (text: string) => ({ messages: [{ role: "human", content: text }] });
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

describe("behaves like the LangGraph server", () => {
  test("assistants: case-insensitive name search; unknown id is 404 'Assistant not found'", async (t) => {
    const server = await startTestAgentServer(t, { open: true });
    if (!server) return;
    const client = server.client();
    const found = await client.assistants.search({ name: "ECH" });
    assert.deepEqual(
      found.map((a) => a.graph_id),
      ["echo"],
    );
    assert.deepEqual(await client.assistants.search({ name: "%" }), []);
    const res = await fetch(`${server.url}/assistants/6f1c2a64-0000-4000-8000-000000000000`);
    assert.equal(res.status, 404);
    assert.equal(await res.text(), "Assistant not found");
    // A run without assistant_id: a 422 naming the field.
    const missing = await fetch(`${server.url}/runs/wait`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ input: say("x") }),
    });
    assert.equal(missing.status, 422);
    assert.deepEqual(((await missing.json()) as { detail: Array<{ loc: string[] }> }).detail[0].loc, [
      "body",
      "assistant_id",
    ]);
  });

  test("runs: pending until started, after_seconds, replay of an ended run, cancel of an ended run", async (t) => {
    const server = await startTestAgentServer(t, { open: true });
    if (!server) return;
    const client = server.client();
    const thread = await client.threads.create({ graphId: "echo" });

    // A background run answers `pending`; with after_seconds it stays pending until then.
    const delayed = await client.runs.create(thread.thread_id, "echo", { input: say("later"), afterSeconds: 1 });
    assert.equal(delayed.status, "pending");
    await sleep(300);
    assert.equal((await client.runs.get(thread.thread_id, delayed.run_id)).status, "pending");
    await client.runs.join(thread.thread_id, delayed.run_id);
    const done = await client.runs.get(thread.thread_id, delayed.run_id);
    assert.equal(done.status, "success");
    assert.ok(Date.parse(done.created_at) - Date.parse(thread.created_at) >= 900);

    // Stateless delayed run: waits, then answers.
    const t0 = Date.now();
    const stateless = (await client.runs.wait(null, "echo", { input: say("s"), afterSeconds: 0.5 })) as {
      messages: Array<{ content: string }>;
    };
    assert.equal(stateless.messages.at(-1)!.content, "echo: s");
    assert.ok(Date.now() - t0 >= 450);

    // An ended run's events replay from the start with Last-Event-ID -1 (the SDK's joinStream).
    const run = await client.runs.create(thread.thread_id, "echo", {
      input: say("replay me"),
      streamMode: ["values", "updates"],
      streamResumable: true,
    });
    await client.runs.join(thread.thread_id, run.run_id);
    const replayed = await collect(client.runs.joinStream(thread.thread_id, run.run_id, { lastEventId: "-1" }));
    assert.deepEqual(
      replayed.map((e) => e.event),
      ["metadata", "values", "updates", "values"],
    );
    // Without Last-Event-ID a join of an ended run just ends.
    assert.deepEqual(await collect(client.runs.joinStream(thread.thread_id, run.run_id)), []);

    // Cancelling a run that already ended is not an error.
    await client.runs.cancel(thread.thread_id, run.run_id);
    await client.runs.cancel(thread.thread_id, run.run_id, true);
    assert.equal((await client.runs.get(thread.thread_id, run.run_id)).status, "success");
  });

  test("threads: 409 on a state update during a run, supersteps, checkpoint metadata, bad updates are 400", async (t) => {
    const server = await startTestAgentServer(t, { open: true });
    if (!server) return;
    const client = server.client();
    const thread = await client.threads.create({ graphId: "slow" });
    const run = await client.runs.create(thread.thread_id, "slow", {
      input: say("sleep 600"),
      metadata: { topic: "meta" },
    });
    await assert.rejects(client.threads.updateState(thread.thread_id, { values: { messages: [] } }), /HTTP 409/);
    await client.runs.join(thread.thread_id, run.run_id);

    // Checkpoint metadata carries the run, graph and assistant and the run's metadata: history filters by run.
    const history = await client.threads.getHistory(thread.thread_id, { metadata: { run_id: run.run_id } });
    assert.ok(history.length >= 2);
    for (const h of history) {
      assert.equal(h.metadata?.run_id, run.run_id);
      assert.equal(h.metadata?.graph_id, "slow");
      assert.equal(h.metadata?.assistant_id, run.assistant_id);
      assert.equal(h.metadata?.topic, "meta");
    }
    assert.deepEqual(
      await client.threads.getHistory(thread.thread_id, {
        metadata: { run_id: "00000000-0000-4000-8000-000000000000" },
      }),
      [],
    );

    // An update naming a node the graph lacks is the caller's mistake: 400, not 500.
    await assert.rejects(
      client.threads.updateState(thread.thread_id, { values: { messages: [] }, asNode: "nope" }),
      /HTTP 400/,
    );

    // threads.create({supersteps}): each superstep a checkpoint, the last one the thread's state.
    const seeded = await client.threads.create({
      graphId: "echo",
      supersteps: [
        { updates: [{ values: { messages: [{ role: "human", content: "one" }] }, asNode: "echo" }] },
        { updates: [{ values: { messages: [{ role: "ai", content: "two" }] }, asNode: "echo" }] },
      ],
    });
    const state = await client.threads.getState<{ messages: Array<{ content: string }> }>(seeded.thread_id);
    assert.deepEqual(
      state.values.messages.map((m) => m.content),
      ["one", "two"],
    );
    assert.ok((await client.threads.getHistory(seeded.thread_id)).length >= 2);
    const next = (await client.runs.wait(seeded.thread_id, "echo", { input: say("three") })) as {
      messages: Array<{ content: string }>;
    };
    assert.deepEqual(
      next.messages.map((m) => m.content),
      ["one", "two", "three", "echo: three"],
    );
    const bad = await fetch(`${server.url}/threads`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ supersteps: [{ updates: [{ values: {}, as_node: "x" }] }] }),
    });
    assert.equal(bad.status, 422);
  });
});
