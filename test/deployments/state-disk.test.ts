import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { test } from "node:test";
import * as tar from "tar";
import { ensureStateImage } from "../../src/deployments/runtime/state-disk.ts";
import { isRoot, requireCapability } from "../support/requirements.ts";
import type { TestPlatform } from "../support/platform.ts";
import {
  copyProject,
  lastMessage,
  logsOf,
  pollRevision,
  runWait,
  startDeploymentsPlatform,
  stateFile,
} from "./support.ts";

const MiB = 1024 * 1024;

/** Uploads a project as a tarball (the CLI's way) and deploys it. */
async function deploy(p: TestPlatform, name: string, dir: string) {
  const file = path.join(os.tmpdir(), `wharf-state-${process.pid}-${name}.tar.gz`);
  await tar.c({ gzip: true, file, cwd: dir }, fs.readdirSync(dir));
  const { upload_url, object_path } = await (await p.api("/v2/deployments/upload-url", { method: "POST" })).json();
  assert.equal((await fetch(upload_url, { method: "PUT", body: fs.readFileSync(file) })).status, 200);
  fs.rmSync(file);
  const res = await p.api("/v2/deployments", {
    method: "POST",
    json: {
      name,
      source: "internal_source",
      source_config: {},
      source_revision_config: { source_tarball_path: object_path, langgraph_config_path: "langgraph.json" },
      secrets: [],
    },
  });
  assert.equal(res.status, 201, await res.clone().text());
  const d = await res.json();
  const rev = await pollRevision(p, d.id, d.latest_revision_id, 90_000);
  assert.equal(
    rev.status,
    "DEPLOYED",
    `${rev.status_message}\n${await logsOf(p, d.id, rev.id, "build")}\n${await logsOf(p, d.id, rev.id, "deploy")}`,
  );
  return { id: d.id as string, url: d.source_config.custom_url as string };
}

test("a deployment's /state has a hard size: filling it is ENOSPC inside, the host's disk and the platform are untouched, its files outlive a new revision", async (t) => {
  if (!requireCapability(t, isRoot(), "confining deployments needs root (namespaces, cgroups, loop devices)")) return;
  const p = await startDeploymentsPlatform(t, { real: true, env: { WHARF_DEPLOYMENT_STATE_BYTES: String(32 * MiB) } });
  if (!p) return;
  const d = await deploy(p, "filler", copyProject(t, "state-filler"));
  assert.equal(lastMessage((await runWait(d.url, p.apiKey, "keep:still here", "filler")).body), "kept");
  const free = fs.statfsSync(p.home);
  const before = Number(free.bavail) * Number(free.bsize);

  // The attack: write 256 MiB to /state with a 32 MiB disk.
  const fill = await runWait(d.url, p.apiKey, "fill:256", "filler");
  assert.equal(fill.status, 200, JSON.stringify(fill.body));
  assert.match(lastMessage(fill.body), /^ENOSPC after \d+ MiB$/);
  assert.ok(Number(/after (\d+)/.exec(lastMessage(fill.body))![1]) < 32);
  const after = fs.statfsSync(p.home);
  assert.ok(
    before - Number(after.bavail) * Number(after.bsize) < 64 * MiB,
    "the host's free space did not go into the fill",
  );
  // Nothing of it on the host: the folder holds the image only; the image is sparse and small.
  const dir = path.join(p.home, "deployments", "state", d.id);
  assert.deepEqual(fs.readdirSync(dir), ["disk.img"]);
  assert.ok(fs.statSync(path.join(dir, "disk.img")).blocks * 512 <= 40 * MiB);

  // The deployment goes on (the fill was removed), its file is where it was.
  assert.equal(lastMessage((await runWait(d.url, p.apiKey, "read", "filler")).body), "still here");
  assert.equal(fs.readFileSync(await stateFile(p, d.id, "keep"), "utf8"), "still here");
  // A new revision (its server starts while the old one still serves) mounts the same disk.
  const res = await p.api(`/v2/deployments/${d.id}`, {
    method: "PATCH",
    json: { secrets: [{ name: "X", value: "y" }] },
  });
  const next = (await res.json()).latest_revision_id;
  assert.equal((await pollRevision(p, d.id, next, 90_000)).status, "DEPLOYED");
  assert.equal(lastMessage((await runWait(d.url, p.apiKey, "read", "filler")).body), "still here");
  // Deleting the deployment removes its disk with its folder.
  assert.equal((await p.api(`/v2/deployments/${d.id}`, { method: "DELETE" })).status, 204);
  assert.ok(!fs.existsSync(dir));
});

test("a state folder of before (its SQLite database) is copied into the disk at the first confined start, owned by the deployment", async (t) => {
  const root = fs.mkdtempSync(path.join(os.tmpdir(), "wharf-state-legacy-"));
  t.after(() => fs.rmSync(root, { recursive: true, force: true }));
  const dir = path.join(root, "dep");
  fs.mkdirSync(path.join(dir, "sub"), { recursive: true });
  fs.writeFileSync(path.join(dir, "wharf.db"), "threads");
  fs.writeFileSync(path.join(dir, "sub", "x"), "y");
  const image = await ensureStateImage(dir, 300_123, 32 * MiB);
  assert.equal(image, path.join(dir, "disk.img"));
  assert.deepEqual(fs.readdirSync(dir), ["disk.img"], "the host folder keeps the image only");
  assert.deepEqual(fs.readdirSync(root), ["dep"], "no image left aside");
  // Read without mounting it (debugfs, from e2fsprogs like mkfs.ext4).
  const debugfs = (cmd: string) =>
    execFileSync("debugfs", ["-R", cmd, image], { encoding: "utf8", stdio: ["ignore", "pipe", "ignore"] });
  assert.equal(debugfs("cat /wharf.db"), "threads");
  assert.equal(debugfs("cat /sub/x"), "y");
  assert.match(debugfs("stat /"), /User:\s+300123\s+Group:\s+300123/);
  // A second start finds it and changes nothing.
  const st = fs.statSync(image);
  assert.equal(await ensureStateImage(dir, 300_123, 32 * MiB), image);
  assert.equal(fs.statSync(image).ino, st.ino);
});
