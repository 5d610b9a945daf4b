import assert from "node:assert/strict";
import { execFileSync, type ChildProcess } from "node:child_process";
import fs from "node:fs";
import http from "node:http";
import type { AddressInfo } from "node:net";
import os from "node:os";
import path from "node:path";
import { describe, test, type TestContext } from "node:test";
import { requireCapability } from "../support/requirements.ts";
import { buildImage, freePort, onPath, startRegistry } from "./registry-support.ts";
import { startSandboxPlatform, type SandboxPlatform } from "./support.ts";

const MiB = 1024 ** 2;

function tools(t: TestContext): boolean {
  return requireCapability(
    t,
    onPath("skopeo") && onPath("umoci") && onPath("docker-registry"),
    "snapshots from images need skopeo, umoci and docker-registry (scripts/setup-host.sh)",
  );
}

function workDir(t: TestContext, procs: ChildProcess[]): string {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), "wharf-image-atk-"));
  t.after(() => {
    for (const pr of procs) pr.kill();
    fs.rmSync(dir, { recursive: true, force: true });
  });
  return dir;
}

/** Creates an image snapshot and waits for it to leave `building`. */
async function snapshot(
  p: SandboxPlatform,
  name: string,
  image: string,
  capacity = 1 << 30,
): Promise<{ id: string; status: string; status_message: string | null }> {
  const res = await p.api("/v2/sandboxes/snapshots", {
    method: "POST",
    json: { name, docker_image: image, fs_capacity_bytes: capacity },
  });
  assert.equal(res.status, 201, await res.clone().text());
  const { id } = await res.json();
  for (let i = 0; i < 600; i++) {
    const s = await (await p.api(`/v2/sandboxes/snapshots/${id}`)).json();
    if (s.status !== "building") return s;
    await new Promise((r) => setTimeout(r, 100));
  }
  throw new Error(`snapshot ${name} still building`);
}

/** A fake registry whose every answer sends the client to `realm` for a token (an internal URL). */
async function bearerRealmRegistry(t: TestContext, host: string, realm: string): Promise<number> {
  const server = http.createServer((_req, res) =>
    res
      .writeHead(401, {
        "www-authenticate": `Bearer realm="${realm}",service="x",scope="repository:x:pull"`,
        "docker-distribution-api-version": "registry/2.0",
      })
      .end(),
  );
  await new Promise<void>((r) => server.listen(0, host, r));
  t.after(() => new Promise<void>((r) => server.close(() => r())));
  return (server.address() as AddressInfo).port;
}

describe("image pulls under the egress address policy", () => {
  test("a registry on loopback is refused by default with one text for open and closed ports; a token realm on loopback is never fetched", async (t) => {
    if (!tools(t)) return;
    const p = await startSandboxPlatform(t);
    if (!p) return;
    const procs: ChildProcess[] = [];
    const dir = workDir(t, procs);
    const layout = buildImage(dir);
    const reg = await startRegistry(path.join(dir, "reg"));
    procs.push(reg.proc);
    execFileSync("skopeo", [
      "copy",
      "--quiet",
      "--dest-tls-verify=false",
      `oci:${layout}:t`,
      `docker://127.0.0.1:${reg.port}/small:1`,
    ]);
    const closed = await freePort();

    const open = await snapshot(p, "open", `127.0.0.1:${reg.port}/small:1`);
    const shut = await snapshot(p, "closed", `127.0.0.1:${closed}/small:1`);
    for (const s of [open, shut]) {
      assert.equal(s.status, "failed");
      assert.match(String(s.status_message), /egress policy.*WHARF_EGRESS_ALLOW_INTERNAL/);
    }
    assert.equal(
      open.status_message!.replace(String(reg.port), "PORT"),
      shut.status_message!.replace(String(closed), "PORT"),
    );
    const local = await snapshot(p, "localhost", `localhost:${reg.port}/small:1`);
    assert.match(String(local.status_message), /egress policy/);

    // An allowed registry that sends the client to loopback for its token: never fetched.
    let realmHits = 0;
    const realm = http.createServer((_q, r) => {
      realmHits++;
      r.end("{}");
    });
    await new Promise<void>((r) => realm.listen(0, "127.0.0.1", r));
    t.after(() => new Promise<void>((r) => realm.close(() => r())));
    const regPort = await bearerRealmRegistry(
      t,
      "127.0.0.2",
      `http://127.0.0.1:${(realm.address() as AddressInfo).port}/token`,
    );
    const allowed = await startSandboxPlatform(t, { platformEnv: { WHARF_EGRESS_ALLOW_INTERNAL: "127.0.0.2/32" } });
    const viaRealm = await snapshot(allowed!, "realm", `127.0.0.2:${regPort}/x:1`);
    assert.equal(viaRealm.status, "failed");
    assert.equal(realmHits, 0, "the token realm on loopback was fetched");
  });

  test("a small image that unpacks past the snapshot's capacity fails before unpacking; builds queue", async (t) => {
    if (!tools(t)) return;
    const p = await startSandboxPlatform(t, { platformEnv: { WHARF_EGRESS_ALLOW_INTERNAL: "127.0.0.0/8" } });
    if (!p) return;
    const procs: ChildProcess[] = [];
    const dir = workDir(t, procs);
    // 200 MiB of zeros: a few hundred KiB compressed.
    const layout = buildImage(dir, (root) => fs.writeFileSync(path.join(root, "zeros"), Buffer.alloc(200 * MiB)));
    const reg = await startRegistry(path.join(dir, "reg"));
    procs.push(reg.proc);
    execFileSync("skopeo", [
      "copy",
      "--quiet",
      "--dest-tls-verify=false",
      `oci:${layout}:t`,
      `docker://127.0.0.1:${reg.port}/bomb:1`,
    ]);
    const builds = await Promise.all(
      ["a", "b", "c"].map((n) => snapshot(p, `bomb-${n}`, `127.0.0.1:${reg.port}/bomb:1`, 64 * MiB)),
    );
    for (const s of builds) {
      assert.equal(s.status, "failed");
      assert.match(String(s.status_message), /fs_capacity_bytes/);
    }
    const images = path.join(p.manager().settings.stateDir, "oci-images");
    const left = fs.existsSync(images) ? fs.readdirSync(images) : [];
    assert.deepEqual(left, [], "nothing unpacked is left behind");
    assert.match(p.logs(), /snapshot build queued/);
    const ok = await snapshot(p, "roomy", `127.0.0.1:${reg.port}/bomb:1`, 512 * MiB);
    assert.equal(ok.status, "ready", String(ok.status_message));
  });
});
