import assert from "node:assert/strict";
import fs from "node:fs";
import path from "node:path";
import { test } from "node:test";
import { Client } from "@langchain/langgraph-sdk";
import { createConsoleFeature } from "../../src/console/index.ts";
import { createDeploymentsFeature } from "../../src/deployments/index.ts";
import { allFeatures } from "../../src/platform/features.ts";
import { startTestPlatform, type TestPlatform } from "../support/platform.ts";
import { copyProject, FAKE_RUNNER, FAST, pollRevision, startDeploymentsPlatform } from "./support.ts";

const CSRF = "x-wharf-csrf";

async function deploy(p: TestPlatform, name: string, dir: string): Promise<{ id: string; latest_revision_id: string }> {
  const res = await p.api("/v2/deployments", {
    method: "POST",
    json: {
      name,
      source: "internal_source",
      source_config: {},
      source_revision_config: { langgraph_config_path: "langgraph.json", local_path: dir },
      secrets: [],
    },
  });
  assert.equal(res.status, 201);
  return res.json();
}

/** The headers the deployed code saw, as it would log them. */
async function seen(url: string, key: string): Promise<string> {
  const res = await fetch(`${url}/seen`, { headers: { "x-api-key": key } });
  assert.equal(res.status, 200);
  return res.text();
}

/** A console session like a signed-in browser's: its cookie and CSRF token. */
async function consoleSession(p: TestPlatform): Promise<{ cookie: string; csrf: string; value: string }> {
  const res = await fetch(`${p.url}/console/api/session`, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify({ api_key: p.apiKey }),
  });
  assert.equal(res.status, 201);
  const value = /wharf_session=([^;]+)/.exec(res.headers.getSetCookie().join("\n"))![1];
  return {
    cookie: `wharf_session=${value}; other=kept`,
    csrf: ((await res.json()) as { csrf_token: string }).csrf_token,
    value,
  };
}

test(
  "the stable URL never hands a caller's platform credential to the deployed code",
  { timeout: 120_000 },
  async (t) => {
    // With the console, whose session cookie is one of the credentials.
    const features = allFeatures().filter((f) => f.name === "identity" || f.name === "secrets");
    features.push(createDeploymentsFeature({ ...FAST, ...FAKE_RUNNER }), createConsoleFeature());
    const p = (await startTestPlatform(t, { features, logLevel: "info" }))!;
    if (!p) return;
    const plain = await deploy(p, "plain", copyProject(t, "echo"));
    const customDir = copyProject(t, "echo");
    fs.writeFileSync(
      path.join(customDir, "auth.ts"),
      "export const auth = { authenticate: () => ({ identity: 'someone' }) };\n",
    );
    fs.writeFileSync(
      path.join(customDir, "langgraph.json"),
      JSON.stringify({ graphs: { echo: "./graph.ts:graph" }, auth: { path: "./auth.ts:auth" } }),
    );
    const custom = await deploy(p, "custom", customDir);
    assert.equal((await pollRevision(p, plain.id, plain.latest_revision_id)).status, "DEPLOYED");
    assert.equal((await pollRevision(p, custom.id, custom.latest_revision_id)).status, "DEPLOYED");
    const token = (
      (await (await p.api("/v2/tokens", { method: "POST", json: { expires_in_seconds: 900 } })).json()) as {
        access_token: string;
      }
    ).access_token;
    const session = await consoleSession(p);
    const run = JSON.stringify({ assistant_id: "echo", input: { messages: [{ role: "human", content: "hi" }] } });

    await t.test("without custom auth: README's curl, the SDK, a bearer token, the console playground", async () => {
      const url = `${p.url}/deployments/${plain.id}`;
      // README: curl -H "x-api-key: $KEY" …/runs/wait
      let res = await fetch(`${url}/runs/wait`, {
        method: "POST",
        headers: { "x-api-key": p.apiKey, "content-type": "application/json" },
        body: run,
      });
      assert.equal(res.status, 200);
      // The LangGraph SDK with apiKey (what LANGSMITH_API_KEY becomes).
      const sdk = new Client({ apiUrl: url, apiKey: p.apiKey });
      await sdk.assistants.search({ graphId: "echo" });
      // A platform bearer token.
      res = await fetch(`${url}/runs/wait`, {
        method: "POST",
        headers: { authorization: `Bearer ${token}`, "content-type": "application/json" },
        body: run,
      });
      assert.equal(res.status, 200);
      // The console playground: bearer token, Studio's scheme, the CSRF header and the session cookie.
      res = await fetch(`${url}/runs/wait`, {
        method: "POST",
        headers: {
          authorization: `Bearer ${token}`,
          "x-auth-scheme": "langsmith",
          [CSRF]: session.csrf,
          cookie: session.cookie,
          "content-type": "application/json",
        },
        body: run,
      });
      assert.equal(res.status, 200);
      // A console session alone (the cookie) is a platform credential too.
      res = await fetch(`${url}/runs/wait`, {
        method: "POST",
        headers: { [CSRF]: session.csrf, cookie: session.cookie, "content-type": "application/json" },
        body: run,
      });
      assert.equal(res.status, 200);
      const log = await seen(url, p.apiKey);
      assert.ok(log.includes("x-wharf-principal"), "the agent server still learns who calls");
      for (const secret of [p.apiKey, token, session.value, session.csrf])
        assert.ok(!log.includes(secret), `the deployment saw a platform credential: ${log}`);
      assert.match(log, /other=kept/, "the caller's other cookies pass");
    });

    await t.test("with custom auth: the project's Authorization passes, platform credentials do not", async () => {
      const url = `${p.url}/deployments/${custom.id}`;
      // The project's own Authorization, next to a platform key sent out of habit (LANGSMITH_API_KEY set).
      let res = await fetch(`${url}/runs/wait`, {
        method: "POST",
        headers: {
          authorization: "Bearer project-own-token",
          "x-api-key": p.apiKey,
          "content-type": "application/json",
        },
        body: run,
      });
      assert.equal(res.status, 200);
      const sdk = new Client({
        apiUrl: url,
        apiKey: p.apiKey,
        defaultHeaders: { authorization: "Bearer project-own-token" },
      });
      await sdk.assistants.search({ graphId: "echo" });
      // Studio / the console playground's "platform" mode.
      res = await fetch(`${url}/runs/wait`, {
        method: "POST",
        headers: {
          authorization: `Bearer ${token}`,
          "x-auth-scheme": "langsmith",
          [CSRF]: session.csrf,
          cookie: session.cookie,
          "content-type": "application/json",
        },
        body: run,
      });
      assert.equal(res.status, 200);
      // A project header that is not a platform key is the project's: it passes.
      res = await fetch(`${url}/runs/wait`, {
        method: "POST",
        headers: { "x-api-key": "project-own-key", "content-type": "application/json" },
        body: run,
      });
      assert.equal(res.status, 200);
      const log = await seen(url, p.apiKey);
      assert.match(log, /Bearer project-own-token/);
      assert.match(log, /project-own-key/);
      for (const secret of [p.apiKey, token, session.value, session.csrf])
        assert.ok(!log.includes(secret), `the deployment saw a platform credential: ${log}`);
    });
  },
);

test(
  "a deployment that is not serving reads as not found to another workspace's key",
  { timeout: 120_000 },
  async (t) => {
    const p = (await startDeploymentsPlatform(t))!;
    if (!p) return;
    const d = await deploy(p, "broken", copyProject(t, "broken"));
    assert.equal((await pollRevision(p, d.id, d.latest_revision_id)).status, "BUILD_FAILED");
    const other = (await (await p.api("/v2/workspaces", { method: "POST", json: { name: "other" } })).json()) as {
      id: string;
    };
    const otherKey = (
      (await (
        await p.api("/v2/api-keys", { method: "POST", json: { name: "other" }, headers: { "x-tenant-id": other.id } })
      ).json()) as { key: string }
    ).key;
    const url = `${p.url}/deployments/${d.id}/assistants/search`;
    const call = (headers: Record<string, string>) =>
      fetch(url, { method: "POST", headers: { "content-type": "application/json", ...headers }, body: "{}" });
    assert.equal((await call({ "x-api-key": otherKey })).status, 404);
    assert.equal((await call({})).status, 401);
    assert.equal((await call({ "x-api-key": p.apiKey })).status, 503, "its own workspace learns it is not serving");
  },
);
