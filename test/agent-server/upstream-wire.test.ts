import assert from "node:assert/strict";
import { test } from "node:test";
import { AIMessage, AIMessageChunk, HumanMessage } from "@langchain/core/messages";
import { debugCheckpoint } from "../../src/agent-server/runs/debug-events.ts";
import { toThreadState } from "../../src/agent-server/storage/thread-state.ts";
import { isMessageChunk, messageToDict } from "../../src/agent-server/wire.ts";

// Wire details the LangGraph JS server's own suites taught (scripts/upstream-suites.sh).

test("a streamed chunk from the project's own copy of @langchain/core is a chunk (legacy `messages` partials depend on it)", () => {
  // Another copy's classes share no prototype with ours: only the shape tells a chunk.
  class ForeignAIMessageChunk {
    content = "par";
    id = "m1";
    additional_kwargs = {};
    response_metadata = {};
    tool_calls = [];
    invalid_tool_calls = [];
    tool_call_chunks = [];
    _getType() {
      return "ai";
    }
    getType() {
      return "ai";
    }
    concat(other: ForeignAIMessageChunk) {
      return Object.assign(new ForeignAIMessageChunk(), { content: this.content + other.content });
    }
  }
  const table: Array<[unknown, boolean]> = [
    [new ForeignAIMessageChunk(), true],
    [new AIMessageChunk({ content: "x", id: "a" }), true],
    [new AIMessage({ content: "x", id: "a" }), false],
    [new HumanMessage("x"), false],
    [{ content: "x" }, false],
    [null, false],
  ];
  for (const [m, want] of table) assert.equal(isMessageChunk(m), want, JSON.stringify(m));
  assert.deepEqual(messageToDict(new ForeignAIMessageChunk() as never).tool_call_chunks, []);
});

test("debug checkpoints name the checkpoint as the thread's history does (checkpoint_ns, checkpoint_map null)", () => {
  const out = debugCheckpoint({
    config: { configurable: { thread_id: "t", checkpoint_id: "c2", checkpoint_ns: "", __pregel_x: 1 } },
    parentConfig: { configurable: { thread_id: "t", checkpoint_id: "c1" } },
    tasks: [],
  });
  assert.deepEqual(out.checkpoint, { thread_id: "t", checkpoint_ns: "", checkpoint_id: "c2", checkpoint_map: null });
  assert.deepEqual(out.parent_checkpoint, {
    thread_id: "t",
    checkpoint_ns: "",
    checkpoint_id: "c1",
    checkpoint_map: null,
  });
  assert.equal(debugCheckpoint({ config: null, parentConfig: undefined }).parent_checkpoint, null);
});

test("a pending task in the thread state has result null (a finished one its result)", () => {
  const state = toThreadState({
    values: {},
    next: ["weather_graph"],
    tasks: [
      {
        id: "1",
        name: "weather_graph",
        path: ["__pregel_pull", "weather_graph"],
        interrupts: [],
        state: { configurable: { thread_id: "t", checkpoint_ns: "weather_graph:1" } },
      },
      { id: "2", name: "done", path: [], interrupts: [], result: { x: 1 } },
    ],
    config: { configurable: { thread_id: "t", checkpoint_id: "c" } },
  });
  const tasks = state.tasks as Array<Record<string, unknown>>;
  assert.equal(tasks[0].result, null);
  assert.deepEqual(tasks[0].checkpoint, { thread_id: "t", checkpoint_ns: "weather_graph:1" });
  assert.deepEqual(tasks[1].result, { x: 1 });
});

test("a store handler's filter on namespace or key confines items; other keys (a threads' {owner}) are ignored", async () => {
  const { storeItemFilter } = await import("../../src/agent-server/auth/store-filters.ts");
  assert.equal(storeItemFilter(undefined), null);
  assert.equal(storeItemFilter({ owner: "alice" }), null);
  const contains = storeItemFilter({ namespace: { $contains: "alice" }, owner: "alice" })!;
  for (const [ns, want] of [
    [["alice"], true],
    [["docs", "alice"], true],
    [["ALL"], false],
    [["alicea"], false],
  ] as const)
    assert.equal(contains({ namespace: [...ns] }), want, ns.join("."));
  const eq = storeItemFilter({ namespace: { $eq: ["a", "b"] }, key: "k" })!;
  assert.equal(eq({ namespace: ["a", "b"], key: "k" }), true);
  assert.equal(eq({ namespace: ["a", "b"], key: "j" }), false);
  assert.equal(eq({ namespace: ["a", "b"] }), true, "a namespace listing has no key to compare");
  assert.equal(storeItemFilter({ namespace: "alice" })!({ namespace: ["x", "alice"] }), true);
});
