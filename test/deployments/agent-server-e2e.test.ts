import assert from "node:assert/strict";
import path from "node:path";
import { describe, test } from "node:test";
import { Client } from "@langchain/langgraph-sdk";
import { DIALECTS } from "../support/dialects.ts";
import { REPO_ROOT } from "../support/process.ts";
import { logsOf, pollRevision, startDeploymentsPlatform } from "./support.ts";

const ECHO = path.join(REPO_ROOT, "examples/echo-agent");
const CHAT = path.join(REPO_ROOT, "examples/chat-agent");

for (const dialect of DIALECTS) {
  describe(`deployments run the real agent server (${dialect})`, () => {
    test("deploy the echo example, talk to it with the official SDK through the stable URL, threads outlive a new revision", async (t) => {
      const p = await startDeploymentsPlatform(t, { dialect, real: true });
      if (!p) return;
      let res = await p.api("/v2/deployments", {
        method: "POST",
        json: { name: "echo", source: "internal_source", source_config: {}, source_revision_config: { langgraph_config_path: "langgraph.json", local_path: ECHO }, secrets: [{ name: "SOME_SECRET", value: "x" }] },
      });
      assert.equal(res.status, 201);
      const d = await res.json();
      const rev = await pollRevision(p, d.id, d.latest_revision_id, 90_000);
      assert.equal(rev.status, "DEPLOYED", `${rev.status_message}\n${await logsOf(p, d.id, rev.id, "build")}\n${await logsOf(p, d.id, rev.id, "deploy")}`);
      assert.match(await logsOf(p, d.id, rev.id, "deploy"), /health run of graph echo succeeded/);

      const client = new Client({ apiUrl: d.source_config.custom_url, apiKey: p.apiKey });
      const out = (await client.runs.wait(null, "echo", { input: { messages: [{ role: "human", content: "hi" }] } })) as { messages: Array<{ content: string; type: string }> };
      assert.deepEqual(out.messages.map((m) => [m.type, m.content]), [["human", "hi"], ["ai", "echo: hi"]]);
      const chunks = [];
      for await (const chunk of client.runs.stream(null, "echo", { input: { messages: [{ role: "human", content: "s" }] }, streamMode: "updates" })) chunks.push(chunk);
      assert.equal(chunks[0].event, "metadata");
      assert.ok(chunks.some((c) => c.event === "updates"));
      const assistants = await client.assistants.search({ limit: 10, offset: 0 });
      assert.ok(assistants.some((a) => a.graph_id === "echo"));
      const thread = await client.threads.create();

      res = await p.api(`/v2/deployments/${d.id}`, { method: "PATCH", json: { secrets: [{ name: "SOME_SECRET", value: "y" }] } });
      const next = (await res.json()).latest_revision_id;
      assert.equal((await pollRevision(p, d.id, next, 90_000)).status, "DEPLOYED");
      const again = await client.threads.get(thread.thread_id);
      assert.equal(again.thread_id, thread.thread_id);
      const bad = new Client({ apiUrl: d.source_config.custom_url, apiKey: "wharf_not-a-key" });
      await assert.rejects(bad.runs.wait(null, "echo", { input: { messages: [] } }), /401/);
    });
  });
}

describe("deployments with the project's custom auth", () => {
  test("the chat example deploys (health run as the developer), then answers its own bearer tokens only", async (t) => {
    const p = (await startDeploymentsPlatform(t, { real: true }))!;
    let res = await p.api("/v2/deployments", {
      method: "POST",
      json: { name: "chat", source: "internal_source", source_config: {}, source_revision_config: { langgraph_config_path: "langgraph.json", local_path: CHAT }, secrets: [] },
    });
    const d = await res.json();
    const rev = await pollRevision(p, d.id, d.latest_revision_id, 90_000);
    assert.equal(rev.status, "DEPLOYED", `${rev.status_message}\n${await logsOf(p, d.id, rev.id, "deploy")}`);
    const alice = new Client({ apiUrl: d.source_config.custom_url, defaultHeaders: { Authorization: "Bearer demo-token-alice" } });
    const out = (await alice.runs.wait(null, "agent", { input: { messages: [{ role: "human", content: "hello" }] } })) as { messages: unknown[] };
    assert.ok(out.messages.length >= 2);
    res = await fetch(`${d.source_config.custom_url}/threads/search`, { method: "POST", headers: { "content-type": "application/json", authorization: "Bearer nope" }, body: "{}" });
    assert.equal(res.status, 401);
  });
});
