import assert from "node:assert/strict";
import { test } from "node:test";
import { Client } from "@langchain/langgraph-sdk";
import { createAgentServerFeature } from "../../src/agent-server/index.ts";
import { startTestPlatform } from "../support/platform.ts";

test("the in-process agent-server feature serves the example agent at once: a stateless run answers through the SDK", async (t) => {
  // `wharf up` now serves the example through deployments (src/deployments/example-deployment.ts);
  // this feature serves a project inside the platform process without them.
  const p = await startTestPlatform(t, { dialect: "sqlite", features: [createAgentServerFeature()] });
  if (!p) return;
  const line = p
    .logs()
    .split("\n")
    .filter((l) => l.includes('"agent server is up"'))
    .map((l) => JSON.parse(l) as { url: string; graphs: string[] })[0];
  assert.ok(line, "the platform logs the agent server's URL");
  assert.deepEqual(line.graphs, ["agent"]);
  const client = new Client({
    apiUrl: line.url,
    apiKey: null,
    defaultHeaders: { Authorization: "Bearer demo-token-alice" },
    callerOptions: { maxRetries: 0 },
  });
  const result = (await client.runs.wait(null, "agent", {
    input: { messages: [{ role: "human", content: "hi" }] },
  })) as { messages: Array<{ type: string; content: string }> };
  assert.equal(result.messages[0].content, "hi");
  assert.match(result.messages.at(-1)!.content, /^You said: hi\. Hello alice/);
  // The example's auth applies: no token, no run.
  const res = await fetch(`${line.url}/runs/wait`, {
    method: "POST",
    body: JSON.stringify({ assistant_id: "agent", input: {} }),
  });
  assert.equal(res.status, 401);
});
