import assert from "node:assert/strict";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { test } from "node:test";
import { collect, startTestAgentServer } from "./support.ts";

// Stream modes as the LangGraph server sends them, with a chat model that streams tokens.
const PROJECT = path.join(path.dirname(fileURLToPath(import.meta.url)), "fixtures/thirdparty");
const hi = { messages: [{ role: "human", content: "hi" }] };
type Msg = { id?: string; content?: string; type?: string };

test("legacy messages, messages-tuple, debug checkpoints and events", async (t) => {
  const server = await startTestAgentServer(t, { project: PROJECT, open: true });
  if (!server) return;
  const client = server.client();
  const thread = await client.threads.create({ graphId: "chat" });

  // Legacy `messages` with `values`: partial chunks share the final message's id; values, then
  // messages/complete, end the stream.
  const legacy = await collect(
    client.runs.stream(thread.thread_id, "chat", { input: hi, streamMode: ["messages", "values"] }),
  );
  const names = legacy.map((e) => e.event);
  const partials = legacy.filter((e) => e.event === "messages/partial").map((e) => (e.data as Msg[])[0]);
  assert.ok(partials.length >= 2, names.join(","));
  const completes = legacy.filter((e) => e.event === "messages/complete").flatMap((e) => e.data as Msg[]);
  const final = completes.find((m) => m.type === "ai")!;
  assert.equal(final.content, "streamed answer");
  assert.ok(
    partials.every((p) => p.id === final.id),
    JSON.stringify(partials.map((p) => p.id)),
  );
  assert.equal(partials.at(-1)!.content, "streamed answer");
  assert.deepEqual(names.slice(-2), ["values", "messages/complete"]);
  assert.ok(names.includes("messages/metadata"));

  // messages-tuple: [chunk, metadata] with the run's metadata.
  const tuples = await collect(
    client.runs.stream(thread.thread_id, "chat", { input: hi, streamMode: "messages-tuple" }),
  );
  const first = tuples.find((e) => e.event === "messages")!.data as [Msg, Record<string, unknown>];
  assert.equal(first[1].langgraph_node, "chat");
  assert.equal(first[1].graph_id, "chat");

  // debug: checkpoint events carry checkpoint and parent_checkpoint, task results their result.
  const debug = await collect(client.runs.stream(thread.thread_id, "chat", { input: hi, streamMode: "debug" }));
  const checkpoints = debug
    .filter((e) => e.event === "debug" && (e.data as { type: string }).type === "checkpoint")
    .map((e) => (e.data as { payload: Record<string, any> }).payload);
  assert.ok(checkpoints.length >= 2);
  for (const c of checkpoints) {
    assert.equal(c.checkpoint.thread_id, thread.thread_id);
    assert.ok(c.checkpoint.checkpoint_id);
    assert.ok("parent_checkpoint" in c && "parent_config" in c && !("parentConfig" in c));
    assert.ok(!Object.keys(c.config.configurable).some((k: string) => k.startsWith("__")));
  }
  assert.ok(checkpoints.some((c) => c.parent_checkpoint?.checkpoint_id));
  const results = debug.filter((e) => e.event === "debug" && (e.data as { type: string }).type === "task_result");
  assert.ok(results.length >= 1);

  // events: the model's token events, not the root run's own on_chain_stream.
  const events = await collect(client.runs.stream(null, "chat", { input: hi, streamMode: "events" }));
  const evs = events
    .filter((e) => e.event === "events")
    .map((e) => e.data as { event: string; run_id: string; metadata?: Record<string, unknown> });
  assert.ok(evs.some((e) => e.event === "on_chat_model_stream"));
  const rootRunId = (events[0].data as { run_id: string }).run_id;
  assert.ok(!evs.some((e) => e.event === "on_chain_stream" && e.run_id === rootRunId));

  // Thread history entries carry their tasks' results.
  const history = await client.threads.getHistory(thread.thread_id, { limit: 20 });
  const withResult = history
    .flatMap((h) => h.tasks)
    .filter((task) => (task as { result?: unknown }).result !== undefined);
  assert.ok(withResult.length >= 1, JSON.stringify(history.map((h) => h.tasks)).slice(0, 500));

  // A subgraph paused on an interrupt: the parent's pending task carries the subgraph's checkpoint.
  const nested = await client.threads.create({ graphId: "nested" });
  await client.runs.wait(nested.thread_id, "nested", { input: hi });
  const paused = await client.threads.getState(nested.thread_id);
  const task = paused.tasks[0] as unknown as {
    name: string;
    checkpoint: { checkpoint_ns: string; thread_id: string } | null;
    interrupts: unknown[];
  };
  assert.equal(task.name, "inner");
  assert.match(task.checkpoint?.checkpoint_ns ?? "", /^inner:/);
  assert.equal(task.checkpoint?.thread_id, nested.thread_id);
  assert.equal(task.interrupts.length, 1);
});
