import assert from "node:assert/strict";
import path from "node:path";
import { describe, test } from "node:test";
import { Client } from "@langchain/langgraph-sdk";
import { createDeploymentsFeature } from "../../src/deployments/feature.ts";
import { allFeatures } from "../../src/platform/features.ts";
import { createSandboxesFeature } from "../../src/sandboxes/feature.ts";
import { startTestPlatform } from "../support/platform.ts";
import { isRoot, requireCapability } from "../support/requirements.ts";
import { BASE_CACHE } from "../sandboxes/support.ts";
import { FAST, FIXTURES, logsOf, pollRevision } from "./support.ts";

describe("a deployed deep agent uses sandboxes with the deployment's own credentials", () => {
  test("deepagents' LangSmithSandbox backend + a scripted model, run through the SDK: it creates a sandbox and runs a command; the sandbox is gone once the deployment is deleted", async (t) => {
    if (!requireCapability(t, isRoot(), "sandboxes and confined deployments need root")) return;
    const features = allFeatures()
      .filter((f) => ["identity", "secrets", "egress"].includes(f.name))
      .concat(
        createSandboxesFeature({ WHARF_SANDBOX_BASE_CACHE: BASE_CACHE, WHARF_SANDBOX_TICK_MS: "200" }),
        createDeploymentsFeature({ ...FAST, isolation: true }),
      );
    const p = (await startTestPlatform(t, { features, logLevel: "info" }))!;
    const res = await p.api("/v2/deployments", {
      method: "POST",
      json: {
        name: "deep",
        source: "internal_source",
        source_config: {},
        source_revision_config: {
          langgraph_config_path: "langgraph.json",
          local_path: path.join(FIXTURES, "projects", "deep-sandbox"),
        },
        secrets: [],
      },
    });
    assert.equal(res.status, 201, await res.clone().text());
    const d = await res.json();
    const rev = await pollRevision(p, d.id, d.latest_revision_id, 90_000);
    assert.equal(
      rev.status,
      "DEPLOYED",
      `${rev.status_message}\n${await logsOf(p, d.id, rev.id, "build")}\n${await logsOf(p, d.id, rev.id, "deploy")}`,
    );
    const boxes = async () =>
      (
        (await (await p.api("/v2/sandboxes/boxes?limit=100")).json()) as {
          sandboxes: Array<{ id: string; labels: Record<string, string> }>;
        }
      ).sandboxes;
    assert.deepEqual(await boxes(), [], "deploying created nothing");

    const client = new Client({ apiUrl: d.source_config.custom_url, apiKey: p.apiKey });
    const out = (await client.runs.wait(null, "deep", {
      input: { messages: [{ role: "human", content: "run it" }] },
    })) as { messages: Array<{ type: string; content: unknown }> };
    const text = JSON.stringify(out.messages);
    assert.match(text, /from-the-sandbox/, text);
    assert.match(text, /1000/, "the command ran as the sandbox's user");
    const made = await boxes();
    assert.equal(made.length, 1);
    assert.equal(made[0].labels["wharf-deployment"], d.id);
    assert.equal(made[0].labels["wharf-revision"], rev.id);

    const del = await p.api(`/v2/deployments/${d.id}`, { method: "DELETE" });
    assert.equal(del.status, 204);
    assert.deepEqual(await boxes(), [], "the deployment's sandboxes went with it");
  });
});
