/**
 * A deployed Python project whose `pip_config_file` names a private index: its confined build
 * reaches that index through the egress proxy although the deployment's `proxy_config` allows only
 * its agent's API (implied like the npm registry of an `.npmrc`), and its graph does not.
 */
import assert from "node:assert/strict";
import dns from "node:dns/promises";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { describe, test } from "node:test";
import { Client } from "@langchain/langgraph-sdk";
import { defaultRunnerCommand } from "../../src/deployments/runtime/agent-process.ts";
import { startPrivateIndex } from "../support/python-index.ts";
import { isRoot, pythonAvailable, requireCapability } from "../support/requirements.ts";
import { startEgressPlatform } from "./egress-support.ts";
import { logsOf, pollRevision } from "./support.ts";

/** Where PyPI's names resolve on this machine (a mirror on a reserved network the operator allows). */
async function pypiMirror(): Promise<string[]> {
  const addrs = await Promise.all(
    ["pypi.org", "files.pythonhosted.org"].map((h) => dns.lookup(h, { all: true }).catch(() => [])),
  );
  return [...new Set(addrs.flat().map((a) => `${a.address}/${a.family === 6 ? 128 : 32}`))];
}

describe("Python builds and the egress proxy", () => {
  test("the indexes of pip_config_file are reachable from the build only, as the npm registry is", async (t) => {
    if (!requireCapability(t, process.platform === "linux" && isRoot(), "confined deployments need root on Linux"))
      return;
    if (!requireCapability(t, await pythonAvailable(), "python3 (3.11+) with venv is needed for Python projects"))
      return;
    const index = await startPrivateIndex(t, {
      dist: "wharf-probe",
      version: "1.0",
      source: 'VALUE = "from the private index"',
      address: "127.0.0.3",
    });
    // Operator settings: the index's name resolves to the loopback server, whose address is allowed.
    process.env.WHARF_EGRESS_HOSTS = `pypi.corp.test:80=${index.address}:${index.port}`;
    process.env.WHARF_EGRESS_ALLOW_INTERNAL = [...(await pypiMirror()), `${index.address}/32`].join(",");
    const p = await startEgressPlatform(t, {
      options: {
        runnerCommand: defaultRunnerCommand,
        runnerBinds: [],
        buildTimeoutMs: 600_000,
        deployTimeoutMs: 120_000,
      },
    });
    if (!p) return;
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), "wharf-pipconf-"));
    t.after(() => fs.rmSync(dir, { recursive: true, force: true }));
    const files: Record<string, string> = {
      "langgraph.json": JSON.stringify({
        dependencies: ["./deps"],
        graphs: { probe: "./graph.py:graph" },
        pip_config_file: "pip.conf",
      }),
      // Plain HTTP: pip wants the host named trusted, as any user of such an index writes.
      "pip.conf": "[global]\nextra-index-url = http://pypi.corp.test/simple\ntrusted-host = pypi.corp.test\n",
      "deps/requirements.txt": "wharf-probe==1.0\n",
      "graph.py": [
        "import urllib.request",
        "from typing import TypedDict",
        "import wharf_probe",
        "from langgraph.graph import StateGraph",
        "class State(TypedDict, total=False):",
        "    out: str",
        "def report(state: State) -> State:",
        "    try:",
        "        urllib.request.urlopen('http://pypi.corp.test/simple/wharf-probe/', timeout=10)",
        "        reached = 'reached'",
        "    except Exception as e:",
        "        reached = f'refused {getattr(e, \"code\", type(e).__name__)}'",
        "    return {'out': f'{wharf_probe.VALUE}; index from the graph: {reached}'}",
        "graph = StateGraph(State).add_node('report', report).add_edge('__start__', 'report').compile()",
        "",
      ].join("\n"),
    };
    for (const [name, text] of Object.entries(files)) {
      fs.mkdirSync(path.dirname(path.join(dir, name)), { recursive: true });
      fs.writeFileSync(path.join(dir, name), text);
    }
    const res = await p.api("/v2/deployments", {
      method: "POST",
      json: {
        name: "pipconf",
        source: "internal_source",
        source_config: {},
        source_revision_config: { langgraph_config_path: "langgraph.json", local_path: dir },
        secrets: [],
        proxy_config: { access_control: { allow_list: ["api.test"] } },
      },
    });
    assert.equal(res.status, 201, await res.clone().text());
    const d = await res.json();
    const rev = await pollRevision(p, d.id, d.latest_revision_id, 600_000);
    const build = await logsOf(p, d.id, rev.id, "build");
    assert.equal(rev.status, "DEPLOYED", `${rev.status_message}\n${build}`);
    assert.match(build, /Python package sources reachable for this build besides PyPI: pypi\.corp\.test/);
    assert.ok(
      index.seen.includes("/simple/wharf-probe/"),
      `the build asked the private index: ${index.seen.join(", ")}`,
    );
    const before = index.seen.length;
    const js = new Client({
      apiUrl: d.source_config.custom_url as string,
      apiKey: p.apiKey,
      callerOptions: { maxRetries: 0 },
    });
    const out = (await js.runs.wait(null, "probe", { input: {} })) as { out: string };
    assert.equal(out.out, "from the private index; index from the graph: refused 403");
    assert.equal(index.seen.length, before, "the graph reached the index");
  });
});
