/**
 * Python `deepagents` (PyPI) with a scripted tool-calling model, deployed: its `LangSmithSandbox`
 * backend and the Python `langsmith` sandbox client, called from the graph with the deployment's
 * own scoped key (injected `LANGSMITH_ENDPOINT`/`LANGSMITH_API_KEY`), as the JS deep agent does.
 */
import assert from "node:assert/strict";
import dns from "node:dns/promises";
import path from "node:path";
import { describe, test } from "node:test";
import { Client } from "@langchain/langgraph-sdk";
import { createDeploymentsFeature } from "../../src/deployments/feature.ts";
import { allFeatures } from "../../src/platform/features.ts";
import { createSandboxesFeature } from "../../src/sandboxes/feature.ts";
import { startTestPlatform } from "../support/platform.ts";
import { isRoot, pythonAvailable, requireCapability } from "../support/requirements.ts";
import { BASE_CACHE } from "../sandboxes/support.ts";
import { FAST, FIXTURES, logsOf, pollRevision } from "./support.ts";

/** Where PyPI's names resolve on this machine (a mirror on a reserved network the operator allows). */
async function pypiMirror(): Promise<string> {
  const addrs = await Promise.all(
    ["pypi.org", "files.pythonhosted.org"].map((h) => dns.lookup(h, { all: true }).catch(() => [])),
  );
  return [...new Set(addrs.flat().map((a) => `${a.address}/${a.family === 6 ? 128 : 32}`))].join(",");
}

describe("a deployed Python deep agent uses sandboxes with the deployment's own credentials", () => {
  test("deepagents' LangSmithSandbox + the Python langsmith SandboxClient + a scripted model: it creates a sandbox and runs a command", async (t) => {
    if (!requireCapability(t, isRoot(), "sandboxes and confined deployments need root")) return;
    if (!requireCapability(t, await pythonAvailable(), "python3 (3.11+) with venv is needed for Python projects"))
      return;
    process.env.WHARF_EGRESS_ALLOW_INTERNAL = await pypiMirror();
    const features = allFeatures()
      .filter((f) => ["identity", "secrets", "egress"].includes(f.name))
      .concat(
        createSandboxesFeature({ WHARF_SANDBOX_BASE_CACHE: BASE_CACHE, WHARF_SANDBOX_TICK_MS: "200" }),
        createDeploymentsFeature({ ...FAST, isolation: true, buildTimeoutMs: 600_000, deployTimeoutMs: 120_000 }),
      );
    const p = (await startTestPlatform(t, { features, logLevel: "info" }))!;
    const res = await p.api("/v2/deployments", {
      method: "POST",
      json: {
        name: "deep-py",
        source: "internal_source",
        source_config: {},
        source_revision_config: {
          langgraph_config_path: "langgraph.json",
          local_path: path.join(FIXTURES, "projects", "python-deep-sandbox"),
        },
        secrets: [],
      },
    });
    assert.equal(res.status, 201, await res.clone().text());
    const d = await res.json();
    const rev = await pollRevision(p, d.id, d.latest_revision_id, 600_000);
    const build = await logsOf(p, d.id, rev.id, "build");
    assert.equal(rev.status, "DEPLOYED", `${rev.status_message}\n${build}\n${await logsOf(p, d.id, rev.id, "deploy")}`);
    assert.match(build, /installed with uv/);
    const boxes = async () =>
      (
        (await (await p.api("/v2/sandboxes/boxes?limit=100")).json()) as {
          sandboxes: Array<{ id: string; labels: Record<string, string> }>;
        }
      ).sandboxes;
    assert.deepEqual(await boxes(), [], "deploying created nothing");

    const client = new Client({
      apiUrl: d.source_config.custom_url,
      apiKey: p.apiKey,
      callerOptions: { maxRetries: 0 },
    });
    const out = (await client.runs.wait(null, "deep", {
      input: { messages: [{ role: "human", content: "run it" }] },
    })) as { messages: Array<{ type: string; content: unknown }> };
    // The Python client created the box with the deployment's own key: labelled as the deployment's.
    const made = await boxes();
    assert.equal(made.length, 1);
    assert.equal(made[0].labels["wharf-deployment"], d.id);
    assert.equal(made[0].labels["wharf-revision"], rev.id);
    const tool = out.messages.find((m) => m.type === "tool");
    assert.ok(tool, `the execute tool ran: ${JSON.stringify(out)}`);

    const del = await p.api(`/v2/deployments/${d.id}`, { method: "DELETE" });
    assert.equal(del.status, 204);
    assert.deepEqual(await boxes(), [], "the deployment's sandboxes went with it");
    // Python deepagents' `execute` runs the command in a wrapper that captures its output to a file
    // under /large_tool_results, a top-level folder the sandbox user creates (root on LangSmith).
    assert.match(String(tool.content), /from-the-sandbox\s+1000/, `the command's output: ${String(tool.content)}`);
  });
});
