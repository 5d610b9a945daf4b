import assert from "node:assert/strict";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { describe, test } from "node:test";
import { Client } from "@langchain/langgraph-sdk";
import { DIALECTS } from "../support/dialects.ts";
import { REPO_ROOT } from "../support/process.ts";
import { logsOf, pollRevision, startDeploymentsPlatform, stateFile } from "./support.ts";

const ECHO = path.join(REPO_ROOT, "examples/echo-agent");
const CHAT = path.join(REPO_ROOT, "examples/chat-agent");

for (const dialect of DIALECTS) {
  describe(`deployments run the real agent server (${dialect})`, () => {
    test("deploy the echo example, talk to it with the official SDK through the stable URL, threads outlive a new revision, assistants follow the graphs", async (t) => {
      const p = await startDeploymentsPlatform(t, { dialect, real: true });
      if (!p) return;
      // The echo example with a second graph, which the next revision drops.
      const two = fs.mkdtempSync(path.join(os.tmpdir(), "wharf-echo2-"));
      t.after(() => fs.rmSync(two, { recursive: true, force: true }));
      fs.cpSync(ECHO, two, { recursive: true });
      const config = JSON.parse(fs.readFileSync(path.join(two, "langgraph.json"), "utf8"));
      config.graphs.echo2 = config.graphs.echo;
      fs.writeFileSync(path.join(two, "langgraph.json"), JSON.stringify(config));
      let res = await p.api("/v2/deployments", {
        method: "POST",
        json: {
          name: "echo",
          source: "internal_source",
          source_config: {},
          source_revision_config: { langgraph_config_path: "langgraph.json", local_path: two },
          secrets: [{ name: "SOME_SECRET", value: "x" }],
        },
      });
      assert.equal(res.status, 201);
      const d = await res.json();
      const rev = await pollRevision(p, d.id, d.latest_revision_id, 90_000);
      assert.equal(
        rev.status,
        "DEPLOYED",
        `${rev.status_message}\n${await logsOf(p, d.id, rev.id, "build")}\n${await logsOf(p, d.id, rev.id, "deploy")}`,
      );
      const deployLog = await logsOf(p, d.id, rev.id, "deploy");
      assert.match(deployLog, /graph echo is loaded/);
      assert.match(deployLog, /graph echo2 is loaded/);
      assert.doesNotMatch(deployLog, /smoke run/, "deploying runs nothing");

      const client = new Client({ apiUrl: d.source_config.custom_url, apiKey: p.apiKey });
      const out = (await client.runs.wait(null, "echo", {
        input: { messages: [{ role: "human", content: "hi" }] },
      })) as { messages: Array<{ content: string; type: string }> };
      assert.deepEqual(
        out.messages.map((m) => [m.type, m.content]),
        [
          ["human", "hi"],
          ["ai", "echo: hi"],
        ],
      );
      const chunks = [];
      for await (const chunk of client.runs.stream(null, "echo", {
        input: { messages: [{ role: "human", content: "s" }] },
        streamMode: "updates",
      }))
        chunks.push(chunk);
      assert.equal(chunks[0].event, "metadata");
      assert.ok(chunks.some((c) => c.event === "updates"));
      const assistants = await client.assistants.search({ limit: 10, offset: 0 });
      assert.deepEqual(assistants.map((a) => a.graph_id).sort(), ["echo", "echo2"]);
      const thread = await client.threads.create();
      await client.runs.wait(thread.thread_id, "echo2", { input: { messages: [{ role: "human", content: "kept" }] } });
      // The deployment's own database: a file in its state folder, or on PostgreSQL its own schema
      // (test/deployments/postgres-storage.test.ts looks inside).
      assert.equal(fs.existsSync(await stateFile(p, d.id, "wharf.db")), dialect === "sqlite");

      res = await p.api(`/v2/deployments/${d.id}`, {
        method: "PATCH",
        json: { source_revision_config: { local_path: ECHO }, secrets: [{ name: "SOME_SECRET", value: "y" }] },
      });
      const next = (await res.json()).latest_revision_id;
      assert.equal((await pollRevision(p, d.id, next, 90_000)).status, "DEPLOYED");
      const again = await client.threads.get(thread.thread_id);
      assert.equal(again.thread_id, thread.thread_id);
      assert.ok(JSON.stringify(again.values).includes("kept"), "the removed graph's thread stays readable");
      const after = await client.assistants.search({ limit: 10, offset: 0 });
      assert.deepEqual(
        after.map((a) => a.graph_id),
        ["echo"],
        "assistants of removed graphs are no longer listed",
      );
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
      json: {
        name: "chat",
        source: "internal_source",
        source_config: {},
        source_revision_config: { langgraph_config_path: "langgraph.json", local_path: CHAT },
        secrets: [],
      },
    });
    const d = await res.json();
    const rev = await pollRevision(p, d.id, d.latest_revision_id, 90_000);
    assert.equal(rev.status, "DEPLOYED", `${rev.status_message}\n${await logsOf(p, d.id, rev.id, "deploy")}`);
    const alice = new Client({
      apiUrl: d.source_config.custom_url,
      defaultHeaders: { Authorization: "Bearer demo-token-alice" },
    });
    const out = (await alice.runs.wait(null, "agent", {
      input: { messages: [{ role: "human", content: "hello" }] },
    })) as { messages: unknown[] };
    assert.ok(out.messages.length >= 2);
    res = await fetch(`${d.source_config.custom_url}/threads/search`, {
      method: "POST",
      headers: { "content-type": "application/json", authorization: "Bearer nope" },
      body: "{}",
    });
    assert.equal(res.status, 401);
  });
});
