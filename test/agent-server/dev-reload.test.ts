import assert from "node:assert/strict";
import { test } from "node:test";
import { shouldReload } from "../../src/cli/dev.ts";

test("wharf dev reloads on project sources, not on dot-folders, dependencies or build output", () => {
  const cases: Array<[string, boolean]> = [
    ["src/agent.ts", true],
    ["langgraph.json", true],
    [".env", true],
    [".env.local", true],
    ["src/.hidden.ts", false],
    [".langgraph_api/.langgraphjs_ops.json", false],
    [".langgraph_api", false],
    [".git/index", false],
    [".wharf/wharf.db-wal", false],
    [".next/cache/x.js", false],
    ["node_modules/x/index.js", false],
    ["dist/agent.js", false],
    ["build/agent.js", false],
    ["src/agent.ts.swp", false],
    ["src/agent.ts~", false],
    ["debug.log", false],
    ["data.sqlite", false],
    ["tsconfig.tsbuildinfo", false],
    ["src/agent/graph.py", true],
    ["src/agent/__pycache__/graph.cpython-311.pyc", false],
    ["src/agent.egg-info/PKG-INFO", false],
    ["agent.egg-info", false],
    [".venv/lib/python3.11/site-packages/x.py", false],
    ["", false],
  ];
  for (const [file, want] of cases) assert.equal(shouldReload(file), want, file);
});
