import assert from "node:assert/strict";
import crypto from "node:crypto";
import { test } from "node:test";
import { Client } from "@langchain/langgraph-sdk";
import { copyProject } from "../deployments/support.ts";
import { replicaId, startReplicas, waitFor, type Replica } from "./support.ts";

type Messages = { messages: Array<{ content: string }> };
const ask = (client: Client, text: string) =>
  client.runs.wait(null, "echo", { input: { messages: [{ role: "human", content: text }] } }) as Promise<Messages>;

/**
 * A deployment's revision runs on one replica; its stable URL answers on every replica, the others
 * forwarding to the owner's internal listener (the owner's access log shows the request id the
 * client sent elsewhere: the request went through the owner's platform, not straight to a socket).
 * kill -9 of the owner: another replica claims the revision when its lease runs out and serves it.
 */
test("a deployment's runs are served through any replica (official SDK, wait and stream); kill -9 of its owner re-places the revision on another replica", async (t) => {
  // Debug: the access log lines that show which replica's platform a request went through.
  const set = await startReplicas(t, ["a", "b"], { WHARF_LOG_LEVEL: "debug" });
  if (!set) return;
  const [a, b] = set.replicas;
  const res = await fetch(`${a.url}/v2/deployments`, {
    method: "POST",
    headers: { "x-api-key": set.apiKey, "content-type": "application/json" },
    body: JSON.stringify({
      name: "across",
      source: "internal_source",
      source_config: {},
      source_revision_config: { langgraph_config_path: "langgraph.json", local_path: copyProject(t, "echo") },
      secrets: [{ name: "REPLY_PREFIX", value: "ha" }],
    }),
  });
  assert.equal(res.status, 201, await res.clone().text());
  const d = (await res.json()) as { id: string; latest_revision_id: string };
  const owner = await waitFor(
    async () => {
      const [row] = await set.query<{ status: string; owner: string | null; serving_url: string | null }>(
        "SELECT status, owner, serving_url FROM deployment_revisions WHERE id = $1",
        [d.latest_revision_id],
      );
      if (row?.status === "FAILED") throw new Error(`revision failed: ${JSON.stringify(row)}`);
      return row?.status === "DEPLOYED" && row.serving_url && row.owner;
    },
    90_000,
    "the revision DEPLOYED",
  );
  const byId = new Map(set.replicas.map((r) => [replicaId(r.home), r]));
  const ownerReplica = byId.get(owner)!;
  const other = ownerReplica === a ? b : a;
  assert.ok(ownerReplica, `owner ${owner} is one of the replicas`);

  const requestId = `fwd-${crypto.randomBytes(6).toString("hex")}`;
  const client = new Client({
    apiUrl: `${other.url}/deployments/${d.id}`,
    apiKey: set.apiKey,
    defaultHeaders: { "x-request-id": requestId },
  });
  assert.equal((await ask(client, "via the other")).messages.at(-1)?.content, "ha: via the other");
  const chunks: string[] = [];
  for await (const part of client.runs.stream(null, "echo", {
    input: { messages: [{ role: "human", content: "streamed" }] },
    streamMode: "values",
  }))
    chunks.push(part.event);
  assert.ok(chunks.includes("values"), `streamed events: ${chunks.join(",")}`);
  await waitFor(
    async () => ownerReplica.output().includes(requestId),
    5000,
    "the owner's access log line of the forwarded request",
  );
  assert.ok(
    !other.output().includes(`"requestId":"${requestId}","method":"POST","path":"/runs/wait"`),
    "the agent server's own path is not served by the forwarding replica",
  );

  // kill -9 of the owner: the survivor takes the revision over when the lease runs out and serves it.
  const survivor: Replica = other;
  const killedAt = Date.now();
  await set.kill9(ownerReplica);
  const claimedMs = await waitFor(
    async () => {
      const [row] = await set.query<{ owner: string | null }>("SELECT owner FROM deployment_revisions WHERE id = $1", [
        d.latest_revision_id,
      ]);
      return row?.owner === replicaId(survivor.home) && Date.now() - killedAt;
    },
    30_000,
    "the survivor claimed the revision",
    50,
  );
  const again = new Client({ apiUrl: `${survivor.url}/deployments/${d.id}`, apiKey: set.apiKey });
  await waitFor(
    async () => (await ask(again, "after").catch(() => null))?.messages.at(-1)?.content === "ha: after",
    30_000,
    "the stable URL serving again",
    100,
  );
  const servingMs = Date.now() - killedAt;
  console.log(
    `revision owner kill -9: claimed by the survivor after ${claimedMs} ms, stable URL serving again after ${servingMs} ms (deployments lease 5000 ms)`,
  );
  // The claim follows the lease; serving again adds a confined agent server's start (seconds on a loaded host).
  assert.ok(claimedMs <= 5000 + 3000, `claimed after ${claimedMs} ms`);
  assert.ok(servingMs <= 60_000, `serving again after ${servingMs} ms`);
});
