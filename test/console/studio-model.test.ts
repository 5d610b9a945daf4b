import assert from "node:assert/strict";
import { test } from "node:test";
import {
  layoutGraph,
  nodeFrame,
  nodeState,
  runningNodes,
  subgraphsOf,
  taskEvent,
  visibleId,
  type GraphJson,
} from "../../console/src/pages/studio/graph-model.ts";
import {
  changedKeys,
  editedPart,
  parseCommand,
  parseObject,
  resumeValue,
  skeletonFor,
  stepsOf,
  type ThreadStateLike,
} from "../../console/src/pages/studio/steps.ts";

/** What the agent server answers for the fixture's graph with `xray=true`. */
const XRAY: GraphJson = {
  nodes: ["__start__", "plan", "research:search", "research:summarize", "write", "review", "publish", "__end__"].map(
    (id) => ({ id }),
  ),
  edges: [
    { source: "research:search", target: "research:summarize" },
    { source: "__start__", target: "plan" },
    { source: "plan", target: "research:search" },
    { source: "publish", target: "__end__" },
    { source: "research:summarize", target: "write" },
    { source: "write", target: "review" },
    { source: "review", target: "publish", conditional: true },
    { source: "review", target: "__end__", conditional: true },
  ],
};

test("subgraphs collapse to one node and expand into theirs", () => {
  assert.deepEqual(subgraphsOf(XRAY), ["research"]);
  assert.deepEqual(subgraphsOf({ nodes: [{ id: "a:b:c" }, { id: "x" }], edges: [] }), ["a", "a:b"]);
  const subs = new Set(["a", "a:b"]);
  const table: Array<[string, string[], string]> = [
    ["a:b:c", [], "a"],
    ["a:b:c", ["a"], "a:b"],
    ["a:b:c", ["a", "a:b"], "a:b:c"],
    ["a:b:c", ["a:b"], "a"],
    ["x", [], "x"],
  ];
  for (const [path, open, want] of table)
    assert.equal(visibleId(path, subs, new Set(open)), want, `${path} with ${open.join(",")} open`);

  const collapsed = layoutGraph(XRAY, new Set());
  assert.deepEqual(collapsed.nodes.map((n) => `${n.id}:${n.kind}`).sort(), [
    "__end__:end",
    "__start__:start",
    "plan:node",
    "publish:node",
    "research:subgraph",
    "review:node",
    "write:node",
  ]);
  assert.deepEqual(collapsed.edges.map((e) => e.id).sort(), [
    "__start__->plan",
    "plan->research",
    "publish->__end__",
    "research->write",
    "review->__end__",
    "review->publish",
    "write->review",
  ]);
  assert.equal(collapsed.edges.find((e) => e.id === "review->publish")?.conditional, true);
  const open = layoutGraph(XRAY, new Set(["research"]));
  assert.ok(open.nodes.some((n) => n.id === "research:search" && n.parent === "research" && n.label === "search"));
  assert.ok(open.edges.some((e) => e.id === "research:search->research:summarize"));
  // Laid out top to bottom: every plain edge goes downwards.
  const y = new Map(open.nodes.map((n) => [n.id, n.y]));
  for (const e of open.edges.filter((x) => !x.conditional)) assert.ok(y.get(e.source)! < y.get(e.target)!, e.id);
});

test("tasks stream events move the highlight, in subgraphs too", () => {
  const table: Array<[string, unknown, ReturnType<typeof taskEvent>]> = [
    [
      "tasks",
      { id: "t1", name: "plan", input: {}, triggers: ["start:plan"] },
      { path: "plan", id: "t1", phase: "start" },
    ],
    [
      "tasks",
      { id: "t1", name: "plan", result: [], error: null, interrupts: [] },
      { path: "plan", id: "t1", phase: "end" },
    ],
    [
      "tasks|research:7f3a",
      { id: "t2", name: "search", input: {}, triggers: [] },
      { path: "research:search", id: "t2", phase: "start" },
    ],
    ["tasks|a:1|b:2", { id: "t3", name: "c", result: [] }, { path: "a:b:c", id: "t3", phase: "end" }],
    ["values", { topic: "x" }, null],
    ["tasks", null, null],
  ];
  for (const [event, data, want] of table) assert.deepEqual(taskEvent(event, data), want, event);
  const running = new Map([["t2", "research:search"]]);
  assert.deepEqual([...runningNodes(running, new Set(["research"]), new Set())], ["research"]);
  assert.deepEqual([...runningNodes(running, new Set(["research"]), new Set(["research"]))], ["research:search"]);
});

test("history becomes steps, oldest first, with writes and interrupts", () => {
  const history: ThreadStateLike[] = [
    {
      values: { topic: "t", draft: "d" },
      next: ["review"],
      checkpoint: { checkpoint_id: "c3" },
      parent_checkpoint: { checkpoint_id: "c2" },
      metadata: { step: 2, source: "loop", writes: { write: { draft: "d" } } },
      tasks: [{ id: "x", name: "review", interrupts: [{ value: { question: "Publish?" } }] }],
    },
    {
      values: { topic: "t" },
      next: ["write"],
      checkpoint: { checkpoint_id: "c2" },
      parent_checkpoint: { checkpoint_id: "c1" },
      metadata: { step: 1, source: "loop", writes: null },
    },
    { values: {}, next: ["__start__"], checkpoint: { checkpoint_id: "c1" }, metadata: { step: -1, source: "input" } },
  ];
  const steps = stepsOf(history);
  assert.deepEqual(
    steps.map((s) => [s.checkpointId, s.step, s.wrote.join(",")]),
    [
      ["c1", -1, "input"],
      ["c2", 1, "__start__"],
      ["c3", 2, "write"],
    ],
  );
  // Without metadata.writes (LangGraph JS keeps none), the writes are what changed since the parent.
  assert.deepEqual(steps[1].writes, { topic: "t" });
  assert.deepEqual(steps[2].writes, { write: { draft: "d" } });
  assert.deepEqual(steps[2].interrupts, [{ question: "Publish?" }]);
  assert.equal(steps[1].parentId, "c1");
  assert.deepEqual(changedKeys({ topic: "t" }, { topic: "t", draft: "d" }), ["draft"]);
  assert.deepEqual(changedKeys(null, { a: 1 }), ["a"]);
  // A fork sends only what was edited: a list with an appending reducer is not sent again.
  assert.deepEqual(editedPart({ notes: ["a"], draft: "d" }, { notes: ["a"], draft: "edited" }), { draft: "edited" });
});

test("what a person types: resume values, Commands, JSON objects, schema skeletons", () => {
  assert.equal(resumeValue("yes"), "yes");
  assert.equal(resumeValue("true"), true);
  assert.deepEqual(resumeValue('{"a":1}'), { a: 1 });
  const commands: Array<[string, boolean]> = [
    ['{"resume": "yes"}', true],
    ['{"goto": "publish", "update": {"draft": "x"}}', true],
    ['{"resume": 1, "extra": 2}', false],
    ["{}", false],
    ["[1]", false],
    ["yes", false],
  ];
  for (const [text, ok] of commands) assert.equal(parseCommand(text).ok, ok, text);
  const bad = parseCommand('{"resume": 1, "extra": 2}');
  assert.ok(!bad.ok && /extra/.test(bad.error));
  assert.deepEqual(parseObject("", "x"), { ok: true, value: {} });
  assert.equal(parseObject("[1]", "The state").ok, false);
  assert.match((parseObject("{", "The state") as { error: string }).error, /^The state is not valid JSON/);
  assert.deepEqual(
    skeletonFor({
      properties: {
        topic: { type: "string" },
        n: { type: ["integer", "null"] },
        tone: { type: "string", default: "plain" },
        any: {},
      },
    }),
    { topic: "", n: 0, tone: "plain" },
    "an untyped key is left out, not sent as null",
  );
  assert.deepEqual(skeletonFor(null), {});
});

test("a node's highlight, and its size handed to React Flow as measured (never hidden while it waits to be measured)", () => {
  const table: Array<[string, string[], string[], string[], string]> = [
    ["research", ["research"], ["research"], ["research"], "running"],
    ["review", [], ["review"], ["review"], "next"],
    ["plan", [], [], ["plan"], "visited"],
    ["write", ["research"], ["review"], ["plan"], "idle"],
  ];
  for (const [id, running, next, visited, want] of table)
    assert.equal(nodeState(id, new Set(running), next, new Set(visited)), want, id);

  for (const n of layoutGraph(XRAY, new Set(["research"])).nodes) {
    const f = nodeFrame(n);
    assert.deepEqual(f.measured, { width: n.width, height: n.height }, n.id);
    assert.deepEqual([f.width, f.height, f.position], [n.width, n.height, { x: n.x, y: n.y }], n.id);
    assert.equal(f.type, n.kind === "start" ? "input" : n.kind === "end" ? "output" : "default", n.id);
  }
});
