import assert from "node:assert/strict";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { describe, test } from "node:test";
import type { Client } from "@langchain/langgraph-sdk";
import { collect, memoryLogger, startTestAgentServer } from "./support.ts";

// A project written the way LangGraph JS users write them: langchain createAgent, deepagents
// createDeepAgent (both exported as is), a module calling getLogger() at import, a factory graph,
// and a module that throws at import.
const PROJECT = path.join(path.dirname(fileURLToPath(import.meta.url)), "fixtures/thirdparty");
const hi = (text: string) => ({ messages: [{ role: "human", content: text }] });
type Msg = { type: string; content: unknown; tool_calls?: Array<{ name: string }>; id?: string };
const messagesOf = (v: unknown) => (v as { messages: Msg[] }).messages;

/** Runs a graph four ways (stateless/thread × wait/stream) and returns the final messages of each. */
async function fourWays(client: Client, graphId: string, text: string): Promise<Msg[][]> {
  const out: Msg[][] = [];
  out.push(messagesOf(await client.runs.wait(null, graphId, { input: hi(text) })));
  const stateless = await collect(client.runs.stream(null, graphId, { input: hi(text), streamMode: "values" }));
  assert.equal(stateless[0].event, "metadata");
  assert.ok(!stateless.some((c) => c.event === "error"), JSON.stringify(stateless.filter((c) => c.event === "error")));
  out.push(messagesOf(stateless.at(-1)!.data));
  const thread = await client.threads.create({ graphId });
  out.push(messagesOf(await client.runs.wait(thread.thread_id, graphId, { input: hi(text) })));
  const onThread = await collect(
    client.runs.stream(thread.thread_id, graphId, { input: hi(text), streamMode: ["values", "updates"] }),
  );
  assert.ok(!onThread.some((c) => c.event === "error"), JSON.stringify(onThread.filter((c) => c.event === "error")));
  out.push(messagesOf(onThread.filter((c) => c.event === "values").at(-1)!.data));
  // The second run on the thread continued the first one's conversation.
  assert.equal(out[3].filter((m) => m.type === "human").length, 2);
  const state = await client.threads.getState(thread.thread_id);
  assert.deepEqual(
    messagesOf(state.values).map((m) => m.content),
    out[3].map((m) => m.content),
  );
  return out;
}

describe("third-party projects run unchanged", () => {
  test("createAgent, createDeepAgent, getLogger(), factory graphs; a graph that throws at import is reported and the others serve", async (t) => {
    const mem = memoryLogger();
    const server = await startTestAgentServer(t, { project: PROJECT, log: mem.log, open: true });
    if (!server) return;
    const client = server.client();

    // The broken module is named in the log and in /info; its graph has no assistant.
    const failed = mem.lines().find((l) => l.graphId === "broken");
    assert.ok(failed, "the load failure is logged");
    assert.equal(failed.module, "./src/broken.ts:graph");
    assert.match(String(failed.error), /broken graph: missing OPENAI_API_KEY/);
    const info = (await (await fetch(`${server.url}/info`)).json()) as {
      graph_errors?: Record<string, { module: string; error: string }>;
    };
    assert.deepEqual(Object.keys(info.graph_errors ?? {}), ["broken"]);
    assert.match(info.graph_errors!.broken.error, /missing OPENAI_API_KEY/);
    const graphs = (await client.assistants.search({ limit: 100 })).map((a) => a.graph_id).sort();
    assert.deepEqual(graphs, ["agent", "chat", "deep", "factory", "logged", "nested", "zod"]);

    // Schemas as LangGraph extracts them: registry metadata kept, context schema, none null.
    const schemas = (await client.assistants.getSchemas("zod")) as unknown as Record<
      string,
      { properties?: Record<string, Record<string, unknown>> } | null
    >;
    assert.equal(schemas.state_schema!.properties!.topic.langgraph_type, "prompt");
    assert.ok(schemas.input_schema!.properties!.answer);
    assert.deepEqual(Object.keys(schemas.context_schema!.properties!), ["tone"]);
    const agentSchemas = (await client.assistants.getSchemas("agent")) as unknown as Record<
      string,
      { properties?: Record<string, Record<string, unknown>> } | null
    >;
    assert.equal(agentSchemas.input_schema!.properties!.messages.langgraph_type, "messages");
    assert.equal(
      (
        (await client.runs.wait(null, "zod", { input: { topic: "tides" }, context: { tone: "dry" } })) as {
          answer: string;
        }
      ).answer,
      "about tides",
    );

    // createAgent with two tools: the model calls both, then answers with their results.
    for (const messages of await fourWays(client, "agent", "go")) {
      const types = messages.map((m) => m.type);
      assert.deepEqual(types.slice(-4), ["ai", "tool", "tool", "ai"], JSON.stringify(types));
      assert.deepEqual(
        messages.at(-4)!.tool_calls!.map((c) => c.name),
        ["add", "shout"],
      );
      assert.equal(messages.at(-1)!.content, "done: 5, HI");
    }

    // createDeepAgent: its own tool called through the deep agent's middleware stack.
    for (const messages of await fourWays(client, "deep", "weather?")) {
      assert.equal(messages.at(-1)!.content, "done: sunny in Oslo");
      assert.ok(messages.some((m) => m.type === "tool" && m.content === "sunny in Oslo"));
    }

    // getLogger(): the module loaded, and what it logs lands in the server's log.
    for (const messages of await fourWays(client, "logged", "x")) assert.equal(messages.at(-1)!.content, "logged: x");
    assert.ok(mem.lines().some((l) => l.msg === "logged graph loaded" && l.graph === "logged"));
    assert.ok(mem.lines().some((l) => l.msg === "say called" && l.source === "graph"));

    // Factory graph: built per run from the run's configuration, for runs and for thread state.
    for (const messages of await fourWays(client, "factory", "y")) assert.equal(messages.at(-1)!.content, "factory: y");
    const configured = await client.runs.wait(null, "factory", {
      input: hi("z"),
      config: { configurable: { prefix: "custom" } },
    });
    assert.equal(messagesOf(configured).at(-1)!.content, "custom: z");
    const thread = await client.threads.create({ graphId: "factory" });
    await client.runs.wait(thread.thread_id, "factory", { input: hi("first") });
    await client.threads.updateState(thread.thread_id, { values: { notes: ["by hand"] } });
    const state = await client.threads.getState<{ notes: string[] }>(thread.thread_id);
    assert.deepEqual(state.values.notes, ["answered", "by hand"]);
    const history = await client.threads.getHistory(thread.thread_id, { limit: 10 });
    assert.ok(history.length >= 3);
    await client.threads.updateState(thread.thread_id, {
      values: { messages: [{ role: "human", content: "added" }] },
      asNode: "answer",
    });
    assert.equal(messagesOf((await client.threads.getState(thread.thread_id)).values).at(-1)!.content, "added");
  });
});
