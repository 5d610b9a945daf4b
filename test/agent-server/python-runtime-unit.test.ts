import assert from "node:assert/strict";
import { test } from "node:test";
import type { AgentProject } from "../../src/agent-server/project/project.ts";
import { checkpointerSpec } from "../../src/agent-server/python/index.ts";
import { pickWorker } from "../../src/agent-server/python/worker-pool.ts";

test("pickWorker: the least busy worker that is up, the earliest on ties, none when all are down", () => {
  const cases: Array<[Array<{ up: boolean; runs: number }>, number | null]> = [
    [[{ up: true, runs: 0 }], 0],
    [
      [
        { up: true, runs: 1 },
        { up: true, runs: 0 },
      ],
      1,
    ],
    [
      [
        { up: true, runs: 2 },
        { up: true, runs: 2 },
        { up: true, runs: 1 },
      ],
      2,
    ],
    [
      [
        { up: true, runs: 0 },
        { up: true, runs: 0 },
      ],
      0,
    ],
    [
      [
        { up: false, runs: 0 },
        { up: true, runs: 3 },
      ],
      1,
    ],
    [
      [
        { up: false, runs: 0 },
        { up: false, runs: 0 },
      ],
      null,
    ],
  ];
  for (const [workers, want] of cases) assert.equal(pickWorker(workers), want, JSON.stringify(workers));
});

test("checkpointerSpec: PostgreSQL in the server's schema when the server runs on it, else a SQLite file; checkpointer.path and serde passed on", () => {
  const project = (path: string | null, serde: Record<string, unknown> | null) =>
    ({ pythonCheckpointer: { path, serde } }) as AgentProject;
  const cases: Array<[Parameters<typeof checkpointerSpec>[0], ReturnType<typeof checkpointerSpec>]> = [
    [
      { project: project(null, null), home: "/h", databaseUrl: null },
      { kind: "sqlite", path: "/h/python-checkpoints.sqlite", path_ref: null, serde: null },
    ],
    [
      { project: project(null, null), home: "/h", databaseUrl: "sqlite:/x.db" },
      { kind: "sqlite", path: "/h/python-checkpoints.sqlite", path_ref: null, serde: null },
    ],
    [
      { project: project(null, null), home: "/h", databaseUrl: "postgres://u@db/x", pgSchema: "dep_1" },
      { kind: "postgres", url: "postgres://u@db/x", schema: "dep_1", path_ref: null, serde: null },
    ],
    [
      { project: project(null, null), home: "/h", databaseUrl: "postgresql://u@db/x" },
      { kind: "postgres", url: "postgresql://u@db/x", path_ref: null, serde: null },
    ],
    [
      { project: project("./saver.py:make", { pickle_fallback: true }), home: "/h", databaseUrl: null },
      {
        kind: "sqlite",
        path: "/h/python-checkpoints.sqlite",
        path_ref: "./saver.py:make",
        serde: { pickle_fallback: true },
      },
    ],
  ];
  for (const [input, want] of cases) assert.deepEqual(checkpointerSpec(input), want, JSON.stringify(input.databaseUrl));
});
