import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import { test } from "node:test";
import { startSandboxPlatform } from "./support.ts";

test("disk images: fs_capacity_bytes is a hard limit; files survive stop/start; snapshots in and out", async (t) => {
  // No warm pool: the loop devices counted below are this test's own sandboxes'.
  const p = await startSandboxPlatform(t, { env: { WHARF_SANDBOX_DISK: "image", WHARF_SANDBOX_WARM_POOL: "0" } });
  if (!p) return;
  // Only loop devices backed by this platform's files: other tests may run sandboxes meanwhile.
  const ownLoops = () =>
    execFileSync("losetup", ["-a"], { encoding: "utf8" })
      .split("\n")
      .filter((l) => l.includes(`(${p.home}/`)).length;
  const loopsBefore = ownLoops();
  const box = await p.create({ name: "disk", fs_capacity_bytes: 64 * 1024 * 1024 });
  let r = await p.exec(box, "echo keep > ~/a.txt; dd if=/dev/zero of=~/big bs=1M count=200 2>&1; rm -f ~/big");
  assert.match(r.body.stdout, /No space left on device|File too large/);
  r = await p.exec(box, "head -c 10000000 /dev/zero > ~/ten && echo wrote-10MB");
  assert.equal(r.body.stdout, "wrote-10MB\n");
  assert.equal((await p.api("/v2/sandboxes/boxes/disk/stop", { method: "POST" })).status, 204);
  let res = await p.api("/v2/sandboxes/boxes/disk/snapshot", { method: "POST", json: { name: "from-stopped" } });
  const snap = await res.json();
  assert.equal(snap.status, "ready", JSON.stringify(snap));
  assert.ok(snap.fs_used_bytes >= 10_000_000);
  res = await p.api("/v2/sandboxes/boxes/disk/start", { method: "POST" });
  assert.equal((await res.json()).status, "ready");
  assert.equal((await p.exec(box, "cat ~/a.txt")).body.stdout, "keep\n");
  res = await p.api("/v2/sandboxes/boxes/disk/snapshot", { method: "POST", json: { name: "from-running" } });
  assert.equal((await res.json()).status, "ready");
  const copy = await p.create({ name: "copy", snapshot_name: "from-running" });
  assert.equal((await p.exec(copy, "cat ~/a.txt; stat -c %s ~/ten")).body.stdout, "keep\n10000000\n");
  for (const n of ["disk", "copy"])
    assert.equal((await p.api(`/v2/sandboxes/boxes/${n}`, { method: "DELETE" })).status, 204);
  // Loop devices go away with the sandboxes' mount namespaces.
  const loopsAfter = ownLoops();
  assert.ok(loopsAfter <= loopsBefore, `loop devices leaked: ${loopsBefore} before, ${loopsAfter} after`);
});
