import assert from "node:assert/strict";
import { test } from "node:test";
import { needsPython } from "../../src/deployments/build/python-deps.ts";
import { pythonRegistryHosts } from "../../src/deployments/build/registry-hosts.ts";

test("needsPython: Python graphs (file or module syntax) or Python auth need an environment; JS projects do not", () => {
  const cases: Array<[Parameters<typeof needsPython>[0], boolean]> = [
    [{ graphs: { a: "./src/agent/graph.py:graph" } }, true],
    [{ graphs: { a: "agent.graph:graph" } }, true],
    [{ graphs: { a: { path: "./g.py:graph" } } }, true],
    [{ graphs: { a: "./g.ts:graph" }, auth: { path: "./auth.py:auth" } }, true],
    [{ graphs: { a: "./g.ts:graph", b: "./g.mjs" } }, false],
    [{ graphs: { a: "./g.ts:graph" }, auth: { path: "./auth.ts:auth" } }, false],
    [{}, false],
  ];
  for (const [config, want] of cases) assert.equal(needsPython(config), want, JSON.stringify(config));
});

test("pythonRegistryHosts: PyPI always, plus the indexes pip and uv read from the build's environment", () => {
  const cases: Array<[Record<string, string>, string[]]> = [
    [{}, ["pypi.org", "files.pythonhosted.org"]],
    [{ PIP_INDEX_URL: "https://pypi.corp.test/simple" }, ["pypi.org", "files.pythonhosted.org", "pypi.corp.test"]],
    [{ PIP_EXTRA_INDEX_URL: "https://a.test/simple  http://b.test:8080/simple", UV_INDEX_URL: "https://a.test/x" }, ["pypi.org", "files.pythonhosted.org", "a.test", "b.test:8080"]],
    [{ PIP_INDEX_URL: "file:///wheels" }, ["pypi.org", "files.pythonhosted.org"]],
  ];
  for (const [env, want] of cases) assert.deepEqual(pythonRegistryHosts(env), want, JSON.stringify(env));
});
