import assert from "node:assert/strict";
import { test } from "node:test";
import { graphRuntime, isLocalDependency } from "../../src/agent-server/project/project.ts";
import { encodeFrame, FrameDecoder, FrameError } from "../../src/agent-server/python/frames.ts";
import {
  envKey,
  installPlan,
  pythonIsRecentEnough,
  pythonVersionProblem,
  WORKER_REQUIREMENTS,
  type LocalKind,
} from "../../src/agent-server/python/install-plan.ts";
import { pythonRunConfig } from "../../src/agent-server/python/python-graph.ts";
import { AuthCache } from "../../src/agent-server/python/auth-cache.ts";
import { restartDelayMs } from "../../src/agent-server/python/restart-policy.ts";
import { toJsOperation, toPythonResult, type PythonStoreOp } from "../../src/agent-server/python/store-bridge.ts";

test("graphRuntime: .py files and module syntax are Python, the rest JavaScript", () => {
  const cases: Array<[string, "js" | "python"]> = [
    ["./src/agent/graph.py:graph", "python"],
    ["src/agent/graph.py:graph", "python"],
    ["./src/agent/graph.py", "python"],
    ["agent.graph:graph", "python"],
    ["my_pkg.sub.mod:make_graph", "python"],
    ["./src/agent.ts:graph", "js"],
    ["./src/agent.mjs:graph", "js"],
    ["src/agent.js", "js"],
    ["./dist/agent:graph", "js"],
    ["agent.ts:graph", "js"],
    ["graph", "js"],
  ];
  for (const [ref, want] of cases) assert.equal(graphRuntime(ref), want, ref);
});

test("isLocalDependency: folders are local, package names and URLs are not", () => {
  const cases: Array<[string, boolean]> = [
    [".", true],
    ["./libs/tools", true],
    ["../shared", true],
    ["/abs/pkg", true],
    ["langchain-openai>=1", false],
    ["git+https://example.invalid/x.git", false],
  ];
  for (const [d, want] of cases) assert.equal(isLocalDependency(d), want, d);
});

test("installPlan: packages editable, requirements folders on the path, names as written, then the worker's needs", () => {
  const kinds: Record<string, LocalKind> = { "/p/pkg": "package", "/p/req": "requirements", "/p/plain": "plain" };
  const cases: Array<[string[], string[], string[]]> = [
    [["/p/pkg"], ["-e", "/p/pkg"], []],
    [["/p/req"], ["-r", "/p/req/requirements.txt"], ["/p/req"]],
    [["/p/plain"], [], ["/p/plain"]],
    [["langchain-openai", "/p/pkg"], ["langchain-openai", "-e", "/p/pkg"], []],
  ];
  for (const [deps, args, pathDirs] of cases)
    assert.deepEqual(
      installPlan(deps, (d) => kinds[d]),
      { args: [...args, ...WORKER_REQUIREMENTS], pathDirs },
    );
  // The user's langgraph is never pinned.
  assert.ok(WORKER_REQUIREMENTS.every((r) => !/[<>=~]/.test(r)));
});

test("envKey changes with the Python version, the dependencies and their metadata files only", () => {
  const files: Record<string, string> = { "/p/pyproject.toml": "deps = a" };
  const read = (p: string) => files[p] ?? null;
  const base = envKey("3.11", ["/p"], read);
  assert.equal(envKey("3.11", ["/p"], read), base);
  assert.notEqual(envKey("3.12", ["/p"], read), base);
  assert.notEqual(envKey("3.11", ["/p", "x"], read), base);
  assert.notEqual(
    envKey("3.11", ["/p"], (p) => (p === "/p/pyproject.toml" ? "deps = b" : null)),
    base,
  );
});

test("pythonVersionProblem: a python_version newer than the host's interpreter is refused, naming both", () => {
  const cases: Array<[string | null, string, boolean]> = [
    [null, "3.11.2", false],
    ["3.11", "3.11.2", false],
    ["3.11", "3.12.1", false],
    ["3.12", "3.11.7", true],
    ["3.13", "3.12.0", true],
  ];
  for (const [req, host, bad] of cases)
    assert.equal(pythonVersionProblem(req, host) !== null, bad, `${req} on ${host}`);
  assert.match(pythonVersionProblem("3.12", "3.11.7")!, /python_version 3\.12.*3\.11\.7/);
});

test("pythonIsRecentEnough: 3.11 and newer", () => {
  const cases: Array<[string, boolean]> = [
    ["3.11.2", true],
    ["3.12.0", true],
    ["4.0.0", true],
    ["3.10.14", false],
    ["2.7.18", false],
  ];
  for (const [v, want] of cases) assert.equal(pythonIsRecentEnough(v), want, v);
});

test("frames: round trip whatever the chunking; oversized and malformed headers are errors", () => {
  const frames = [
    encodeFrame({ id: 1, op: "a" }, '{"x":1}'),
    encodeFrame({ id: 2, kind: "event", event: "values" }, Buffer.from("é".repeat(1000))),
    encodeFrame({ id: 3 }),
  ];
  const all = Buffer.concat(frames);
  for (const size of [1, 3, 7, 64, all.length]) {
    const d = new FrameDecoder();
    const got = [];
    for (let i = 0; i < all.length; i += size) got.push(...d.push(all.subarray(i, i + size)));
    assert.deepEqual(
      got.map((f) => f.header.id),
      [1, 2, 3],
    );
    assert.equal(got[0].body.toString(), '{"x":1}');
    assert.equal(got[1].body.toString(), "é".repeat(1000));
    assert.equal(got[2].body.length, 0);
  }
  const huge = Buffer.alloc(4);
  huge.writeUInt32BE(0xffffffff);
  assert.throws(() => new FrameDecoder().push(huge), FrameError);
  const bad = Buffer.alloc(8 + 3);
  bad.writeUInt32BE(3);
  bad.write("{{{", 4);
  assert.throws(() => new FrameDecoder().push(bad), FrameError);
});

test("pythonRunConfig: RunnableConfig keys in Python's spelling, nothing JavaScript-only", () => {
  assert.deepEqual(
    pythonRunConfig({
      configurable: { a: 1 },
      metadata: { m: 1 },
      tags: ["t"],
      recursionLimit: 5,
      store: {},
      runId: "r",
      signal: null,
    }),
    { configurable: { user_id: "", __after_seconds__: 0, a: 1 }, metadata: { m: 1 }, tags: ["t"], recursion_limit: 5 },
  );
  assert.equal(
    (pythonRunConfig({ configurable: { langgraph_auth_user_id: "u1" } }, 3).configurable as Record<string, unknown>)
      .user_id,
    "u1",
  );
});

test("restartDelayMs: doubles from 0.5 s, capped at 30 s", () => {
  assert.deepEqual([0, 1, 2, 10].map(restartDelayMs), [500, 1000, 2000, 30_000]);
});

test("store bridge: Python store operations become LangGraph JS operations, items come back with ISO dates", () => {
  const cases: Array<[PythonStoreOp, unknown]> = [
    [
      { kind: "get", namespace: ["a"], key: "k" },
      { namespace: ["a"], key: "k" },
    ],
    [
      { kind: "put", namespace: ["a"], key: "k", value: { x: 1 }, index: null },
      { namespace: ["a"], key: "k", value: { x: 1 } },
    ],
    [
      { kind: "put", namespace: ["a"], key: "k", value: null, index: false },
      { namespace: ["a"], key: "k", value: null, index: false },
    ],
    [
      { kind: "search", namespace_prefix: ["a"], filter: null, limit: 10, offset: 0, query: "q" },
      { namespacePrefix: ["a"], filter: undefined, limit: 10, offset: 0, query: "q" },
    ],
    [
      {
        kind: "list",
        match_conditions: [{ match_type: "prefix", path: ["a"] }],
        max_depth: null,
        limit: 100,
        offset: 0,
      },
      { matchConditions: [{ matchType: "prefix", path: ["a"] }], maxDepth: undefined, limit: 100, offset: 0 },
    ],
  ];
  for (const [op, want] of cases) assert.deepEqual(toJsOperation(op), want, op.kind);
  const d = new Date("2026-01-02T03:04:05.000Z");
  const item = { namespace: ["a"], key: "k", value: { x: 1 }, createdAt: d, updatedAt: d };
  assert.deepEqual(toPythonResult(cases[0][0], item), {
    namespace: ["a"],
    key: "k",
    value: { x: 1 },
    created_at: d.toISOString(),
    updated_at: d.toISOString(),
  });
  assert.deepEqual(toPythonResult(cases[3][0], [{ ...item, score: 0.5 }]), [
    {
      namespace: ["a"],
      key: "k",
      value: { x: 1 },
      created_at: d.toISOString(),
      updated_at: d.toISOString(),
      score: 0.5,
    },
  ]);
  assert.equal(toPythonResult(cases[0][0], null), null);
  assert.equal(toPythonResult(cases[1][0], undefined), null);
});

test("AuthCache: by the configured headers (hashed), for ttl_seconds, least recently used out first", () => {
  let now = 0;
  const cache = new AuthCache({ cacheKeys: ["authorization", "x-api-key"], ttlSeconds: 10, maxSize: 2 }, () => now);
  const ctx = (identity: string) => ({
    user: { identity, permissions: [], display_name: identity, is_authenticated: true },
    scopes: [],
  });
  assert.equal(cache.key(new Headers()), null);
  const a = cache.key(new Headers({ authorization: "Bearer a" }))!;
  const b = cache.key(new Headers({ "x-api-key": "b" }))!;
  const c = cache.key(new Headers({ authorization: "Bearer a", "x-api-key": "b" }))!;
  assert.equal(new Set([a, b, c]).size, 3);
  assert.doesNotMatch(a, /Bearer/);
  cache.set(a, ctx("a"));
  cache.set(b, ctx("b"));
  assert.equal(cache.get(a)?.user.identity, "a");
  cache.set(c, ctx("c"));
  assert.equal(cache.get(b), null, "b was the least recently used");
  assert.equal(cache.get(a)?.user.identity, "a");
  now = 10_000;
  assert.equal(cache.get(a), null, "expired");
});
