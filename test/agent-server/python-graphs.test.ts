import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import path from "node:path";
import { after, describe, test, type TestContext } from "node:test";
import { DIALECTS } from "../support/dialects.ts";
import { pythonAvailable, requireCapability, TEST_PYTHON_ENVS } from "../support/requirements.ts";
import { collect, sharedAgentServer, startTestAgentServer, type TestAgentServer } from "./support.ts";

process.env.WHARF_PYTHON_ENVS = TEST_PYTHON_ENVS;
const MIXED = path.resolve(import.meta.dirname, "fixtures/python-mixed");
const hi = { messages: [{ role: "human", content: "hi" }] };

async function start(t: TestContext, dialect: (typeof DIALECTS)[number]) {
  if (!requireCapability(t, await pythonAvailable(), "python3 (3.11+) with venv is needed for Python graphs"))
    return null;
  return startTestAgentServer(t, { dialect, project: MIXED });
}

/**
 * One server per dialect for the tests that only add threads, runs and store items of their own;
 * the test that ends the worker starts its own.
 */
function sharedServer(dialect: (typeof DIALECTS)[number]) {
  const shared = sharedAgentServer({ dialect, project: MIXED });
  return {
    async get(t: TestContext): Promise<TestAgentServer | null> {
      if (!requireCapability(t, await pythonAvailable(), "python3 (3.11+) with venv is needed for Python graphs"))
        return null;
      return shared.get(t);
    },
    close: () => shared.close(),
  };
}

for (const dialect of DIALECTS) {
  describe(`Python graphs beside JavaScript ones, with the JS SDK (${dialect})`, () => {
    const shared = sharedServer(dialect);
    after(() => shared.close());

    test("assistants, graph errors, stateless wait and every stream mode with Python's own serialisation", async (t) => {
      const server = await shared.get(t);
      if (!server) return;
      const client = server.client();
      const info = (await (await fetch(`${server.url}/info`)).json()) as {
        graph_errors: Record<string, { error: string }>;
      };
      assert.match(info.graph_errors.broken.error, /RuntimeError: this graph is broken on purpose/);
      const assistants = await client.assistants.search({ limit: 20 });
      assert.deepEqual(assistants.map((a) => a.graph_id).sort(), [
        "ask",
        "chat",
        "crash",
        "crash_once",
        "echo",
        "js_echo",
        "memory",
        "nested",
        "slow",
      ]);
      // A Python graph's default assistant is named after the compiled graph; a JS one after its id.
      assert.equal(assistants.find((a) => a.graph_id === "nested")!.name, "Nested");
      assert.equal(assistants.find((a) => a.graph_id === "ask")!.description, "asks before answering");

      const py = (await client.runs.wait(null, "echo", { input: hi })) as { messages: Array<Record<string, unknown>> };
      const js = (await client.runs.wait(null, "js_echo", { input: hi })) as {
        messages: Array<Record<string, unknown>>;
      };
      assert.equal(py.messages[1].content, "echo: hi");
      assert.equal(js.messages[1].content, "echo: hi");
      // Python's model_dump(): no `example` (the JS server adds it), fields in Python's order.
      assert.deepEqual(Object.keys(py.messages[1]), [
        "content",
        "additional_kwargs",
        "response_metadata",
        "type",
        "name",
        "id",
        "tool_calls",
        "invalid_tool_calls",
        "usage_metadata",
      ]);
      assert.ok("example" in js.messages[1]);

      const chunks = await collect(
        client.runs.stream(null, "chat", {
          input: hi,
          streamMode: ["values", "updates", "messages-tuple", "custom", "debug"],
        }),
      );
      const events = chunks.map((c) => c.event);
      assert.equal(events[0], "metadata");
      for (const e of ["values", "updates", "messages", "custom", "debug"])
        assert.ok(events.includes(e as never), `no ${e} event in ${events}`);
      assert.deepEqual(chunks.find((c) => c.event === "custom")!.data, { progress: "thinking" });
      const tokens = chunks
        .filter((c) => c.event === "messages")
        .map((c) => c.data as [Record<string, unknown>, Record<string, unknown>]);
      assert.equal(tokens.map(([m]) => m.content).join(""), "hello there");
      assert.equal(tokens[0][0].type, "AIMessageChunk");
      assert.ok("chunk_position" in tokens[0][0]);
      assert.equal(tokens[0][1].langgraph_node, "call");
      const last = chunks.filter((c) => c.event === "values").at(-1)!.data as {
        messages: Array<{ type: string; content: string }>;
      };
      assert.deepEqual(
        last.messages.map((m) => [m.type, m.content]),
        [
          ["human", "hi"],
          ["ai", "hello there"],
        ],
      );

      // A factory receives the run's config (configurable), per run.
      const custom = (await client.runs.wait(null, "chat", {
        input: hi,
        config: { configurable: { reply: "bye now" } },
      })) as { messages: Array<{ content: string }> };
      assert.equal(custom.messages.at(-1)!.content, "bye now");

      // Legacy `messages`: metadata once, then accumulated partials.
      const legacy = await collect(client.runs.stream(null, "chat", { input: hi, streamMode: "messages" }));
      const partials = legacy
        .filter((c) => c.event === "messages/partial")
        .map((c) => (c.data as Array<{ content: string }>)[0].content);
      assert.equal(legacy.filter((c) => c.event === "messages/metadata").length, 1);
      assert.equal(partials.at(-1), "hello there");

      // `events`: astream_events v2 events, root stream chunks as their modes.
      const evs = await collect(client.runs.stream(null, "echo", { input: hi, streamMode: ["events", "values"] }));
      const kinds = evs.filter((c) => c.event === "events").map((c) => (c.data as { event: string }).event);
      assert.ok(kinds.includes("on_chain_start") && kinds.includes("on_chain_end"), kinds.join());
      assert.ok(evs.some((c) => c.event === "values"));

      // Subgraphs: namespaced event names, as `mode|ns`.
      const nested = await collect(
        client.runs.stream(null, "nested", { input: { n: 1 }, streamMode: ["updates"], streamSubgraphs: true }),
      );
      assert.ok(
        nested.some((c) => c.event.startsWith("updates|inner:")),
        nested.map((c) => c.event).join(),
      );
      assert.deepEqual(await client.runs.wait(null, "nested", { input: { n: 1 } }), { n: 4 });

      // A graph's error is the run's error event, with Python's class name.
      const drawn = await client.assistants.getGraph("nested");
      assert.ok(drawn.nodes.some((n) => n.id === "inner"));
      const schemas = await client.assistants.getSchemas("ask");
      assert.deepEqual(Object.keys((schemas.input_schema as { properties: object }).properties).sort(), [
        "answer",
        "question",
      ]);
      assert.ok(schemas.state_schema);
      const subs = await client.assistants.getSubgraphs("nested");
      assert.deepEqual(Object.keys(subs), ["inner"]);
    });

    test("threads: interrupt and Command resume, state, history and update through the Python checkpointer", async (t) => {
      const server = await shared.get(t);
      if (!server) return;
      const client = server.client();
      const thread = await client.threads.create({ graphId: "ask" });
      const first = (await client.runs.wait(thread.thread_id, "ask", { input: { question: "proceed?" } })) as Record<
        string,
        unknown
      >;
      const intr = first.__interrupt__ as Array<Record<string, unknown>>;
      assert.deepEqual(intr[0].value, { question: "proceed?" });
      // langgraph's own Interrupt fields (id, response_schema) as Python writes them.
      assert.deepEqual(Object.keys(intr[0]).sort(), ["id", "response_schema", "value"]);
      const paused = await client.threads.get(thread.thread_id);
      assert.equal(paused.status, "interrupted");
      const state = await client.threads.getState(thread.thread_id);
      assert.deepEqual(state.next, ["ask"]);
      assert.deepEqual(
        (state as unknown as { interrupts: Array<{ value: unknown }> }).interrupts.map((i) => i.value),
        [{ question: "proceed?" }],
      );
      assert.deepEqual(
        (state.tasks[0].interrupts as Array<{ value: unknown }>).map((i) => i.value),
        [{ question: "proceed?" }],
      );
      assert.equal(state.checkpoint.thread_id, thread.thread_id);

      const resumed = (await client.runs.wait(thread.thread_id, "ask", { command: { resume: "yes" } })) as Record<
        string,
        unknown
      >;
      assert.equal(resumed.answer, "you said yes");
      assert.equal((await client.threads.get(thread.thread_id)).status, "idle");
      assert.deepEqual((await client.threads.get(thread.thread_id)).values, {
        question: "proceed?",
        answer: "you said yes",
      });

      const history = await client.threads.getHistory(thread.thread_id, { limit: 10 });
      assert.ok(history.length >= 3);
      assert.deepEqual(history[0].values, { question: "proceed?", answer: "you said yes" });
      assert.ok(history.every((h) => h.checkpoint.checkpoint_id));

      const updated = await client.threads.updateState(thread.thread_id, {
        values: { answer: "changed" },
        asNode: "ask",
      });
      assert.ok((updated as unknown as { checkpoint: { checkpoint_id: string } }).checkpoint.checkpoint_id);
      assert.equal(
        ((await client.threads.getState(thread.thread_id)).values as Record<string, unknown>).answer,
        "changed",
      );
      assert.equal(((await client.threads.get(thread.thread_id)).values as Record<string, unknown>).answer, "changed");

      // Streams on a thread: thread-run SSE with ids; background run + join.
      const t2 = await client.threads.create();
      const streamed = await collect(
        client.runs.stream(t2.thread_id, "echo", { input: hi, streamMode: ["values", "debug"] }),
      );
      assert.equal(
        (streamed.filter((c) => c.event === "values").at(-1)!.data as { messages: unknown[] }).messages.length,
        2,
      );
      // debug checkpoints as the LangGraph server sends them: checkpoint/parent_checkpoint, no internal
      // config keys of langgraph's (the server's own `__after_seconds__` stays, as there).
      const chunks = streamed;
      const cp = chunks.find((c) => c.event === "debug" && (c.data as { type: string }).type === "checkpoint")!
        .data as { payload: Record<string, unknown> };
      assert.deepEqual(Object.keys(cp.payload.checkpoint as object).sort(), [
        "checkpoint_id",
        "checkpoint_ns",
        "thread_id",
      ]);
      assert.ok("parent_checkpoint" in cp.payload);
      const configurable = Object.keys((cp.payload.config as { configurable: object }).configurable);
      assert.ok(!configurable.some((k) => k.startsWith("__pregel")), configurable.join());
      assert.ok(configurable.includes("__after_seconds__") && configurable.includes("user_id"), configurable.join());

      const bg = await client.runs.create(t2.thread_id, "echo", {
        input: { messages: [{ role: "human", content: "again" }] },
      });
      await client.runs.join(t2.thread_id, bg.run_id);
      const after = (await client.threads.getState(t2.thread_id)).values as { messages: Array<{ content: string }> };
      assert.deepEqual(
        after.messages.map((m) => m.content),
        ["hi", "echo: hi", "again", "echo: again"],
      );

      // A stateless run calling interrupt() has no checkpointer: it fails, as on the LangGraph server.
      const stateless = await collect(client.runs.stream(null, "ask", { input: {}, streamMode: "values" }));
      // A stateless run calling interrupt() ends with it (no checkpointer to resume from), sent once.
      const stops = stateless.filter((c) => c.event === "values" && "__interrupt__" in (c.data as object));
      assert.equal(stops.length, 1);
      assert.deepEqual((stops[0].data as { __interrupt__: Array<{ value: unknown }> }).__interrupt__[0].value, {
        question: "ok?",
      });
      // Only messages asked for on a thread: nothing else is sent, the interrupt is in the thread's
      // state (as langgraph dev does: test/agent-server/fixtures/python-wire/recorded.json).
      const t3 = await client.threads.create();
      const onlyMessages = await collect(
        client.runs.stream(t3.thread_id, "ask", { input: {}, streamMode: "messages-tuple" }),
      );
      assert.deepEqual(
        onlyMessages.filter((c) => c.event !== "metadata").map((c) => c.event),
        [],
      );
      assert.equal((await client.threads.get(t3.thread_id)).status, "interrupted");

      // Copy and delete reach the Python checkpoints too.
      const copy = await client.threads.copy(thread.thread_id);
      assert.equal(
        ((await client.threads.getState(copy.thread_id)).values as Record<string, unknown>).answer,
        "changed",
      );
      await client.threads.delete(thread.thread_id);
      await assert.rejects(client.threads.getState(thread.thread_id), /404/);
      assert.equal(
        ((await client.threads.getState(copy.thread_id)).values as Record<string, unknown>).answer,
        "changed",
      );
    });

    test("the store: Python nodes (async and sync) read and write the items the API sees", async (t) => {
      const server = await shared.get(t);
      if (!server) return;
      const client = server.client();
      await client.store.putItem(["memories", "u1"], "http", { text: "from http" });
      const out = (await client.runs.wait(null, "memory", { input: { key: "k1", text: "hi" } })) as Record<
        string,
        unknown
      >;
      assert.deepEqual(out.found, ["http", "k1"]);
      assert.deepEqual(out.got, { text: "hi" });
      assert.deepEqual(out.namespaces, [["memories", "u1"]]);
      assert.equal(out.sync, "hi");
      assert.deepEqual((await client.store.getItem(["memories", "u1"], "k1"))?.value, { text: "hi" });
    });

    test("cancel: interrupt stops an awaiting Python node and keeps its checkpoints, rollback removes the run's", async (t) => {
      const server = await shared.get(t);
      if (!server) return;
      const client = server.client();
      const started = async (threadId: string) => {
        const run = await client.runs.create(threadId, "slow", { input: {} });
        for (
          let i = 0;
          i < 200 && (((await client.threads.getState(threadId)).values as { step?: number }).step ?? 0) < 1;
          i++
        )
          await new Promise((r) => setTimeout(r, 50));
        return run;
      };
      const kept = await client.threads.create();
      const r1 = await started(kept.thread_id);
      const t0 = Date.now();
      await client.runs.cancel(kept.thread_id, r1.run_id, true, "interrupt");
      assert.ok(Date.now() - t0 < 10_000, "the node awaiting asyncio.sleep(60) was not cancelled");
      assert.equal((await client.runs.get(kept.thread_id, r1.run_id)).status, "interrupted");
      assert.deepEqual((await client.threads.getState(kept.thread_id)).values, { step: 1 });

      const rolled = await client.threads.create();
      const r2 = await started(rolled.thread_id);
      await client.runs.cancel(rolled.thread_id, r2.run_id, true, "rollback");
      await assert.rejects(client.runs.get(rolled.thread_id, r2.run_id), /404/);
      assert.deepEqual((await client.threads.getState(rolled.thread_id)).values, {});
      assert.deepEqual(await client.threads.getHistory(rolled.thread_id), []);
    });

    test("a node calling os._exit ends only the worker: its run fails, /ok says so, the worker comes back", async (t) => {
      const server = await start(t, dialect);
      if (!server) return;
      const client = server.client();
      const res = await fetch(`${server.url}/runs/wait`, {
        method: "POST",
        headers: { "content-type": "application/json", "x-api-key": server.apiKey! },
        body: JSON.stringify({ assistant_id: "crash", input: {} }),
      });
      const body = (await res.json()) as { __error__?: { error: string; message: string } };
      assert.equal(body.__error__?.error, "WorkerCrashed");
      assert.match(body.__error__!.message, /exit code 7/);
      const ok = await fetch(`${server.url}/ok`);
      assert.equal(ok.status, 503);
      // JavaScript graphs of the project keep serving meanwhile.
      assert.equal(
        ((await client.runs.wait(null, "js_echo", { input: hi })) as { messages: unknown[] }).messages.length,
        2,
      );
      // A request waits for the restarted worker.
      assert.equal(
        ((await client.runs.wait(null, "echo", { input: hi })) as { messages: unknown[] }).messages.length,
        2,
      );
      assert.equal((await fetch(`${server.url}/ok`)).status, 200);

      // A thread run whose node ends the worker resumes once from its checkpoint (attempt 2).
      const thread = await client.threads.create();
      const chunks = await collect(
        client.runs.stream(thread.thread_id, "crash_once", { input: {}, streamMode: "values" }),
      );
      assert.deepEqual(
        chunks.filter((c) => c.event === "metadata").map((c) => (c.data as unknown as { attempt: number }).attempt),
        [1, 2],
      );
      assert.deepEqual(chunks.at(-1)!.data, { before: true, done: true });
      assert.equal((await client.threads.get(thread.thread_id)).status, "idle");
    });
  });
}

test("a Python graph that ends the interpreter at import fails the start with its stderr, and leaves no worker restarting", async (t) => {
  if (!requireCapability(t, await pythonAvailable(), "python3 (3.11+) with venv is needed for Python graphs")) return;
  const before = new Set(pythonWorkers());
  await assert.rejects(
    startTestAgentServer(t, { project: path.resolve(import.meta.dirname, "fixtures/python-exit-at-import") }),
    /did not start \(exit code 3\)[\s\S]*leaving at import/,
  );
  await new Promise((r) => setTimeout(r, 1500));
  assert.deepEqual(
    pythonWorkers().filter((p) => !before.has(p)),
    [],
  );
});

/** Pids of this process's Python workers (children running `-m wharf_worker`). */
function pythonWorkers(): number[] {
  let out = "";
  try {
    out = execFileSync("ps", ["-o", "pid=,args=", "--ppid", String(process.pid)]).toString();
  } catch {
    // ps exits 1 when the process has no children: none are workers.
  }
  return out
    .split("\n")
    .filter((l) => l.includes("wharf_worker"))
    .map((l) => Number(l.trim().split(/\s+/)[0]));
}
