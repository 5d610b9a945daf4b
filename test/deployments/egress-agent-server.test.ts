import assert from "node:assert/strict";
import crypto from "node:crypto";
import path from "node:path";
import { describe, test } from "node:test";
import { defaultRunnerCommand } from "../../src/deployments/runtime/agent-process.ts";
import { startUpstreams, useUpstreamsForEgress } from "../egress/support/upstreams.ts";
import { DIALECTS } from "../support/dialects.ts";
import { isRoot, requireCapability } from "../support/requirements.ts";
import { EGRESS_FIXTURES, startEgressPlatform } from "./egress-support.ts";
import { lastMessage, logsOf, pollRevision, runWait } from "./support.ts";

const SECRET = "tok_" + crypto.randomBytes(16).toString("hex");

/**
 * The real agent server (not the fixture) confined with egress attached: it starts with the
 * proxy's environment and CA files, and a LangGraph node's `fetch` to an HTTPS host goes through
 * interception with the deployment's header rule (from a workspace secret) applied.
 */
for (const dialect of DIALECTS)
  describe(`deployment egress with the real agent server (${dialect})`, () => {
    test("a graph node's fetch is intercepted and gets the workspace secret injected", async (t) => {
      if (!requireCapability(t, process.platform === "linux" && isRoot(), "confined deployments need root on Linux"))
        return;
      const up = await startUpstreams(t);
      useUpstreamsForEgress(up);
      // On PostgreSQL the namespace also holds the database forwarder's listener: both ways coexist.
      const p = await startEgressPlatform(t, {
        dialect,
        options: { runnerCommand: defaultRunnerCommand, runnerBinds: [] },
      });
      if (!p) return;
      assert.equal(
        (await p.api("/v2/secrets", { method: "PUT", json: [{ key: "API_TOKEN", value: SECRET }] })).status,
        200,
      );
      const res = await p.api("/v2/deployments", {
        method: "POST",
        json: {
          name: "real-egress",
          source: "internal_source",
          source_config: {},
          source_revision_config: {
            langgraph_config_path: "langgraph.json",
            local_path: path.join(EGRESS_FIXTURES, "real-project"),
          },
          secrets: [],
          proxy_config: {
            rules: [
              {
                name: "api",
                match_hosts: ["api.test"],
                match_paths: ["/v1/*"],
                headers: [{ name: "Authorization", type: "workspace_secret", value: "Bearer {API_TOKEN}" }],
              },
            ],
          },
        },
      });
      assert.equal(res.status, 201, await res.clone().text());
      const d = await res.json();
      const rev = await pollRevision(p, d.id, d.latest_revision_id, 120_000);
      assert.equal(
        rev.status,
        "DEPLOYED",
        `${rev.status_message}\n${await logsOf(p, d.id, rev.id, "build")}\n${await logsOf(p, d.id, rev.id, "deploy")}`,
      );
      const run = await runWait(d.source_config.custom_url, p.apiKey, "https://api.test/v1/real", "call");
      assert.equal(run.status, 200, JSON.stringify(run.body));
      assert.equal(lastMessage(run.body), "200");
      assert.equal(up.seen.find((e) => e.url === "/v1/real")?.headers.authorization, `Bearer ${SECRET}`);
      // Rotating the workspace secret reaches the running revision at once (no PATCH, no restart).
      const ROTATED = "tok_" + crypto.randomBytes(16).toString("hex");
      assert.equal(
        (await p.api("/v2/secrets", { method: "PUT", json: [{ key: "API_TOKEN", value: ROTATED }] })).status,
        200,
      );
      const rotatedAt = Date.now();
      for (;;) {
        const again = await runWait(d.source_config.custom_url, p.apiKey, "https://api.test/v1/rotated", "call");
        assert.equal(lastMessage(again.body), "200");
        if (up.seen.filter((e) => e.url === "/v1/rotated").at(-1)?.headers.authorization === `Bearer ${ROTATED}`) break;
        assert.ok(Date.now() - rotatedAt < 5000, "the rotated secret did not arrive");
      }
      assert.equal((await p.api(`/v2/deployments/${d.id}`, { method: "DELETE" })).status, 204);
      assert.ok(!p.logs().includes(SECRET) && !p.logs().includes(ROTATED));
    });
  });
