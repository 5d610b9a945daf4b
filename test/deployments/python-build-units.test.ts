import assert from "node:assert/strict";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { test } from "node:test";
import { loadProject, type PythonBuild } from "../../src/agent-server/project/project.ts";
import { chooseInstaller, envKey } from "../../src/agent-server/python/install-plan.ts";
import { pipConfigIndexes, uvIndexArgs, type PipIndexes } from "../../src/agent-server/python/pip-config.ts";
import { needsPython } from "../../src/deployments/build/python-deps.ts";
import { pythonProjectHosts, pythonRegistryHosts } from "../../src/deployments/build/registry-hosts.ts";

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
    [
      { PIP_EXTRA_INDEX_URL: "https://a.test/simple  http://b.test:8080/simple", UV_INDEX_URL: "https://a.test/x" },
      ["pypi.org", "files.pythonhosted.org", "a.test", "b.test:8080"],
    ],
    [{ PIP_INDEX_URL: "file:///wheels" }, ["pypi.org", "files.pythonhosted.org"]],
  ];
  for (const [env, want] of cases) assert.deepEqual(pythonRegistryHosts(env), want, JSON.stringify(env));
});

test("pipConfigIndexes: pip's index options from [global] and [install] (install wins), multi-valued and continued", () => {
  const cases: Array<[string, Partial<PipIndexes>]> = [
    ["", {}],
    ["[global]\nindex-url = https://pypi.corp.test/simple\n", { indexUrl: "https://pypi.corp.test/simple" }],
    [
      "[global]\nindex_url=https://a.test/simple\n[install]\nindex-url = https://b.test/simple\n",
      { indexUrl: "https://b.test/simple" },
    ],
    [
      "[global]\nextra-index-url =\n    https://x.test/simple\n    https://y.test:8443/simple\nfind-links = /wheels http://w.test/links\n",
      {
        extraIndexUrls: ["https://x.test/simple", "https://y.test:8443/simple"],
        findLinks: ["/wheels", "http://w.test/links"],
      },
    ],
    [
      "# comment\n; other\n[global]\ntrusted-host = w.test\n[freeze]\nindex-url = https://ignored.test/\n",
      { trustedHosts: ["w.test"] },
    ],
    ["index-url = https://outside-a-section.test/\n", {}],
  ];
  for (const [text, want] of cases)
    assert.deepEqual(
      pipConfigIndexes(text),
      { indexUrl: null, extraIndexUrls: [], findLinks: [], trustedHosts: [], ...want },
      text,
    );
});

test("uvIndexArgs: the pip configuration's indexes as uv flags", () => {
  assert.deepEqual(uvIndexArgs({ indexUrl: null, extraIndexUrls: [], findLinks: [], trustedHosts: [] }), []);
  assert.deepEqual(
    uvIndexArgs({
      indexUrl: "https://a/simple",
      extraIndexUrls: ["https://b/simple"],
      findLinks: ["/w"],
      trustedHosts: ["b"],
    }),
    [
      "--index-url",
      "https://a/simple",
      "--extra-index-url",
      "https://b/simple",
      "--find-links",
      "/w",
      "--allow-insecure-host",
      "b",
    ],
  );
});

test("chooseInstaller: uv sources and pip_installer uv need uv (fetched when missing); auto takes uv only when it is there", () => {
  const cases: Array<[PythonBuild["installer"], boolean, boolean, { installer: "uv" | "pip"; fetchUv: boolean }]> = [
    ["auto", false, false, { installer: "pip", fetchUv: false }],
    ["auto", false, true, { installer: "uv", fetchUv: false }],
    ["pip", false, true, { installer: "pip", fetchUv: false }],
    ["uv", false, true, { installer: "uv", fetchUv: false }],
    ["uv", false, false, { installer: "uv", fetchUv: true }],
    ["auto", true, false, { installer: "uv", fetchUv: true }],
    ["auto", true, true, { installer: "uv", fetchUv: false }],
  ];
  for (const [installer, uvSource, onPath, want] of cases)
    assert.deepEqual(
      chooseInstaller({ installer, uv: uvSource ? { root: "/p", package: null } : null }, onPath),
      want,
      `${installer} ${uvSource} ${onPath}`,
    );
});

test("pythonProjectHosts: the indexes of pip_config_file, git+https dependency hosts and uv.lock sources, never credentials or file URLs", () => {
  const cases: Array<[Parameters<typeof pythonProjectHosts>[0], string[]]> = [
    [{ pipConfig: null, dependencies: ["langgraph", "."], uvLock: null }, []],
    [
      {
        pipConfig:
          "[global]\nindex-url = https://user:secret@pypi.corp.test/simple\nextra-index-url = http://127.0.0.3:8080/simple file:///w\n",
        dependencies: [],
        uvLock: null,
      },
      ["pypi.corp.test", "127.0.0.3:8080"],
    ],
    [
      {
        pipConfig: null,
        dependencies: [
          "git+https://git.corp.test/team/tools.git@v1#egg=tools",
          "tools2 @ git+https://tok@git2.test:8443/x.git",
        ],
        uvLock: null,
      },
      ["git.corp.test", "git2.test:8443"],
    ],
    [
      {
        pipConfig: null,
        dependencies: [],
        uvLock:
          'source = { registry = "https://pypi.org/simple" }\nsdist = { url = "https://files.pythonhosted.org/a.tar.gz" }\nsource = { git = "https://git.test/x.git?rev=1#abc" }\n',
      },
      ["pypi.org", "files.pythonhosted.org", "git.test"],
    ],
  ];
  for (const [input, want] of cases) assert.deepEqual(pythonProjectHosts(input), want, JSON.stringify(input));
});

test("envKey: the installer, pip_config_file and uv.lock are part of the key; the defaults keep earlier keys", () => {
  const read = () => null;
  const base = envKey("3.11", ["langgraph"], read);
  assert.equal(envKey("3.11", ["langgraph"], read, { installer: "auto", pipConfig: null, uv: null }), base);
  const variants = [
    envKey("3.11", ["langgraph"], read, { installer: "pip", pipConfig: null, uv: null }),
    envKey("3.11", ["langgraph"], read, { installer: "uv", pipConfig: null, uv: null }),
    envKey("3.11", ["langgraph"], read, { installer: "auto", pipConfig: "[global]\n", uv: null }),
    envKey("3.11", [], read, { installer: "auto", pipConfig: null, uv: { package: null, lock: "a", pyproject: null } }),
    envKey("3.11", [], read, { installer: "auto", pipConfig: null, uv: { package: null, lock: "b", pyproject: null } }),
    envKey("3.11", [], read, {
      installer: "auto",
      pipConfig: null,
      uv: { package: "member", lock: "b", pyproject: null },
    }),
  ];
  assert.equal(new Set([base, ...variants]).size, variants.length + 1);
});

test("loadProject: pip_installer, pip_config_file and source kind uv are read and checked as the LangGraph CLI does", () => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), "wharf-pybuild-"));
  try {
    const write = (cfg: Record<string, unknown>) =>
      fs.writeFileSync(path.join(dir, "langgraph.json"), JSON.stringify({ graphs: { a: "./g.py:graph" }, ...cfg }));
    fs.writeFileSync(path.join(dir, "g.py"), "graph = None\n");
    write({});
    assert.deepEqual(loadProject(dir).pythonBuild, { installer: "auto", pipConfigFile: null, uv: null });
    fs.writeFileSync(path.join(dir, "pip.conf"), "[global]\n");
    write({ pip_installer: "pip", pip_config_file: "pip.conf" });
    assert.deepEqual(loadProject(dir).pythonBuild, {
      installer: "pip",
      pipConfigFile: path.join(dir, "pip.conf"),
      uv: null,
    });
    assert.deepEqual(loadProject(dir).warnings, []);
    write({ pip_installer: "conda" });
    assert.throws(() => loadProject(dir), /pip_installer/);
    write({ pip_config_file: "missing.conf" });
    assert.throws(() => loadProject(dir), /pip_config_file .*file not found/);
    write({ source: { kind: "uv" } });
    assert.throws(() => loadProject(dir), /no uv\.lock/);
    fs.writeFileSync(path.join(dir, "uv.lock"), "version = 1\n");
    assert.deepEqual(loadProject(dir).pythonBuild.uv, { root: dir, package: null });
    write({ source: { kind: "uv", package: "member" }, dependencies: ["."] });
    assert.throws(() => loadProject(dir), /"dependencies" cannot be combined with source kind "uv"/);
    write({ source: { kind: "uv" }, pip_installer: "pip" });
    assert.throws(() => loadProject(dir), /pip_installer "pip" contradicts/);
  } finally {
    fs.rmSync(dir, { recursive: true, force: true });
  }
});
