import assert from "node:assert/strict";
import { describe, test } from "node:test";
import { DIALECTS } from "../support/dialects.ts";
import type { TestPlatform } from "../support/platform.ts";
import { copyProject, pollRevision, startDeploymentsPlatform } from "./support.ts";

function body(dir: string, extra: Record<string, unknown> = {}) {
  return {
    name: "api-test",
    source: "internal_source",
    source_config: {},
    source_revision_config: { langgraph_config_path: "langgraph.json", local_path: dir },
    secrets: [],
    ...extra,
  };
}

async function expect422(
  p: TestPlatform,
  path: string,
  method: string,
  json: unknown,
  loc: Array<string | number>,
): Promise<void> {
  const res = await p.api(path, { method, json });
  const text = await res.text();
  assert.equal(
    res.status,
    422,
    `${method} ${path} ${String(JSON.stringify(json)).slice(0, 200)} -> ${res.status} ${text}`,
  );
  const detail = JSON.parse(text).detail as Array<{ loc: unknown[]; msg: string; type: string }>;
  assert.ok(Array.isArray(detail) && detail.length > 0);
  assert.ok(
    detail.some((d) => JSON.stringify(d.loc) === JSON.stringify(loc)),
    `expected an issue at ${JSON.stringify(loc)}, got ${JSON.stringify(detail)}`,
  );
}

describe("deployments API: bad bodies are 422 with detail, nothing half-created", () => {
  test("create and patch validation", async (t) => {
    const p = (await startDeploymentsPlatform(t))!;
    const dir = copyProject(t, "echo");
    await expect422(p, "/v2/deployments", "POST", { ...body(dir), name: undefined }, ["body", "name"]);
    await expect422(
      p,
      "/v2/deployments",
      "POST",
      body(dir, { source: "external_docker", source_revision_config: { image_uri: "x/y:1" } }),
      ["body", "source"],
    );
    await expect422(p, "/v2/deployments", "POST", body(dir, { source: "nonsense" }), ["body", "source"]);
    await expect422(p, "/v2/deployments", "POST", body(dir, { source_revision_config: { local_path: dir } }), [
      "body",
      "source_revision_config",
      "langgraph_config_path",
    ]);
    await expect422(
      p,
      "/v2/deployments",
      "POST",
      body(dir, { source_revision_config: { local_path: dir, langgraph_config_path: "../x.json" } }),
      ["body", "source_revision_config", "langgraph_config_path"],
    );
    await expect422(
      p,
      "/v2/deployments",
      "POST",
      body(dir, {
        source_revision_config: { local_path: "/nonexistent/dir", langgraph_config_path: "langgraph.json" },
      }),
      ["body", "source_revision_config", "local_path"],
    );
    await expect422(
      p,
      "/v2/deployments",
      "POST",
      body(dir, {
        source_revision_config: { source_tarball_path: "uploads/x.tar.gz", langgraph_config_path: "langgraph.json" },
      }),
      ["body", "source_revision_config", "source_tarball_path"],
    );
    await expect422(p, "/v2/deployments", "POST", body(dir, { secrets: [{ name: "1BAD", value: "x" }] }), [
      "body",
      "secrets",
      0,
      "name",
    ]);
    await expect422(p, "/v2/deployments", "POST", body(dir, { secrets: [{ name: "DATABASE_URL", value: "x" }] }), [
      "body",
      "secrets",
      0,
      "name",
    ]);
    await expect422(
      p,
      "/v2/deployments",
      "POST",
      body(dir, {
        secrets: [
          { name: "A", value: "x" },
          { name: "A", value: "y" },
        ],
      }),
      ["body", "secrets", 1, "name"],
    );
    await expect422(p, "/v2/deployments", "POST", body(dir, { secrets: [{ name: "A" }] }), [
      "body",
      "secrets",
      0,
      "value",
    ]);
    await expect422(p, "/v2/deployments", "POST", body(dir, { source_config: { custom_url: "http://elsewhere" } }), [
      "body",
      "source_config",
      "custom_url",
    ]);
    await expect422(p, "/v2/deployments", "POST", body(dir, { source: "github", source_config: {} }), [
      "body",
      "source_config",
      "repo_url",
    ]);
    await expect422(p, "/v2/deployments", "POST", body(dir, { source_config: { deployment_type: "huge" } }), [
      "body",
      "source_config",
      "deployment_type",
    ]);
    const res0 = await p.api("/v2/deployments", {
      method: "POST",
      body: "{not json",
      headers: { "content-type": "application/json" },
    });
    assert.equal(res0.status, 422);
    assert.equal(
      (await p.api("/v2/deployments").then((r) => r.json())).resources.length,
      0,
      "no deployment was half-created",
    );

    let res = await p.api("/v2/deployments", {
      method: "POST",
      json: body(dir, {
        source_config: { deployment_type: "dev" },
        secrets: [{ name: "REPLY_PREFIX", value: "s3cret-value" }],
      }),
    });
    assert.equal(res.status, 201);
    const d = await res.json();
    res = await p.api("/v2/deployments", { method: "POST", json: body(dir) });
    assert.equal(res.status, 409);
    assert.match((await res.json()).detail, /already exists/);
    const path = `/v2/deployments/${d.id}`;
    await expect422(p, path, "PATCH", { source_config: { deployment_type: "prod" } }, [
      "body",
      "source_config",
      "deployment_type",
    ]);
    await expect422(p, path, "PATCH", { revision_source: "external_docker" }, ["body", "revision_source"]);
    await expect422(p, path, "PATCH", { secrets: [{ name: "NOPE", value: null }] }, ["body", "secrets", 0, "value"]);
    await expect422(p, path, "PATCH", { source_revision_config: { langgraph_config_path: "/abs.json" } }, [
      "body",
      "source_revision_config",
      "langgraph_config_path",
    ]);
    await expect422(p, "/v2/deployments/not-a-uuid", "GET", undefined, ["path", "deployment_id"]);
    await expect422(p, "/v2/deployments?limit=0", "GET", undefined, ["query", "limit"]);
    res = await p.api(`/v2/deployments/00000000-0000-7000-8000-000000000000`);
    assert.equal(res.status, 404);
    assert.deepEqual(await res.json(), { detail: "Deployment ID 00000000-0000-7000-8000-000000000000 not found." });

    // value:null keeps a secret: a GET → PATCH round trip changes nothing and makes no revision.
    const got = await (await p.api(path)).json();
    res = await p.api(path, { method: "PATCH", json: { secrets: got.secrets } });
    assert.equal(res.status, 200);
    assert.equal((await res.json()).latest_revision_id, d.latest_revision_id);
    const rev = await pollRevision(p, d.id, d.latest_revision_id);
    assert.equal(rev.status, "DEPLOYED");
    assert.ok(!p.logs().includes("s3cret-value"), "a secret value reached the platform log");
    const db = await (await p.api(`${path}/revisions/${rev.id}/deploy_logs`)).text();
    assert.ok(!db.includes("s3cret-value"));
    // LangSmith Deployment's CLI reads logs on /v1/projects/{project_id}/… with POST: the same pages.
    const v2Build = await (await p.api(`${path}/revisions/${rev.id}/build_logs?limit=5`)).json();
    res = await p.api(`/v1/projects/${d.id}/revisions/${rev.id}/build_logs`, {
      method: "POST",
      json: { limit: 5, offset: null, level: "info" },
    });
    assert.equal(res.status, 200);
    assert.deepEqual(await res.json(), v2Build);
    res = await p.api(`/v1/projects/${d.id}/revisions/${rev.id}/deploy_logs`, { method: "POST" });
    assert.equal(res.status, 200);
    assert.ok(Array.isArray((await res.json()).logs));
    await expect422(p, `/v1/projects/${d.id}/revisions/${rev.id}/build_logs`, "POST", { limit: 0 }, ["body", "limit"]);
    assert.equal(
      (
        await p.api(`/v1/projects/${d.id}/revisions/00000000-0000-7000-8000-000000000000/build_logs`, {
          method: "POST",
        })
      ).status,
      404,
    );
    assert.equal(
      (
        await p.api(`/v1/projects/${d.id}/revisions/${rev.id}/build_logs`, {
          method: "POST",
          headers: { "x-api-key": "nope" },
        })
      ).status,
      401,
    );
    res = await p.api(`${path}/revisions/${rev.id}/redeploy`, { method: "POST" });
    assert.equal(res.status, 200);
    res = await p.api(`/v2/deployments?deployment_ids=${d.id},00000000-0000-7000-8000-000000000000`, {
      method: "DELETE",
    });
    assert.equal(res.status, 207);
    assert.deepEqual((await res.json()).deleted, [d.id]);
  });
});

for (const dialect of DIALECTS) {
  describe(`deployments API: workspaces are isolated (${dialect})`, () => {
    test("a second workspace sees none of the first one's deployments, revisions, logs or URLs", async (t) => {
      const p = await startDeploymentsPlatform(t, { dialect });
      if (!p) return;
      const dir = copyProject(t, "echo");
      let res = await p.api("/v2/deployments", { method: "POST", json: body(dir) });
      const d = await res.json();
      res = await p.api("/v2/workspaces", { method: "POST", json: { name: "other" } });
      const other = await res.json();
      res = await p.api("/v2/api-keys", {
        method: "POST",
        json: { name: "other" },
        headers: { "x-tenant-id": other.id },
      });
      const otherKey = (await res.json()).key as string;
      const h = { "x-api-key": otherKey };
      assert.deepEqual((await (await p.api("/v2/deployments", { headers: h })).json()).resources, []);
      for (const path of [
        `/v2/deployments/${d.id}`,
        `/v2/deployments/${d.id}/revisions`,
        `/v2/deployments/${d.id}/revisions/${d.latest_revision_id}`,
        `/v2/deployments/${d.id}/revisions/${d.latest_revision_id}/build_logs`,
      ]) {
        res = await p.api(path, { headers: h });
        assert.equal(res.status, 404, path);
      }
      for (const [method, path] of [
        ["PATCH", `/v2/deployments/${d.id}`],
        ["DELETE", `/v2/deployments/${d.id}`],
        ["POST", `/v2/deployments/${d.id}/revisions/${d.latest_revision_id}/redeploy`],
      ]) {
        res = await p.api(path, { method, headers: h, json: method === "PATCH" ? { secrets: [] } : undefined });
        assert.equal(res.status, 404, `${method} ${path}`);
      }
      // The same name is free in the other workspace.
      res = await p.api("/v2/deployments", {
        method: "POST",
        json: body(dir, { source_revision_config: {} }),
        headers: h,
      });
      assert.equal(res.status, 201);
      const rev = await pollRevision(p, d.id, d.latest_revision_id);
      assert.equal(rev.status, "DEPLOYED");
      // The stable URL takes only this workspace's keys.
      const url = d.source_config.custom_url as string;
      const run = (key?: string) =>
        fetch(`${url}/runs/wait`, {
          method: "POST",
          headers: { "content-type": "application/json", ...(key ? { "x-api-key": key } : {}) },
          body: JSON.stringify({ assistant_id: "echo", input: { messages: [{ role: "human", content: "x" }] } }),
        });
      assert.equal((await run(otherKey)).status, 404);
      assert.equal((await run()).status, 401);
      assert.equal((await run(p.apiKey)).status, 200);
      assert.equal((await fetch(`${url}/ok`)).status, 200);
      res = await p.api(`/v2/deployments/${d.id}`, { method: "DELETE" });
      assert.equal(res.status, 204);
    });
  });
}
