import assert from "node:assert/strict";
import { test } from "node:test";
import { convertProtocolEvent, lifecycleOf } from "../../src/agent-server/protocol/normalize.ts";
import { matches, unknownChannels } from "../../src/agent-server/protocol/filters.ts";
import type { ProtocolEvent } from "../../src/agent-server/protocol/events.ts";

test("protocol conversion: root lifecycle owned by the thread, interrupts lifted out of state once, updates flattened", () => {
  const state = { announced: new Set<string>() };
  const cases: Array<
    [Parameters<typeof convertProtocolEvent>[0], Array<{ method: string; data?: unknown; node?: string }>]
  > = [
    [{ method: "lifecycle", namespace: [], data: { event: "running" } }, []],
    [
      { method: "lifecycle", namespace: ["sub:1"], data: { event: "started" } },
      [{ method: "lifecycle", data: { event: "started" } }],
    ],
    [
      { method: "values", namespace: [], data: { a: 1, __interrupt__: [{ id: "i1", value: "q" }] } },
      [
        { method: "input.requested", data: { interrupt_id: "i1", payload: "q" } },
        { method: "values", data: { a: 1 } },
      ],
    ],
    [{ method: "updates", namespace: [], data: { node: "__interrupt__", values: [{ id: "i1", value: "q" }] } }, []],
    [{ method: "values", namespace: [], data: { __interrupt__: [{ id: "i1", value: "q" }] } }, []],
    [
      {
        method: "updates",
        namespace: [],
        data: {
          node: "n",
          values: {
            messages: [
              {
                type: "ai",
                content: "x",
                tool_calls: [{ id: "c", name: "t", args: '{"a":1}' }],
                additional_kwargs: {},
              },
            ],
          },
        },
      },
      [
        {
          method: "updates",
          node: "n",
          data: {
            messages: [
              { type: "ai", content: "x", tool_calls: [{ id: "c", name: "t", args: { a: 1 }, type: "tool_call" }] },
            ],
          },
        },
      ],
    ],
    [
      { method: "custom:progress", namespace: [], data: 5 },
      [{ method: "custom", data: { name: "progress", payload: 5 } }],
    ],
  ];
  for (const [input, want] of cases) {
    const got = convertProtocolEvent(input, state).map((b) => ({
      method: b.method,
      ...(b.node ? { node: b.node } : {}),
      data: b.data,
    }));
    assert.deepEqual(
      got,
      want.map((w) => ({ method: w.method, ...(w.node ? { node: w.node } : {}), data: w.data })),
      JSON.stringify(input),
    );
  }
  assert.deepEqual(["success", "error", "interrupted", "pending", "running"].map(lifecycleOf), [
    "completed",
    "failed",
    "interrupted",
    "running",
    "running",
  ]);
});

test("protocol filters: channels (bare custom takes named ones), namespace prefixes with depth, unknown channels", () => {
  const ev = (method: string, namespace: string[], data: unknown = {}): ProtocolEvent => ({
    type: "event",
    event_id: "1",
    seq: 1,
    method,
    params: { namespace, timestamp: 0, data },
  });
  const cases: Array<[Parameters<typeof matches>[0], ProtocolEvent, boolean]> = [
    [{ channels: new Set(["values"]) }, ev("values", []), true],
    [{ channels: new Set(["values"]) }, ev("updates", []), false],
    [{ channels: new Set(["input"]) }, ev("input.requested", []), true],
    [{ channels: new Set(["custom"]) }, ev("custom", [], { name: "x", payload: 1 }), true],
    [{ channels: new Set(["values"]), namespaces: [["sub"]] }, ev("values", ["sub:abc", "inner:1"]), true],
    [{ channels: new Set(["values"]), namespaces: [["sub"]], depth: 0 }, ev("values", ["sub:abc", "inner:1"]), false],
    [{ channels: new Set(["values"]), namespaces: [["other"]] }, ev("values", ["sub:abc"]), false],
  ];
  for (const [filter, event, want] of cases)
    assert.equal(matches(filter, event), want, `${[...filter.channels]} ${event.method} ${event.params.namespace}`);
  assert.deepEqual(unknownChannels(["values", "custom:x", "nope"]), ["nope"]);
});
