import assert from "node:assert/strict";
import fs from "node:fs";
import path from "node:path";
import { test } from "node:test";
import { SandboxClient } from "langsmith-next/sandbox";
import { startReplicas, waitFor } from "./support.ts";

test("a sandbox deleted while its replica was dead: back on its home, the replica removes the folder it left", async (t) => {
  const set = await startReplicas(t, ["a", "b"]);
  if (!set) return;
  const [a, b] = set.replicas;
  const viaA = new SandboxClient({ apiEndpoint: `${a.url}/v2/sandboxes`, apiKey: set.apiKey, maxRetries: 0 });
  const sb = await viaA.createSandbox(undefined, { name: "left-behind" });
  await sb.write("/home/user/data.txt", "left\n");
  const id = sb.id;
  assert.ok(id);
  const box = path.join(a.home, "sandboxes", "boxes", id);
  assert.ok(fs.existsSync(box), `its folder is under its replica's home: ${box}`);

  await set.kill9(a);
  const viaB = new SandboxClient({ apiEndpoint: `${b.url}/v2/sandboxes`, apiKey: set.apiKey, maxRetries: 0 });
  await waitFor(
    async () => (await viaB.getSandbox("left-behind")).status === "error",
    15_000,
    "the sandbox reported error",
    50,
  );
  await viaB.deleteSandbox("left-behind");
  assert.equal((await set.query("SELECT id FROM sandboxes WHERE id = $1", [id])).length, 0, "its row is gone");
  assert.ok(fs.existsSync(box), "its folder is still on the dead replica's machine");

  await set.start("a2", a.home);
  await waitFor(async () => !fs.existsSync(box), 20_000, "the left-behind folder removed by the returning replica");
});
