import assert from "node:assert/strict";
import { test } from "node:test";
import { SandboxClient } from "langsmith-next/sandbox";
import { replicaId, startReplicas, waitFor } from "./support.ts";

test("kill -9 of the replica that runs a sandbox: it is reported `error` within the replica's lease; back on the same home, the replica ends what is left and keeps the files", async (t) => {
  const set = await startReplicas(t, ["a", "b"]);
  if (!set) return;
  const [a, b] = set.replicas;
  const client = new SandboxClient({ apiEndpoint: `${a.url}/v2/sandboxes`, apiKey: set.apiKey, maxRetries: 0 });
  const sb = await client.createSandbox(undefined, { name: "doomed" });
  await sb.write("/home/user/keep.txt", "kept\n");
  const [{ lease }] = await set.query<{ lease: string }>(
    "SELECT lease_until_ms - (extract(epoch from clock_timestamp()) * 1000)::bigint AS lease FROM replicas WHERE id = $1",
    [replicaId(a.home)],
  );
  assert.ok(Number(lease) > 0 && Number(lease) <= 3000, `lease ahead ${lease} ms`);

  const killedAt = Date.now();
  await set.kill9(a);
  const viaB = new SandboxClient({ apiEndpoint: `${b.url}/v2/sandboxes`, apiKey: set.apiKey, maxRetries: 0 });
  const lost = await waitFor(
    async () => {
      const s = await viaB.getSandbox("doomed");
      return s.status === "error" && s;
    },
    15_000,
    "the sandbox reported error",
    50,
  );
  const detectMs = Date.now() - killedAt;
  assert.match(lost.status_message ?? "", /replica that ran this sandbox stopped renewing its lease/);
  console.log(
    `sandbox of a kill -9'd replica reported error after ${detectMs} ms (lease 3000 ms, heartbeat 1000 ms, lifecycle tick 250 ms)`,
  );
  // The lease, plus the lifecycle tick and a loaded host's scheduling.
  assert.ok(detectMs <= 3000 + 1500, `detected after ${detectMs} ms`);
  // Its data plane through B is not served from nowhere.
  const res = await fetch(`${b.url}/sandboxes/dp/${sb.id}/execute`, {
    method: "POST",
    headers: { "x-api-key": set.apiKey, "content-type": "application/json" },
    body: JSON.stringify({ command: "true" }),
  });
  assert.equal(res.status, 400);
  assert.match(JSON.stringify(await res.json()), /status: error/);

  // The replica comes back on its home: its leftover processes are ended, the files stay.
  const again = await set.start("a2", a.home);
  const back = await waitFor(
    async () => {
      const s = await viaB.getSandbox("doomed");
      return s.status === "stopped" && s;
    },
    20_000,
    "the sandbox stopped by its returning replica",
  );
  assert.match(back.status_message ?? "", /came back/);
  const woken = await viaB.getSandbox("doomed");
  assert.equal(new TextDecoder().decode(await woken.read("/home/user/keep.txt")), "kept\n");
  await new SandboxClient({
    apiEndpoint: `${again.url}/v2/sandboxes`,
    apiKey: set.apiKey,
    maxRetries: 0,
  }).deleteSandbox("doomed");
});
