import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import crypto from "node:crypto";
import fs from "node:fs";
import path from "node:path";
import { test } from "node:test";
import { SandboxClient } from "langsmith-next/sandbox";
import { replicaId, startReplicas, type Replica } from "./support.ts";

/** Host processes whose command line holds `marker` (the test runs as root and sees the sandboxes' processes). */
function running(marker: string): boolean {
  try {
    execFileSync("pgrep", ["-f", marker], { stdio: "ignore" });
    return true;
  } catch {
    return false; // pgrep exits 1 when nothing matches
  }
}

/** Waits until the replica's app answered `method path` (its request log lines, at debug level, reach the pipe a moment after). */
async function served(r: Replica, method: string, path: string): Promise<void> {
  await until(
    `${r.name} answered ${method} ${path}`,
    () => r.output().includes(`"method":"${method}","path":"${path}"`),
    5000,
  );
}

async function until(what: string, check: () => boolean | Promise<boolean>, ms = 10_000): Promise<void> {
  const deadline = Date.now() + ms;
  while (!(await check())) {
    if (Date.now() > deadline) assert.fail(`timed out waiting until ${what}`);
    await new Promise((r) => setTimeout(r, 100));
  }
}

test("stop, start, snapshot and delete of a sandbox created through replica A, sent to replica B, act on A's processes and files", async (t) => {
  const set = await startReplicas(t, ["a", "b"], { WHARF_LOG_LEVEL: "debug" });
  if (!set) return;
  const [a, b] = set.replicas;
  const clientA = new SandboxClient({ apiEndpoint: `${a.url}/v2/sandboxes`, apiKey: set.apiKey, maxRetries: 0 });
  const clientB = new SandboxClient({ apiEndpoint: `${b.url}/v2/sandboxes`, apiKey: set.apiKey, maxRetries: 0 });
  const created = await clientA.createSandbox(undefined, { name: "ctl" });
  const ownerA = replicaId(a.home);
  const owner = async () =>
    (await set.query<{ owner_replica: string }>("SELECT owner_replica FROM sandboxes WHERE id = $1", [created.id]))[0]
      ?.owner_replica;
  assert.equal(await owner(), ownerA);
  const boxDir = path.join(a.home, "sandboxes", "boxes", created.id!);
  assert.ok(fs.existsSync(boxDir), "A keeps the sandbox's files under its home");

  const sleeper = () => `sleep ${100_000 + crypto.randomInt(800_000)}`;
  const first = sleeper();
  const sbA = await clientA.getSandbox("ctl");
  await sbA.write("/home/user/keep.txt", "kept across stop and start\n");
  await sbA.run(`nohup ${first} >/dev/null 2>&1 &`, { timeout: 20 });
  await until("the sandbox's process runs", () => running(first));

  // Stop through B: A's processes end, the row reads stopped.
  await clientB.stopSandbox("ctl");
  assert.equal((await clientA.getSandbox("ctl")).status, "stopped");
  await until("the stopped sandbox's processes are gone", () => !running(first));
  await served(a, "POST", "/v2/sandboxes/boxes/ctl/stop"); // A, which runs it, stopped it

  // PATCH through B (a proxy_config needs a ready sandbox: refused by the owner as it would be directly).
  const patched = await fetch(`${b.url}/v2/sandboxes/boxes/ctl`, {
    method: "PATCH",
    headers: { "x-api-key": set.apiKey, "content-type": "application/json" },
    body: JSON.stringify({ labels: { via: "b" } }),
  });
  assert.equal(patched.status, 200, await patched.clone().text());
  assert.deepEqual(((await patched.json()) as { labels: Record<string, string> }).labels, { via: "b" });

  // Start through B while A is live: A starts it again, with its files.
  const started = await clientB.startSandbox("ctl");
  assert.equal(started.status, "ready");
  assert.equal(await owner(), ownerA, "the live owner started it");
  await served(a, "POST", "/v2/sandboxes/boxes/ctl/start");
  const sbB = await clientB.getSandbox("ctl");
  const cat = await sbB.run("cat /home/user/keep.txt", { timeout: 20 });
  assert.equal(cat.exit_code, 0, cat.stderr);
  assert.equal(cat.stdout, "kept across stop and start\n");

  // A snapshot captured through B holds A's files.
  const snap = await clientB.captureSnapshot("ctl", "ctl-snap", { timeout: 60 });
  assert.equal(snap.status, "ready");
  await served(a, "POST", "/v2/sandboxes/boxes/ctl/snapshot");

  // Delete through B: A's processes and files go.
  const second = sleeper();
  await sbB.run(`nohup ${second} >/dev/null 2>&1 &`, { timeout: 20 });
  await until("the restarted sandbox's process runs", () => running(second));
  await clientB.deleteSandbox("ctl");
  await until("the deleted sandbox's processes are gone", () => !running(second));
  assert.equal(fs.existsSync(boxDir), false, "A removed the sandbox's files");
  await served(a, "DELETE", "/v2/sandboxes/boxes/ctl");
  await served(a, "PATCH", "/v2/sandboxes/boxes/ctl");
  const gone = await fetch(`${a.url}/v2/sandboxes/boxes/ctl`, { headers: { "x-api-key": set.apiKey } });
  assert.equal(gone.status, 404);
  await clientA.deleteSnapshot(snap.id);
});
