/**
 * How a Python project's environment is installed, as `wharf dev` and the agent server do it (the
 * deployments' confined build runs the same code): `pip_installer`, `pip_config_file` with a private
 * index on loopback, a folder with only `requirements.txt`, `git+https` over TLS with a test CA,
 * `source: {kind: "uv"}` with `uv.lock` (uv fetched from PyPI when it is not on PATH), the cache per
 * dependency key, the user's `langgraph` never pinned, and a `python_version` the host cannot give.
 * Creating an environment downloads from PyPI (a registry): these tests take a minute or two.
 */
import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { describe, test, type TestContext } from "node:test";
import { loadProject } from "../../src/agent-server/project/project.ts";
import { createPythonEnv, pythonEnvKey } from "../../src/agent-server/python/python-env.ts";
import { createLogger } from "../../src/log/logger.ts";
import { createTestCa } from "../egress/cloud/support/test-tls.ts";
import { startGitHttpServer } from "../support/git-http-server.ts";
import { startPrivateIndex } from "../support/python-index.ts";
import { pythonAvailable, requireCapability } from "../support/requirements.ts";
import { startTestAgentServer } from "./support.ts";

const FIXTURES = path.resolve(import.meta.dirname, "fixtures");
const PYTHON = process.env.WHARF_PYTHON || "python3";
/** A fresh cache: each test really installs (the shared test cache would make them no-ops). */
const ENVS = fs.mkdtempSync(path.join(os.tmpdir(), "wharf-pybuild-envs-"));
process.env.WHARF_PYTHON_ENVS = ENVS;
// These tests fetch uv from PyPI when it is not on PATH: the runner's shared uv (scripts/run-tests.mjs) is taken off it.
if (process.env.WHARF_TEST_UV_BIN)
  process.env.PATH = (process.env.PATH ?? "")
    .split(":")
    .filter((d) => d !== process.env.WHARF_TEST_UV_BIN)
    .join(":");
const log = createLogger({ level: "silent" });
/** langgraph's newest release on PyPI today is 1.2.24: the projects pin an older one on purpose. */
const USER_LANGGRAPH = "1.2.20";

function tempDir(t: TestContext, prefix: string): string {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), prefix));
  t.after(() => fs.rmSync(dir, { recursive: true, force: true }));
  return dir;
}

function writeTree(dir: string, files: Record<string, string>): void {
  for (const [name, text] of Object.entries(files)) {
    fs.mkdirSync(path.dirname(path.join(dir, name)), { recursive: true });
    fs.writeFileSync(path.join(dir, name), text);
  }
}

/** A graph that reports what it imported, in one node. */
const reportGraph = (imports: string, out: string) => `${imports}
from typing import TypedDict
from langgraph.graph import StateGraph


class State(TypedDict, total=False):
    out: str


def report(state: State) -> State:
    return {"out": ${out}}


graph = StateGraph(State).add_node("report", report).add_edge("__start__", "report").compile()
`;

async function serveAndRun(t: TestContext, project: string, graphId: string): Promise<string> {
  const server = await startTestAgentServer(t, { project });
  assert.ok(server);
  const out = (await server.client().runs.wait(null, graphId, { input: {} })) as { out?: string; __error__?: unknown };
  assert.ok(typeof out.out === "string", JSON.stringify(out));
  return out.out;
}

const envFolders = () => fs.readdirSync(ENVS).filter((n) => /^[0-9a-f]{16}$/.test(n));

// Independent (own projects, servers and environment keys in a fresh cache): run side by side,
// so one test's downloads and imports overlap another's instead of queueing.
describe("Python project builds", { concurrency: true }, () => {
  test("pip_installer pip with pip_config_file naming a private index on loopback, and a folder with only requirements.txt", async (t) => {
    if (
      !requireCapability(t, await pythonAvailable(), "python3 (3.11+) with venv and PyPI are needed for Python builds")
    )
      return;
    const index = await startPrivateIndex(t, {
      dist: "wharf-probe",
      version: "1.0",
      source: 'VALUE = "from the private index"',
      python: PYTHON,
    });
    const dir = tempDir(t, "wharf-pip-project-");
    writeTree(dir, {
      "langgraph.json": JSON.stringify({
        dependencies: ["./deps"],
        graphs: { probe: "./graph.py:graph" },
        pip_installer: "pip",
        pip_config_file: "pip.conf",
      }),
      "pip.conf": `[global]\nextra-index-url = ${index.url}\n`,
      "deps/requirements.txt": `wharf-probe==1.0\nlanggraph==${USER_LANGGRAPH}\n`,
      "deps/probe_helper.py": 'NAME = "helper on the path"\n',
      "graph.py": reportGraph(
        "from importlib.metadata import version\nimport probe_helper\nimport wharf_probe",
        "f\"{wharf_probe.VALUE}; {probe_helper.NAME}; langgraph {version('langgraph')}\"",
      ),
    });
    const made = await createPythonEnv({ project: loadProject(dir), python: PYTHON, envsDir: ENVS, log });
    assert.equal(made.installer, "pip");
    assert.ok(
      !fs.existsSync(path.join(path.dirname(path.dirname(made.python)), ".wharf-uv")),
      "pip_installer pip fetched uv",
    );
    assert.ok(index.seen.includes("/simple/wharf-probe/"), `the private index was not asked: ${index.seen}`);
    assert.equal(
      await serveAndRun(t, dir, "probe"),
      `from the private index; helper on the path; langgraph ${USER_LANGGRAPH}`,
    );
  });

  test("pip_installer uv fetches uv from PyPI when it is not on PATH and installs a git+https dependency served over TLS with a test CA", async (t) => {
    if (
      !requireCapability(t, await pythonAvailable(), "python3 (3.11+) with venv and PyPI are needed for Python builds")
    )
      return;
    const ca = await createTestCa();
    const tls = await ca.issue(["127.0.0.1"]);
    const caFile = path.join(tempDir(t, "wharf-ca-"), "ca.pem");
    fs.writeFileSync(caFile, ca.caPem);
    // git (which pip and uv run for git+https) trusts the test CA through its own variable.
    process.env.GIT_SSL_CAINFO = caFile;
    t.after(() => delete process.env.GIT_SSL_CAINFO);
    const repos = tempDir(t, "wharf-git-");
    const work = path.join(repos, "work");
    writeTree(work, {
      "pyproject.toml":
        '[project]\nname = "wharf-gittool"\nversion = "0.3.0"\n\n[build-system]\nrequires = ["hatchling"]\nbuild-backend = "hatchling.build"\n\n[tool.hatch.build.targets.wheel]\npackages = ["wharf_gittool"]\n',
      "wharf_gittool/__init__.py": 'VALUE = "from git over TLS"\n',
    });
    const git = (...args: string[]) =>
      execFileSync("git", args, {
        cwd: work,
        stdio: "pipe",
        env: {
          ...process.env,
          GIT_CONFIG_NOSYSTEM: "1",
          GIT_AUTHOR_NAME: "t",
          GIT_AUTHOR_EMAIL: "t@t",
          GIT_COMMITTER_NAME: "t",
          GIT_COMMITTER_EMAIL: "t@t",
        },
      });
    git("init", "-q", "-b", "main");
    git("add", ".");
    git("commit", "-qm", "tool");
    git("tag", "v1");
    execFileSync("git", ["clone", "-q", "--bare", work, path.join(repos, "gittool.git")], { stdio: "pipe" });
    const server = await startGitHttpServer(t, repos, { tls });
    const dir = tempDir(t, "wharf-uv-git-project-");
    writeTree(dir, {
      "langgraph.json": JSON.stringify({
        dependencies: [`wharf-gittool @ git+${server.url}/gittool.git@v1`],
        graphs: { git: "./graph.py:graph" },
        pip_installer: "uv",
      }),
      "graph.py": reportGraph("import wharf_gittool", "wharf_gittool.VALUE"),
    });
    const uvOnPath = (() => {
      try {
        execFileSync("uv", ["--version"], { stdio: "ignore" });
        return true;
      } catch {
        return false; // not installed: the build fetches it
      }
    })();
    const made = await createPythonEnv({ project: loadProject(dir), python: PYTHON, envsDir: ENVS, log });
    assert.equal(made.installer, "uv");
    assert.equal(
      fs.existsSync(path.join(path.dirname(path.dirname(made.python)), ".wharf-uv", "bin", "uv")),
      !uvOnPath,
      "uv was fetched exactly when it is not on PATH",
    );
    assert.equal(await serveAndRun(t, dir, "git"), "from git over TLS");
  });

  test("source kind uv installs exactly what uv.lock says (the user's langgraph stays pinned), cached per key on the next start", async (t) => {
    if (
      !requireCapability(t, await pythonAvailable(), "python3 (3.11+) with venv and PyPI are needed for Python builds")
    )
      return;
    const dir = tempDir(t, "wharf-uv-project-");
    fs.cpSync(path.join(FIXTURES, "python-uv-project"), dir, { recursive: true });
    // Keyed, not counted: the other tests of this file make their environments in the same cache meanwhile.
    const key = await pythonEnvKey({ project: loadProject(dir), python: PYTHON, envsDir: ENVS, log });
    assert.ok(!envFolders().includes(key), "the environment existed before its first start");
    const made = await createPythonEnv({ project: loadProject(dir), python: PYTHON, envsDir: ENVS, log });
    assert.deepEqual([made.installer, made.cached], ["uv", false]);
    assert.equal(await serveAndRun(t, dir, "uvagent"), `langgraph ${USER_LANGGRAPH}`);
    const started = performance.now();
    const again = await createPythonEnv({ project: loadProject(dir), python: PYTHON, envsDir: ENVS, log });
    const ms = performance.now() - started;
    console.log(`cached environment found in ${Math.round(ms)} ms`);
    assert.deepEqual([again.python, again.cached], [made.python, true]);
    assert.ok(envFolders().includes(key));
    // A changed lock is another environment.
    assert.equal(path.basename(path.dirname(path.dirname(made.python))), key);
    fs.appendFileSync(path.join(dir, "uv.lock"), "\n");
    assert.notEqual(await pythonEnvKey({ project: loadProject(dir), python: PYTHON, envsDir: ENVS, log }), key);
  });

  test("a python_version the host cannot provide fails naming it, before anything is installed", async (t) => {
    if (!requireCapability(t, await pythonAvailable(), "python3 (3.11+) with venv is needed for Python builds")) return;
    const dir = tempDir(t, "wharf-pyver-");
    writeTree(dir, {
      "langgraph.json": JSON.stringify({ python_version: "3.99", graphs: { a: "./graph.py:graph" } }),
      "graph.py": reportGraph("", '"x"'),
    });
    // A cache of its own: the other tests of this file install into theirs meanwhile.
    const envs = tempDir(t, "wharf-pyver-envs-");
    await assert.rejects(
      createPythonEnv({ project: loadProject(dir), python: PYTHON, envsDir: envs, log }),
      /python_version 3\.99; this host's interpreter is 3\.\d+\.\d+/,
    );
    assert.deepEqual(fs.readdirSync(envs), []);
  });
});
