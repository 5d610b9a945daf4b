import assert from "node:assert/strict";
import path from "node:path";
import { test, type TestContext } from "node:test";
import type { Client } from "@langchain/langgraph-sdk";
import { runPythonClient, sdkPython } from "../support/python-client.ts";
import { pythonAvailable, requireCapability, TEST_PYTHON_ENVS } from "../support/requirements.ts";
import { protocolSseEvents, rootEnded } from "./protocol-support.ts";
import { startTestAgentServer, type TestAgentServer } from "./support.ts";

// A Python graph over the event-based streaming protocol (POST /threads/{id}/commands and
// /threads/{id}/stream/events): the worker streams langgraph's own protocol events (v3).
process.env.WHARF_PYTHON_ENVS = TEST_PYTHON_ENVS;
const PROJECT = path.resolve(import.meta.dirname, "fixtures/python-extras");
const ALL = ["lifecycle", "values", "updates", "messages", "tools", "input", "custom", "checkpoints", "tasks"];
const say = (content: string) => ({ messages: [{ role: "human", content }] });

async function start(t: TestContext): Promise<TestAgentServer | null> {
  if (!requireCapability(t, await pythonAvailable(), "python3 (3.11+) with venv is needed for Python graphs"))
    return null;
  return startTestAgentServer(t, { project: PROJECT });
}

const headers = (server: TestAgentServer) => ({ "x-api-key": server.apiKey!, "content-type": "application/json" });

async function command(server: TestAgentServer, threadId: string, body: unknown): Promise<any> {
  const res = await fetch(`${server.url}/threads/${threadId}/commands`, {
    method: "POST",
    headers: headers(server),
    body: JSON.stringify(body),
  });
  assert.equal(res.status, 200);
  return res.json();
}

const sseEvents = (
  server: TestAgentServer,
  threadId: string,
  filter: Record<string, unknown>,
  until: (events: any[]) => boolean,
) => protocolSseEvents(server.url, headers(server), threadId, filter, until, 20_000);

test("a Python graph over the protocol (SSE): values, streamed messages, tool calls, an interrupt answered, reconnect with since; the JS SDK's threads.stream() and the Python client's", async (t) => {
  const server = await start(t);
  if (!server) return;
  const threadId = crypto.randomUUID();
  const started = await command(server, threadId, {
    id: 1,
    method: "run.start",
    params: { assistant_id: "chat", input: say("ask me") },
  });
  assert.equal(started.type, "success", JSON.stringify(started));

  const events = await sseEvents(server, threadId, { channels: ALL }, rootEnded);
  const seqs = events.map((e) => e.seq);
  assert.deepEqual(
    seqs,
    [...seqs].sort((a, b) => a - b),
    "in seq order",
  );
  assert.deepEqual(
    events.filter((e) => e.method === "lifecycle" && !e.params.namespace.length).map((e) => e.params.data.event),
    ["running", "interrupted"],
  );
  const methods = new Set(events.map((e) => e.method));
  for (const m of ["values", "updates", "messages", "tools", "checkpoints", "tasks", "input.requested"])
    assert.ok(methods.has(m), `a ${m} event (got ${[...methods]})`);
  // Checkpoints as LangGraph JS publishes them: an envelope just before the values of that
  // checkpoint, each the parent of the next.
  const checkpoints = events.filter((e) => e.method === "checkpoints");
  assert.deepEqual(
    checkpoints.map((e) => [e.params.data.step, e.params.data.source]),
    [
      [0, "loop"],
      [1, "loop"],
      [2, "loop"],
      [3, "loop"],
    ],
  );
  for (const [i, c] of checkpoints.entries()) {
    assert.deepEqual(
      Object.keys(c.params.data),
      i === 0 && !c.params.data.parent_id ? ["id", "step", "source"] : ["id", "parent_id", "step", "source"],
    );
    if (i > 0) assert.equal(c.params.data.parent_id, checkpoints[i - 1].params.data.id);
    const next = events[events.indexOf(c) + 1];
    assert.equal(next.method, "values", `the values of checkpoint ${i} right after it`);
  }
  // Tasks: each node's start (input, triggers) and its result (the interrupt of `ask` included).
  const tasks = events.filter((e) => e.method === "tasks").map((e) => e.params.data);
  assert.deepEqual(
    tasks.map((d) => `${d.name}:${"result" in d ? "result" : "start"}`),
    [
      "agent:start",
      "agent:result",
      "tools:start",
      "tools:result",
      "agent:start",
      "agent:result",
      "ask:start",
      "ask:result",
    ],
  );
  assert.deepEqual(tasks[0].triggers, ["branch:to:agent"]);
  assert.equal(tasks[0].input.messages[0].content, "ask me");
  assert.equal(tasks[1].id, tasks[0].id);
  assert.deepEqual(
    tasks.at(-1).interrupts.map((i: any) => i.value),
    [{ question: "proceed?" }],
  );
  // Tool calls: the tool's start and end, and the model's call streamed as a content block.
  const tools = events.filter((e) => e.method === "tools").map((e) => e.params.data);
  assert.deepEqual(
    tools.map((d) => d.event),
    ["tool-started", "tool-finished"],
  );
  assert.equal(tools[0].tool_name, "lookup");
  assert.ok(
    events.some(
      (e) =>
        e.method === "messages" &&
        e.params.data.event === "content-block-finish" &&
        e.params.data.content?.type === "tool_call" &&
        e.params.data.content.name === "lookup",
    ),
    "the model's tool call",
  );
  // The reply streamed word by word.
  const deltas = events.filter(
    (e) =>
      e.method === "messages" &&
      e.params.data.event === "content-block-delta" &&
      e.params.data.delta?.type === "text-delta",
  );
  assert.equal(deltas.map((e) => e.params.data.delta.text).join(""), "I found notes on ask me");
  assert.ok(
    events.some((e) => e.method === "updates" && e.params.node === "tools"),
    "the tools node's update",
  );
  // State in the protocol's shape: messages with tool calls, never `__interrupt__`.
  const lastValues = events.filter((e) => e.method === "values" && !e.params.namespace.length).at(-1).params.data;
  assert.equal(lastValues.__interrupt__, undefined);
  assert.deepEqual(lastValues.messages[1].tool_calls, [
    { id: "call-1", name: "lookup", args: { q: "ask me" }, type: "tool_call" },
  ]);
  const asked = events.find((e) => e.method === "input.requested");
  assert.deepEqual(asked.params.data.payload, { question: "proceed?" });

  // Answer the interrupt; a reconnect with `since` gets only what came after, nothing lost.
  const since = events.at(-1).seq;
  const ok = await command(server, threadId, {
    id: 2,
    method: "input.respond",
    params: { interrupt_id: asked.params.data.interrupt_id, response: "yes" },
  });
  assert.equal(ok.type, "success", JSON.stringify(ok));
  const after = await sseEvents(server, threadId, { channels: ["lifecycle", "values"], since }, rootEnded);
  assert.equal(after[0].seq, since + 1, "nothing lost between the two connections");
  assert.deepEqual(
    after.filter((e) => e.method === "lifecycle" && !e.params.namespace.length).map((e) => e.params.data.event),
    ["running", "completed"],
  );
  assert.equal(after.filter((e) => e.method === "values").at(-1).params.data.answer, "yes");

  // state.get reads the Python saver's checkpoint.
  const state = await command(server, threadId, {
    id: 3,
    method: "state.get",
    params: { namespace: [], keys: ["answer"] },
  });
  assert.deepEqual(state.result.values, { answer: "yes" });
  const rest = await server.client().threads.getState(threadId);
  assert.equal(state.result.checkpoint.id, rest.checkpoint.checkpoint_id);

  // The official JS SDK's thread stream.
  const client: Client = server.client();
  const thread = client.threads.stream({ assistantId: "chat", transport: "sse" });
  const errors: Error[] = [];
  thread.onError((e: Error) => errors.push(e));
  const calls: any[] = [];
  const callsDone = (async () => {
    for await (const tc of thread.toolCalls) calls.push(tc);
  })();
  await thread.run.start({ input: say("from js") });
  const deadline = Date.now() + 20_000;
  while (!thread.interrupted) {
    assert.ok(Date.now() < deadline, "no interrupt through the JS SDK");
    await new Promise((r) => setTimeout(r, 50));
  }
  const interrupt = thread.interrupts[0] as any;
  await thread.input.respond({
    interrupt_id: interrupt.interruptId ?? interrupt.interrupt_id,
    response: "go",
  } as never);
  for (;;) {
    const s = await client.threads.getState<{ answer?: string }>(thread.threadId);
    if (s.values.answer === "go" && !s.next.length) break;
    assert.ok(Date.now() < deadline, `not resumed: ${JSON.stringify(s.values)}`);
    await new Promise((r) => setTimeout(r, 50));
  }
  assert.ok(calls.length >= 1 && calls[0].name === "lookup", `tool calls ${JSON.stringify(calls)}`);
  await thread.close();
  await Promise.race([callsDone, new Promise((r) => setTimeout(r, 500))]);
  assert.deepEqual(errors, []);

  // The official Python client's thread stream.
  const out = await runPythonClient(
    await sdkPython(),
    path.join(import.meta.dirname, "python-client/protocol_flows.py"),
    [server.url],
    { WHARF_TEST_API_KEY: server.apiKey! },
  );
  assert.match(out, /^ok$/m);
});
